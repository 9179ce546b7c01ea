// Package coretest holds helpers for tests of code built on core: a fake
// core.Clock.
package coretest

import (
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/delayq/delayq/core"
)

var _ core.Clock = (*FakeClock)(nil)

// FakeClock is clockwork's fake clock as a core.Clock. Its time moves only
// when a test calls Advance; BlockUntilContext and the rest of
// *clockwork.FakeClock are there as they are. It exists because
// clockwork's NewTimer, AfterFunc and NewTicker return clockwork's own
// Timer and Ticker, which Go does not take for core's.
type FakeClock struct{ *clockwork.FakeClock }

// NewFakeClock returns a FakeClock set to a fixed, arbitrary time.
func NewFakeClock() *FakeClock { return &FakeClock{clockwork.NewFakeClock()} }

// NewFakeClockAt returns a FakeClock set to t.
func NewFakeClockAt(t time.Time) *FakeClock { return &FakeClock{clockwork.NewFakeClockAt(t)} }

// NewTimer returns a timer that fires once the clock has been advanced by d.
func (c *FakeClock) NewTimer(d time.Duration) core.Timer { return c.FakeClock.NewTimer(d) }

// AfterFunc calls f once the clock has been advanced by d.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) core.Timer {
	return c.FakeClock.AfterFunc(d, f)
}

// NewTicker returns a ticker that ticks each time the clock has been
// advanced by d.
func (c *FakeClock) NewTicker(d time.Duration) core.Ticker { return c.FakeClock.NewTicker(d) }
