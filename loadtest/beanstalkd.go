package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/internal/logproc"
)

// The beanstalkd phase is a baseline without delayq: beanstalkd (Debian's
// package; 1.12 is measured in docs/benchmarks.md), a queue that keeps
// delayed jobs on one machine with a write-ahead log, as delayq's local
// store does. The phase starts its own beanstalkd on 127.0.0.1 and a port
// the kernel picks, with its binlog in a temporary directory, fsyncing it
// at most every -beanstalkd-fsync; puts -burst jobs that come due at one
// instant; and drains them with bsConsumers connections, each reserving a
// job and deleting it, one command after the other, as a plain beanstalk
// worker does. The client is the few commands of the beanstalk protocol
// (protocol.txt of beanstalkd) the phase needs.
//
// beanstalkd counts delays and pauses in whole seconds: delays alone would
// spread jobs pushed over a second or more across that much time. So the
// tube is paused while the jobs are put, each with a delay of a second:
// every job goes through beanstalkd's delay heap, as a delayq job through
// its schedule, and waits ready in the paused tube. Once none is delayed,
// the pause is set to end a second later: that is the instant, when the
// consumers' reserves, already waiting, get the jobs.

const (
	bsConsumers = 8    // the method: 8 connections doing reserve+delete
	bsPutPause  = 3600 // seconds the tube is paused while the jobs are put
	bsPushConns = 4    // connections that put, each pipelining bsPushBatch puts
	bsPushBatch = 1000 // puts per write
	bsTTR       = 30   // seconds a reserved job stays reserved, as rawLease
)

// bsListening is beanstalkd's line, with -V, naming the address it bound.
var bsListening = regexp.MustCompile(`bind \d+ (\S+)`)

// beanstalkdResult is the beanstalkd baseline.
type beanstalkdResult struct {
	baseline
	Deleted int64 `json:"deleted"`
}

