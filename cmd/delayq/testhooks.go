//go:build delayq_testhooks

package main

import (
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/core"
)

// This file is built only into the binary of cmd/delayq's end-to-end tests
// (go build -tags delayq_testhooks): a clock a test moves at run time.
// System clock tools do not reach a Go binary's clock alone, and moving
// the machine's clock moves the backend's and the checker's too. The
// release binary has no such hook.

// testClockFileEnv names the file whose content, a Go duration ("-2s",
// "1h", "0s"), is the instance's clock minus the real time. The clock
// reads it at start and then every testClockPoll; a missing or empty file
// is 0, a malformed one keeps the offset before.
const testClockFileEnv = "DELAYQ_TEST_CLOCK_FILE"

// testClockPoll is how often the offset file is read: a jump takes effect
// within it, or later on a loaded machine. Each offset taken is written
// back to the file's name with ".seen" added, so that a test knows when
// the instance runs on it.
const testClockPoll = 5 * time.Millisecond

func init() {
	path := os.Getenv(testClockFileEnv)
	if path == "" {
		return
	}
	c := &offsetClock{Clock: core.RealClock(), path: path}
	c.read()
	go c.follow()
	instanceClock = func() core.Clock { return c }
}

// offsetClock is the real clock moved by the offset its file holds. Its
// timers run on real durations, as Go's do when the system clock jumps
// (they use the monotonic clock): only Now moves.
type offsetClock struct {
	core.Clock
	path   string
	offset atomic.Int64 // ns
	seen   string       // the offset last written to path+".seen"
}

// Now is the real time plus the offset.
func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// read takes the offset from the file, and says it took it.
func (c *offsetClock) read() {
	defer c.tell()
	b, err := os.ReadFile(c.path)
	if err != nil {
		if os.IsNotExist(err) {
			c.offset.Store(0)
		}
		return
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		c.offset.Store(0)
		return
	}
	if d, err := time.ParseDuration(v); err == nil {
		c.offset.Store(int64(d))
	}
}

// tell writes the offset in use to path+".seen" when it changed (renamed
// into place: a reader never sees half of it).
func (c *offsetClock) tell() {
	v := time.Duration(c.offset.Load()).String()
	if v == c.seen {
		return
	}
	tmp := c.path + ".seen.tmp"
	if os.WriteFile(tmp, []byte(v), 0o644) == nil && os.Rename(tmp, c.path+".seen") == nil {
		c.seen = v
	}
}

// follow reads the file every testClockPoll, for the life of the process.
func (c *offsetClock) follow() {
	t := time.NewTicker(testClockPoll)
	for range t.C {
		c.read()
	}
}
