// Package disktest gives tests a small disk of their own to fill: a tmpfs
// mounted on a temporary directory (Linux, as root). Without one the test
// fails under CI (CI=true) and skips elsewhere, saying why.
package disktest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a new temporary directory and
// returns it; it is unmounted when the test ends.
func Mount(tb testing.TB, size int64) string {
	tb.Helper()
	if err := available(); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("disktest: %v: a full-disk test mounts a tmpfs, as root on Linux", err)
		}
		tb.Skipf("disktest: %v: a full-disk test mounts a tmpfs, as root on Linux (it fails under CI=true)", err)
	}
	dir := tb.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dk,mode=0700", size>>10), "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("disktest: mount tmpfs on %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	tb.Cleanup(func() {
		// Lazily: a process the test started may still hold a file there.
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			tb.Errorf("disktest: umount %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		}
	})
	return dir
}

func available() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("not on Linux (%s)", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root (uid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("mount"); err != nil {
		return err
	}
	return nil
}

// Fill writes a file of size bytes at path, its blocks allocated, to take
// that much of the disk until it is removed.
func Fill(tb testing.TB, path string, size int64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := min(size, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			tb.Fatal(err)
		}
		size -= n
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}
