// Package logproc runs a child process and watches its log for the lines
// that say it is ready (a server naming the addresses it listens on). The
// load harness and the tests that run `delayq serve` or a backend's server
// as a process share it.
package logproc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// maxLog bounds the log a Proc keeps; later lines are dropped.
const maxLog = 8 << 20

// Proc is a started process.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	log bytes.Buffer
	err error // cmd.Wait's, once done is closed
}

// Start starts cmd with its standard output and error read as one log,
// and returns once a line matches ready, with the submatches of that line
// and, before it, of every earlier line that matched one of also. It fails
// when the process exits first, when timeout passes (the process is then
// killed) or when ctx ends. On Linux the process is killed when the
// caller's process dies, so none outlives an interrupted run.
func Start(ctx context.Context, cmd *exec.Cmd, timeout time.Duration, ready *regexp.Regexp, also ...*regexp.Regexp) (*Proc, [][]string, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = sysProcAttr()
	}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	found := make(chan [][]string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var seen [][]string
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if p.log.Len() < maxLog {
				p.log.WriteString(line + "\n")
			}
			p.mu.Unlock()
			if sent {
				continue
			}
			for _, re := range also {
				if m := re.FindStringSubmatch(line); m != nil {
					seen = append(seen, m)
				}
			}
			if m := ready.FindStringSubmatch(line); m != nil {
				found <- append(seen, m)
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m := <-found:
		return p, m, nil
	case <-p.done:
		return nil, nil, fmt.Errorf("%s exited before it was ready (%v):\n%s", cmd.Path, p.waitErr(), p.Log())
	case <-t.C:
		p.Kill()
		return nil, nil, fmt.Errorf("%s not ready after %s:\n%s", cmd.Path, timeout, p.Log())
	case <-ctx.Done():
		p.Kill()
		return nil, nil, ctx.Err()
	}
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and its log is read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Log returns the log so far (its first 8 MiB).
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *Proc) waitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Err is what waiting for the process returned (an *exec.ExitError for a
// non-zero exit); call it once Done is closed.
func (p *Proc) Err() error { return p.waitErr() }

// Stop sends SIGTERM and waits for the exit, killing the process after
// timeout.
func (p *Proc) Stop(timeout time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.Kill()
	}
}

// Kill kills the process and waits for its exit.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
