//go:build !linux

package logproc

import "syscall"

// sysProcAttr sets nothing: only Linux kills children with their parent.
func sysProcAttr() *syscall.SysProcAttr { return nil }
