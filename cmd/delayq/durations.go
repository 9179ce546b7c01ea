package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// parseFlagDuration reads a duration given to the command line (a flag,
// its environment twin, a key of the configuration file): a Go duration
// with its unit, such as 1500ms, 15m or 2h, or 0. A bare number other than
// 0 is refused with the unit it lacks, since the API reads one as
// milliseconds and other tools as seconds: "--wait 5" and "--delay 5"
// would each surprise someone. Callers check the range.
func parseFlagDuration(s string) (time.Duration, error) {
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return 0, fmt.Errorf("add a unit, e.g. %ss or %sms", s, s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration with its unit, such as 10s or 1500ms")
	}
	return d, nil
}

// durationValue is a duration flag that must not be negative.
type durationValue struct{ p *time.Duration }

func (v *durationValue) String() string { return v.p.String() }
func (v *durationValue) Type() string   { return "duration" }
func (v *durationValue) Set(s string) error {
	d, err := parseFlagDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("want a duration such as 10s, or 0")
	}
	*v.p = d
	return nil
}

// positiveDurationValue is a duration flag that must be more than zero.
type positiveDurationValue struct{ p *time.Duration }

func (v *positiveDurationValue) String() string { return v.p.String() }
func (v *positiveDurationValue) Type() string   { return "duration" }
func (v *positiveDurationValue) Set(s string) error {
	d, err := parseFlagDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return errors.New("want a positive duration such as 30s")
	}
	*v.p = d
	return nil
}
