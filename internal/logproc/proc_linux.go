//go:build linux

package logproc

import "syscall"

// sysProcAttr has the kernel kill the child when its parent dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
