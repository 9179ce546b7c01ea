//go:build !unix

package natsstore

import "time"

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