// beanstalkd runs the beanstalkd baseline on a beanstalkd of its own,
// which it stops (by its process) before it returns.
func beanstalkd(ctx context.Context, cfg *config, logf func(string, ...any)) (*beanstalkdResult, error) {
	res := &beanstalkdResult{baseline: newBaseline(cfg.Burst, bsConsumers)}
	bin, err := exec.LookPath("beanstalkd")
	if err != nil {
		return nil, errors.New("beanstalkd: not found in PATH; install it (Debian: apt-get install beanstalkd)")
	}
	dir, err := os.MkdirTemp("", "delayq-beanstalkd-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fsync := strconv.FormatInt(cfg.BeanstalkdFsync.Milliseconds(), 10)
	p, seen, err := logproc.Start(ctx, exec.Command(bin, "-V", "-l", "127.0.0.1", "-p", "0", "-b", dir, "-f", fsync),
		30*time.Second, bsListening)
	if err != nil {
		return nil, fmt.Errorf("beanstalkd: %w", err)
	}
	defer p.Stop(10 * time.Second)
	addr, pid := seen[len(seen)-1][1], p.PID()

	// beanstalkd names the address once bound, a moment before it listens.
	var ctl *bsConn
	for wait := time.Now().Add(10 * time.Second); ; {
		if ctl, err = bsDial(ctx, addr); err == nil || time.Now().After(wait) || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	stats, err := ctl.yaml("stats")
	if err != nil {
		return nil, err
	}
	res.Server = fmt.Sprintf("beanstalkd %s, binlog, fsync at most every %s ms (-f %s)", stats["version"], fsync, fsync)
	if cfg.BeanstalkdFsync == 0 {
		res.Server = fmt.Sprintf("beanstalkd %s, binlog, fsync after every write (-f 0)", stats["version"])
	}

	// The tube exists while a connection uses it: ctl's use keeps it for
	// the pause, and to read its counts at the end.
	tube := fmt.Sprintf("delayq-burst-%d", time.Now().UnixNano())
	if err := ctl.expect("use "+tube, "USING"); err != nil {
		return nil, err
	}
	if err := ctl.expect(fmt.Sprintf("pause-tube %s %d", tube, bsPutPause), "PAUSED"); err != nil {
		return nil, err
	}
	logf("beanstalkd: %s; pushing %d jobs, each delayed a second, to a paused tube", res.Server, cfg.Burst)

	// The consumers first: their reserves wait for the instant.
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	consumers := make([]*bsConn, bsConsumers)
	for i := range consumers {
		if consumers[i], err = bsDial(dctx, addr); err != nil {
			return nil, err
		}
		defer consumers[i].Close()
		if err := consumers[i].expect("watch "+tube, "WATCHING"); err != nil {
			return nil, err
		}
		if err := consumers[i].expect("ignore default", "WATCHING"); err != nil {
			return nil, err
		}
	}
	var (
		deleted atomic.Int64
		errs    errRecorder
		wg      sync.WaitGroup
		end     time.Time
		endOnce sync.Once
	)
	for _, c := range consumers {
		wg.Go(func() {
			for dctx.Err() == nil {
				n, err := c.reserveDelete()
				if err != nil {
					if dctx.Err() == nil {
						errs.add(err)
					}
					return
				}
				if deleted.Add(n) >= int64(cfg.Burst) {
					endOnce.Do(func() { end = time.Now(); cancel() })
				}
			}
		})
	}
	// Closing the connections ends the reserves that wait for a job once
	// every job is deleted.
	stop := context.AfterFunc(dctx, func() {
		for _, c := range consumers {
			c.Close()
		}
	})
	defer stop()

	start := time.Now()
	err = bsPush(dctx, addr, tube, cfg.Burst)
	res.PushSeconds = time.Since(start).Seconds()
	var due time.Time
	if err == nil {
		due, err = bsRelease(dctx, ctl, tube, cfg.Burst)
	}
	if err != nil {
		cancel()
		wg.Wait()
		return res, err
	}
	logf("  pushed in %.2fs; due at %s", res.PushSeconds, due.Format("15:04:05.000"))

	select {
	case <-dctx.Done():
	case <-time.After(time.Until(due)):
	}
	meter := startServerCPU(pid)
	wg.Wait()
	if end.IsZero() {
		end = time.Now()
	}
	res.serverFigures = meter.figures(end.Sub(due), cfg.Burst)
	res.AckedAll = end.Sub(due).Seconds()
	res.Deleted = deleted.Load()
	res.PerSecond = float64(res.Deleted) / res.AckedAll

	// Nothing may be left: the tube holds no job, and it had every one.
	ts, err := ctl.yaml("stats-tube " + tube)
	if err != nil {
		errs.add(fmt.Errorf("stats-tube: %w", err))
	}
	for _, k := range []string{"current-jobs-ready", "current-jobs-delayed", "current-jobs-reserved", "current-jobs-buried"} {
		n, _ := strconv.ParseInt(ts[k], 10, 64)
		res.Left += n
	}
	if total, _ := strconv.Atoi(ts["total-jobs"]); err == nil && total != cfg.Burst {
		errs.add(fmt.Errorf("the tube had %d jobs of %d put", total, cfg.Burst))
	}
	res.Errors, res.FirstErr = errs.n.Load(), errs.first
	switch {
	case res.Deleted < int64(res.Jobs):
		return res, fmt.Errorf("beanstalkd: deleted %d of %d jobs within the phase's 5 min (first error: %s)", res.Deleted, res.Jobs, res.FirstErr)
	case res.Left > 0:
		return res, fmt.Errorf("beanstalkd: %d jobs left in the tube after the last delete", res.Left)
	case res.Errors > 0:
		return res, fmt.Errorf("beanstalkd: %d errors, the first: %s", res.Errors, res.FirstErr)
	}
	return res, nil
}

// bsPush puts n jobs of sampleBody, each delayed a second, into tube from
// bsPushConns connections.
func bsPush(ctx context.Context, addr, tube string, n int) error {
	var (
		next atomic.Int64
		errs errRecorder
		wg   sync.WaitGroup
	)
	for range bsPushConns {
		wg.Go(func() {
			c, err := bsDial(ctx, addr)
			if err != nil {
				errs.add(err)
				return
			}
			defer c.Close()
			if err := c.expect("use "+tube, "USING"); err != nil {
				errs.add(err)
				return
			}
			for ctx.Err() == nil {
				first := int(next.Add(bsPushBatch)) - bsPushBatch
				if first >= n {
					return
				}
				k := min(bsPushBatch, n-first)
				for range k {
					fmt.Fprintf(c.w, "put 0 1 %d %d\r\n%s\r\n", bsTTR, len(sampleBody), sampleBody)
				}
				if err := c.w.Flush(); err != nil {
					errs.add(err)
					return
				}
				for range k {
					line, err := c.line()
					if err != nil {
						errs.add(err)
						return
					}
					if !strings.HasPrefix(line, "INSERTED ") {
						errs.add(fmt.Errorf("beanstalkd: put: %s", line))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if errs.n.Load() > 0 {
		return errors.New(errs.first)
	}
	return nil
}

// bsRelease waits until the paused tube holds n jobs ready, none delayed
// (the last delays end a second after the last put), then has ctl end the
// pause a second later, and returns that instant.
func bsRelease(ctx context.Context, ctl *bsConn, tube string, n int) (time.Time, error) {
	for {
		ts, err := ctl.yaml("stats-tube " + tube)
		if err != nil {
			return time.Time{}, err
		}
		if ts["current-jobs-delayed"] == "0" && ts["current-jobs-ready"] == strconv.Itoa(n) {
			break
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	due := time.Now().Add(time.Second)
	if err := ctl.expect("pause-tube "+tube+" 1", "PAUSED"); err != nil {
		return time.Time{}, err
	}
	return due, nil
}

// bsConn is a connection speaking the beanstalk protocol.
type bsConn struct {
	net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func bsDial(ctx context.Context, addr string) (*bsConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("beanstalkd: %w", err)
	}
	return &bsConn{Conn: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

// line reads one answer line, without its \r\n.
func (c *bsConn) line() (string, error) {
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("beanstalkd: %w", err)
	}
	return strings.TrimSuffix(s, "\r\n"), nil
}

// command sends cmd and returns its answer line.
func (c *bsConn) command(cmd string) (string, error) {
	c.w.WriteString(cmd + "\r\n")
	if err := c.w.Flush(); err != nil {
		return "", fmt.Errorf("beanstalkd: %w", err)
	}
	return c.line()
}

// expect sends cmd and fails unless its answer starts with want.
func (c *bsConn) expect(cmd, want string) error {
	line, err := c.command(cmd)
	if err == nil && !strings.HasPrefix(line, want) {
		err = fmt.Errorf("beanstalkd: %s: %s", cmd, line)
	}
	return err
}

// data reads the n bytes and \r\n that follow an answer line.
func (c *bsConn) data(n int) ([]byte, error) {
	b := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, fmt.Errorf("beanstalkd: %w", err)
	}
	return b[:n], nil
}

// yaml sends a stats command and returns its flat YAML answer's fields.
func (c *bsConn) yaml(cmd string) (map[string]string, error) {
	line, err := c.command(cmd)
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(line, "OK "))
	if !strings.HasPrefix(line, "OK ") || err != nil {
		return nil, fmt.Errorf("beanstalkd: %s: %s", cmd, line)
	}
	b, err := c.data(n)
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	for l := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ": "); ok {
			fields[k] = strings.Trim(v, `"`)
		}
	}
	return fields, nil
}

// reserveDelete reserves a job, waiting up to a second for one, and
// deletes it: it returns 1 once deleted, 0 when none came.
func (c *bsConn) reserveDelete() (int64, error) {
	line, err := c.command("reserve-with-timeout 1")
	if err != nil {
		return 0, err
	}
	var id uint64
	var n int
	switch {
	case line == "TIMED_OUT" || line == "DEADLINE_SOON":
		return 0, nil
	case strings.HasPrefix(line, "RESERVED "):
		if _, err := fmt.Sscanf(line, "RESERVED %d %d", &id, &n); err != nil {
			return 0, fmt.Errorf("beanstalkd: %s: %w", line, err)
		}
	default:
		return 0, fmt.Errorf("beanstalkd: reserve: %s", line)
	}
	body, err := c.data(n)
	if err != nil {
		return 0, err
	}
	if len(body) != len(sampleBody) {
		return 0, fmt.Errorf("beanstalkd: job %d: body of %d bytes", id, len(body))
	}
	if err := c.expect("delete "+strconv.FormatUint(id, 10), "DELETED"); err != nil {
		return 0, err
	}
	return 1, nil
}
