package httptransport

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// tarType is the media type of GET /v1/backup's answer.
const tarType = "application/x-tar"

// backupFlushBytes is how much of a backup is buffered before it is
// written to the client.
const backupFlushBytes = 256 << 10

// errBackupRunning refuses a backup while another runs.
var errBackupRunning = wire.WithMessage(
	"a backup is already running: one runs at a time; retry once it has ended", core.ErrConflict)

// backupArchive serves GET /v1/backup: it has Config.Backup write the
// backup into a new directory under Config.BackupDir, answers 200 with
// that directory as a tar archive, streamed, and removes the directory
// whatever happens (sent, failed, client gone). One backup runs at a
// time: another is answered 409 conflict while it runs. A token
// restricted to topics is refused 403: a backup holds every topic. 501
// unimplemented when the backend cannot make one. An error once bytes
// were sent aborts the connection, so that a client sees a broken
// transfer rather than a short archive.
func (s *Server) backupArchive(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.AllowBackup(r.Context()); err != nil {
		return err
	}
	if !s.backupRunning.CompareAndSwap(false, true) {
		return errBackupRunning
	}
	// Released once the directory is removed (deferred calls run last
	// first), so that backups never pile up on the disk.
	defer s.backupRunning.Store(false)
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	dir := filepath.Join(s.backupDir, "backup-"+hex.EncodeToString(suffix[:]))
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			s.log.Warn("httptransport: removing a backup's directory failed", "dir", dir, "err", err)
		}
	}()
	if err := s.backup(r.Context(), dir); err != nil {
		return service.Describe(err, errors.ErrUnsupported, "backup is not supported by this backend")
	}

	out := &backupWriter{w: w, rc: http.NewResponseController(w), ctx: r.Context(), timeout: s.writeTimeout}
	bw := bufio.NewWriterSize(out, backupFlushBytes)
	err := writeTar(bw, dir)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = out.flush()
	}
	switch {
	case err == nil:
		return nil
	case !out.started:
		return fmt.Errorf("httptransport: backup: %w", err)
	}
	s.logError(r, toAPIError(err), fmt.Errorf("backup ended early: %w", err))
	panic(http.ErrAbortHandler)
}

// backupWriter writes a backup to the client: the headers with the first
// bytes, and each write bounded by the write timeout from its start, so
// that a backup of any size goes through as long as the client takes it.
// It stops at the request's end (the client left, the server stops).
type backupWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context
	timeout time.Duration
	started bool
}

func (b *backupWriter) start() {
	if b.started {
		return
	}
	b.started = true
	h := b.w.Header()
	h.Set("Content-Type", tarType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", `attachment; filename="delayq-backup-`+time.Now().UTC().Format("20060102T150405Z")+`.tar"`)
	b.w.WriteHeader(http.StatusOK)
}

func (b *backupWriter) Write(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	b.start()
	// A socket deadline: the real clock.
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.timeout))
	return b.w.Write(p)
}

func (b *backupWriter) flush() error {
	if err := b.ctx.Err(); err != nil {
		return err
	}
	b.start()
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.timeout))
	return b.rc.Flush()
}

// writeTar writes the directory tree under root to w as a tar archive, its
// entries named relative to root with slashes, directories before what
// they hold, in lexical order: directories mode 0700, files 0600 (they
// hold every job's body), nothing of the owner. Only directories and
// regular files are taken; anything else is an error.
func writeTar(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o700, ModTime: info.ModTime()})
		case d.Type().IsRegular():
			return addFile(tw, path, name)
		}
		return fmt.Errorf("%s: not a regular file or directory (%s)", path, d.Type())
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// addFile writes the regular file at path to tw as name.
func addFile(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
