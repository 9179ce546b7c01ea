package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The data directory says which backend wrote it, in formatFile, so that
// serve never starts empty on another backend's jobs.
const (
	// formatFile is the file under --data that names the backend, and the
	// version of its layout, that keeps jobs there.
	formatFile = "FORMAT"
	// localDir is the local backend's database under --data.
	localDir = "local"
	// jetStreamDir is where the jetstream backend's server keeps its
	// streams under --data (nats-server's own name for it).
	jetStreamDir = "jetstream"
)

// formats are the contents of formatFile for each backend that keeps jobs
// under --data.
var formats = map[string]string{
	// 2: a job may carry an expiry, in a record (pebblestore's version 4)
	// that a release of format 1 cannot read. 3: a job may carry its own
	// retention, in a meta (pebblestore's version 5), and next steps, in a
	// record (version 5), that a release of format 2 cannot read. 4: a
	// job's trail: its changes in a record (version 6), its attempts'
	// instance and consumer in a meta (version 6) and an h value (version
	// 2), that a release of format 3 cannot read.
	backendLocal:     "delayq local 4\n",
	backendJetStream: "delayq jetstream 1\n",
}

// earlierFormats are the contents of formatFile that earlier releases
// wrote, by the backend that reads them now: checkDataDir takes such a
// directory and writes the current format into it, so that an earlier
// release then refuses it rather than misread what this one writes.
var earlierFormats = map[string]string{
	"delayq local 1": backendLocal,
	"delayq local 2": backendLocal,
	"delayq local 3": backendLocal,
}

// checkDataDir makes sure dir holds the jobs of backend, or none: it
// writes formatFile in a directory without one or of an earlier format of
// backend (earlierFormats), and refuses a directory
// that another backend wrote, saying how to move its jobs. A directory of
// the jetstream backend from before formatFile existed is recognised by
// its streams.
func checkDataDir(dir, backend string) error {
	raw, err := os.ReadFile(filepath.Join(dir, formatFile))
	switch {
	case err == nil:
		got := strings.TrimSpace(string(raw))
		if got == strings.TrimSpace(formats[backend]) {
			return nil
		}
		if earlierFormats[got] == backend {
			return writeFileSynced(filepath.Join(dir, formatFile), []byte(formats[backend]))
		}
		if other, ok := earlierFormats[got]; ok {
			return movingError(dir, other, backend)
		}
		for other, f := range formats {
			if got == strings.TrimSpace(f) {
				return movingError(dir, other, backend)
			}
		}
		return fmt.Errorf("--data %s: %s says %q, which this version of delayq does not know", dir, formatFile, got)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--data %s: %w", dir, err)
	}
	if backend == backendLocal {
		if _, err := os.Stat(filepath.Join(dir, jetStreamDir)); err == nil {
			return movingError(dir, backendJetStream, backend)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--data %s: %w", dir, err)
	}
	return writeFileSynced(filepath.Join(dir, formatFile), []byte(formats[backend]))
}

// movingError says that dir holds the jobs of backend have, and how to take
// them to backend want.
func movingError(dir, have, want string) error {
	return fmt.Errorf(`--data %s holds the jobs of the %s backend, not of %s. Either start it as it was:
  delayq serve --backend %s --data %s
or move its jobs: start it so, run "delayq export > jobs.ndjson", stop it, start
  delayq serve --backend %s --data NEW-DIR
and run "delayq import jobs.ndjson" (docs/deploying.md, "Export and import")`, dir, have, want, have, dir, want)
}

// writeFileSynced writes a small file and syncs it and its directory, so
// that it is there after a power cut.
func writeFileSynced(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(name))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
