// Package k6_test runs the k6 scripts of this directory for a few seconds
// at low rates against a fresh `delayq serve` on the embedded backend, so
// that a change to the API or to a script that breaks one of them fails the
// build. The rates are low and the latency limits loose: this checks that
// the scripts work and their thresholds hold, not how fast delayq is.
package k6_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/internal/logproc"
)

// Install says how to get k6, for skip and failure messages.
const Install = "install k6 v1.8.1 with `go install go.k6.io/k6@v1.8.1` (about 90 s; it lands in $(go env GOPATH)/bin)"

// requireK6 returns the k6 binary: on PATH, else in GOBIN or the first
// GOPATH's bin, where `go install` puts it. Without one it fails the test
// under CI (CI=true) and skips it elsewhere.
func requireK6(t *testing.T) string {
	t.Helper()
	bin, err := findK6()
	if err == nil {
		var out []byte
		out, err = exec.Command(bin, "version").Output()
		// The scripts need k6/websockets, which k6 has had since v1.0.
		if err == nil && !regexp.MustCompile(`k6 v[1-9]`).Match(out) {
			err = errors.New("k6 " + strings.TrimSpace(string(out)) + " is older than v1")
		}
		if err == nil {
			t.Logf("%s", bytes.TrimSpace(out))
			return bin
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v: %s", err, Install)
	}
	t.Skipf("%v: %s", err, Install)
	return ""
}

func findK6() (string, error) {
	if bin, err := exec.LookPath("k6"); err == nil {
		return bin, nil
	}
	var dirs []string
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(string(out), "\n")
		if gobin := strings.TrimSpace(lines[0]); gobin != "" {
			dirs = append(dirs, gobin)
		}
		if len(lines) > 1 && strings.TrimSpace(lines[1]) != "" {
			dirs = append(dirs, filepath.Join(filepath.SplitList(strings.TrimSpace(lines[1]))[0], "bin"))
		}
	}
	for _, dir := range dirs {
		bin := filepath.Join(dir, "k6")
		if fi, err := os.Stat(bin); err == nil && !fi.IsDir() {
			return bin, nil
		}
	}
	return "", errors.New("k6 is neither on PATH nor in " + strings.Join(dirs, " or "))
}

// buildDelayq builds cmd/delayq into dir, with -race when this test runs
// with it, so that a data race the load provokes in the server fails the
// test (as the end-to-end tests of cmd/delayq do).
func buildDelayq(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "delayq")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "github.com/delayq/delayq/cmd/delayq")...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

var httpListening = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// startServer runs `delayq serve` on the default backend with its data in
// dataDir, on free loopback ports, and returns the base URL of its HTTP API
// once it listens. The process is killed at the end of the test.
func startServer(t *testing.T, bin, dataDir string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data", dataDir,
		"--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1")
	cmd.Env = withoutPrefix(os.Environ(), "DELAYQ_") // the developer's settings change nothing
	p, seen, err := logproc.Start(t.Context(), cmd, 30*time.Second, httpListening)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		if strings.Contains(p.Log(), "WARNING: DATA RACE") {
			t.Errorf("the server reported a data race")
		}
		if t.Failed() {
			t.Logf("delayq serve log:\n%s", p.Log())
		}
	})
	return "http://" + seen[len(seen)-1][1]
}

func withoutPrefix(env []string, prefix string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

// summary is the part of k6's --summary-export JSON the test reads.
type summary struct {
	Metrics map[string]struct {
		Count  *float64 `json:"count"`
		Passes *float64 `json:"passes"`
		Fails  *float64 `json:"fails"`
	} `json:"metrics"`
}

// count returns a Counter's count, 0 when the metric is absent.
func (s summary) count(name string) float64 {
	if m, ok := s.Metrics[name]; ok && m.Count != nil {
		return *m.Count
	}
	return 0
}

// runK6 runs script with the variables env against base, and returns its
// summary. It fails the test when k6 exits non-zero: a threshold did not
// hold (99), the script failed, or it did not finish within 40s.
func runK6(t *testing.T, k6, base, script string, env ...string) summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	export := filepath.Join(t.TempDir(), "summary.json")
	args := []string{"run", "--quiet", "--no-color", "--no-usage-report",
		"--address=", // no REST API server: it would listen on a fixed port
		"--summary-export", export, "--env", "BASE_URL=" + base}
	for _, e := range env {
		args = append(args, "--env", e)
	}
	cmd := exec.CommandContext(ctx, k6, append(args, script)...)
	// K6_* variables of the developer (outputs, options) would change the run.
	cmd.Env = withoutPrefix(os.Environ(), "K6_")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("k6 run %s did not finish within 40s:\n%s", script, out.String())
	}
	require.NoError(t, err, "k6 run %s: a threshold failed (exit 99) or the script broke:\n%s", script, out.String())
	t.Logf("k6 run %s %s: %s", script, strings.Join(env, " "), time.Since(start).Round(time.Millisecond))
	b, err := os.ReadFile(export)
	require.NoError(t, err)
	var s summary
	require.NoError(t, json.Unmarshal(b, &s))
	if m, ok := s.Metrics["checks"]; ok && m.Fails != nil {
		require.Zero(t, *m.Fails, "failed checks:\n%s", out.String())
	}
	return s
}

func TestScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs k6 against a built delayq for about 15 s")
	}
	k6 := requireK6(t)
	dir := t.TempDir()
	base := startServer(t, buildDelayq(t, dir), filepath.Join(dir, "data"))
	// Latency limits above the defaults: the server may be built with
	// -race and share the machine with other tests.
	const (
		slow     = "2000"
		duration = "DURATION=3s"
	)

	// Sequential, so that each script has the server to itself.
	t.Run("push", func(t *testing.T) {
		s := runK6(t, k6, base, "push.js", duration, "SINGLE_RATE=20", "BATCH_RATE=1", "BATCH_SIZE=100",
			"P99_SINGLE_MS="+slow, "P99_BATCH_MS="+slow)
		require.Positive(t, s.count("iterations"))
		// 3 s at 1 batch/s of 100, plus the single pushes.
		require.Greater(t, s.count("jobs_pushed"), 200.0)
	})
	t.Run("subscribe", func(t *testing.T) {
		s := runK6(t, k6, base, "subscribe.js", duration, "RATE=20", "SUBSCRIBERS=2", "PREFETCH=4",
			"LATENESS_P99_MS="+slow, "P99_PUSH_MS="+slow)
		pushed, received := s.count("jobs_pushed"), s.count("jobs_received")
		require.Positive(t, pushed)
		// At least once: redeliveries may add to received, never subtract.
		require.GreaterOrEqual(t, received, pushed)
		require.GreaterOrEqual(t, s.count("jobs_acked"), pushed)
	})
	t.Run("mix", func(t *testing.T) {
		s := runK6(t, k6, base, "mix.js", duration, "RATE=20", "P99_MS="+slow)
		require.Positive(t, s.count("iterations"))
		require.Positive(t, s.count("jobs_pushed"))
		require.Positive(t, s.count("jobs_cancelled"))
	})
}
