package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/core"
)

// tarType is the media type of GET /v1/backup's answer.
const tarType = "application/x-tar"

// backupTmpDir is the directory under --data where GET /v1/backup makes
// each backup of the local backend, on the file system of its database so
// that the checkpoint's tables are hard links. serve empties it at start:
// what is there then was left by a process that died during a backup.
const backupTmpDir = "backup-tmp"

// serveBackups returns the httptransport.Config.BackupDir and Backup of
// GET /v1/backup. With the local backend, a backup is a data directory
// that serve starts on as it is: FORMAT and the store's checkpoint in
// local/ (datadir.go), made under <data>/backup-tmp, which it empties and
// makes first. The other backends keep their jobs elsewhere: the defaults,
// Engine.Checkpoint, answer 501.
func serveBackups(cfg *serveConfig, engine *core.Engine) (string, func(ctx context.Context, dir string) error, error) {
	if cfg.Backend != backendLocal {
		return "", nil, nil
	}
	tmp := filepath.Join(cfg.DataDir, backupTmpDir)
	// The store is open, so this process alone uses the directory.
	if err := os.RemoveAll(tmp); err != nil {
		return "", nil, fmt.Errorf("--data %s: removing the leftovers of a backup: %w", cfg.DataDir, err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", nil, fmt.Errorf("--data %s: %w", cfg.DataDir, err)
	}
	backup := func(ctx context.Context, dir string) error {
		// The checkpoint makes dir too.
		if err := engine.Checkpoint(ctx, filepath.Join(dir, localDir)); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, formatFile), []byte(formats[backendLocal]), 0o600)
	}
	return tmp, backup, nil
}

// backupSummary is what `delayq backup` prints once the backup is written.
type backupSummary struct {
	Dir   string `json:"dir"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
}

// backupCommand is `delayq backup DIR`.
func (a *app) backupCommand() *cobra.Command {
	var flags clientFlags
	cmd := &cobra.Command{
		Use:   "backup DIR",
		Short: "Write an online backup of the local backend into DIR, a data directory serve starts on",
		Long: `Take a backup of a running service on the local backend (the default) and
write it into DIR, a new or empty directory, as a complete data directory:
'delayq serve --data DIR' starts on it as it is. Intake and deliveries go on
while it runs.

The backup is a consistent copy of the service's jobs as of one moment: every
job answered before the command started is in it, in its state then
(scheduled, ready, reserved with its lease, dead, and done or cancelled within
--retention), with the topic configurations. It does not hold the in-process
NATS server's files or its client password. The service makes it in
<data>/backup-tmp, with hard links to its own files, and streams it as a tar
archive (GET /v1/backup), which this command unpacks; one backup runs at a
time. It needs a token with the admin scope, without topic patterns, when the
service has tokens.

It prints the directory, the number of files and their bytes as JSON. A DIR
that is not empty is refused (exit 2); a backup that failed or was cut short
exits 1 and leaves nothing in DIR. The other backends answer 501: back up
their servers with their own tools, or use 'delayq export'.`,
		Example: `  delayq backup /var/backups/delayq-$(date +%F) --server http://127.0.0.1:8080
  # restore: stop the service, put the backup in place of --data, start it
  delayq serve --data /var/backups/delayq-2030-01-01`,
		Args: cobra.ExactArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := checkBackupDir(dir); err != nil {
				return usageError(err)
			}
			resp, err := c.download(ctx, "/v1/backup", tarType)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != tarType {
				return fmt.Errorf("the service answered %q, not a backup (%s)", ct, tarType)
			}
			sum, err := unpackBackup(resp.Body, dir)
			if err != nil {
				return fmt.Errorf("the backup was not written: %w", err)
			}
			sum.Dir, _ = filepath.Abs(dir)
			out, err := json.Marshal(sum)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), out, func(t *tableWriter) {
				t.row("dir", sum.Dir)
				t.row("files", itoa(sum.Files))
				t.row("bytes", i64(sum.Bytes))
			})
		}),
	}
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}

// checkBackupDir refuses a backup's directory that exists and is not an
// empty directory, before the backup is asked for.
func checkBackupDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("backup directory %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("backup directory %s is not empty: a backup goes into a new or empty directory", dir)
	}
	return nil
}

// unpackBackup writes the tar archive of a backup into dir, made if
// missing (mode 0700), and syncs what it wrote. It takes only directories
// and regular files whose names stay inside dir (through an os.Root, so
// that no name, link or .. leads out), never overwrites a file, gives
// files mode 0600 and directories 0700 whatever the archive says, and
// requires the archive to end properly and to hold FORMAT, as every data
// directory does. On error it removes what it wrote: dir itself when it
// made it.
func unpackBackup(r io.Reader, dir string) (sum backupSummary, err error) {
	made := false
	if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return sum, err
		}
		made = true
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return sum, err
	}
	defer func() {
		_ = root.Close()
		if err != nil {
			removeBackup(dir, made)
		}
	}()
	dirs := map[string]bool{".": true}
	mkdir := func(name string) error {
		if dirs[name] {
			return nil
		}
		if err := root.MkdirAll(name, 0o700); err != nil {
			return err
		}
		for d := name; d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		return nil
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, fmt.Errorf("reading the backup: %w", err)
		}
		name := path.Clean(strings.TrimSuffix(h.Name, "/"))
		if h.Name == "" || !filepath.IsLocal(filepath.FromSlash(name)) || strings.Contains(h.Name, `\`) {
			return sum, fmt.Errorf("the backup names %q, which is not inside the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := mkdir(name); err != nil {
				return sum, err
			}
		case tar.TypeReg:
			if err := mkdir(path.Dir(name)); err != nil {
				return sum, err
			}
			n, err := writeBackupFile(root, name, tr)
			if err != nil {
				return sum, err
			}
			sum.Files++
			sum.Bytes += n
		default:
			return sum, fmt.Errorf("the backup holds %q of type %q: a backup has only files and directories", h.Name, h.Typeflag)
		}
	}
	// The answer ends after the archive: reading it to its end tells a
	// complete transfer from one cut short.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return sum, fmt.Errorf("reading the backup: %w", err)
	}
	if _, err := root.Stat(formatFile); err != nil {
		return sum, fmt.Errorf("the backup holds no %s: it is not a delayq data directory", formatFile)
	}
	for d := range dirs {
		if err := syncDir(root, d); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// writeBackupFile writes a new file name under root from r and syncs it.
func writeBackupFile(root *os.Root, name string, r io.Reader) (int64, error) {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err != nil {
		_ = f.Close()
		return n, fmt.Errorf("reading the backup: %w", err)
	}
	return n, errors.Join(f.Sync(), f.Close())
}

// syncDir syncs the directory name under root, so that its entries are
// on the disk.
func syncDir(root *os.Root, name string) error {
	d, err := root.Open(name)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// removeBackup removes what a failed backup wrote into dir: dir itself
// when it was made for it, else what dir holds (it was empty).
func removeBackup(dir string, made bool) {
	if made {
		_ = os.RemoveAll(dir)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
