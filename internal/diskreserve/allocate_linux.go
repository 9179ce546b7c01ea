package diskreserve

import (
	"errors"
	"os"
	"syscall"
)

// allocate gives f size bytes whose blocks the file system holds
// (fallocate), so that deleting f frees them; it writes zeros where the
// file system cannot allocate.
func allocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return writeZeros(f, size)
	}
	return err
}
