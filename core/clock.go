package core

import "github.com/jonboulle/clockwork"

// Clock is where delayq takes time from. Tests inject clockwork's fake clock
// to advance time without sleeping.
type Clock = clockwork.Clock

// RealClock returns the wall clock.
func RealClock() Clock { return clockwork.NewRealClock() }
