//go:build linux

package natstest

import "syscall"

// sysProcAttr has the kernel kill the server when the test process dies,
// so that no server outlives a crashed or interrupted test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
