package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// profiler saves CPU profiles of delayq, one per phase, through its
// --pprof endpoint, with the top functions as text beside each.
type profiler struct {
	url  string
	out  string
	on   bool
	logf func(string, ...any)
	wg   sync.WaitGroup
}

// start profiles for d in the background; wait waits for the profile.
func (p *profiler) start(ctx context.Context, phase string, d time.Duration) {
	if !p.on || p.url == "" {
		return
	}
	p.wg.Go(func() {
		if err := p.save(ctx, phase, d); err != nil {
			p.logf("profile %s: %v", phase, err)
		}
	})
}

func (p *profiler) wait() { p.wg.Wait() }

func (p *profiler) save(ctx context.Context, phase string, d time.Duration) error {
	secs := int(math.Ceil(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.url, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	path := filepath.Join(p.out, "cpu-"+phase+".pprof")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// Go's profiles carry their symbols, so no binary is needed.
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=40", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go tool pprof: %w: %s", err, top)
	}
	return os.WriteFile(filepath.Join(p.out, "cpu-"+phase+".txt"), top, 0o644)
}
