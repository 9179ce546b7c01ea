package core

import "time"

// Clock is where delayq takes time from: the current time, and the timers
// and tickers that wait on it. Production code passes RealClock(); tests
// pass a fake clock (coretest.FakeClock, clockwork's) and advance it instead
// of sleeping.
//
// core declares its own Clock, with only the methods delayq calls, rather
// than exporting a library's: core's API names no third-party type, so a
// new version of that library cannot change it, and any fake, or a clock
// built for a simulation, fits by its methods alone.
//
// Code that reads time.Now or starts a time.Timer beside an injected Clock
// says why in a comment: a deadline set on a socket, a timestamp that
// records when something really happened (ULIDs, logs), a timer that must
// agree with a server's or a library's own clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed, as
	// time.After does.
	After(d time.Duration) <-chan time.Time
	// NewTimer returns a Timer that fires once d has passed, as
	// time.NewTimer does.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has passed, as
	// time.AfterFunc does. The returned Timer's Chan is nil.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTicker returns a Ticker that ticks every d, as time.NewTicker
	// does; d must be positive.
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer taken from a Clock.
type Timer interface {
	// Chan returns the channel the Timer sends its time on (time.Timer.C).
	Chan() <-chan time.Time
	// Reset makes the Timer fire once d has passed from now, as
	// time.Timer.Reset does.
	Reset(d time.Duration) bool
	// Stop keeps the Timer from firing, as time.Timer.Stop does.
	Stop() bool
}

// Ticker is a time.Ticker taken from a Clock.
type Ticker interface {
	// Chan returns the channel the Ticker sends its ticks on
	// (time.Ticker.C).
	Chan() <-chan time.Time
	// Stop turns the Ticker off, as time.Ticker.Stop does.
	Stop()
}

// RealClock returns the wall clock: the time package.
func RealClock() Clock { return realClock{} }

// realClock is the time package as a Clock.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (realClock) NewTimer(d time.Duration) Timer         { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker       { return realTicker{time.NewTicker(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

// realTimer is a time.Timer as a Timer.
type realTimer struct{ *time.Timer }

func (t realTimer) Chan() <-chan time.Time { return t.C }

// realTicker is a time.Ticker as a Ticker.
type realTicker struct{ *time.Ticker }

func (t realTicker) Chan() <-chan time.Time { return t.C }
