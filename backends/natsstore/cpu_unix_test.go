//go:build unix

package natsstore

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used: the
// store's and, with the embedded server, the server's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
