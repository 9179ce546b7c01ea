package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckDataDir: a fresh directory gets the backend's format file; a
// directory of another backend, or of the jetstream default from before
// the format file, is refused with the way to move its jobs.
func TestCheckDataDir(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "data")
	require.NoError(t, checkDataDir(fresh, backendLocal))
	raw, err := os.ReadFile(filepath.Join(fresh, formatFile))
	require.NoError(t, err)
	require.Equal(t, formats[backendLocal], string(raw))
	require.NoError(t, checkDataDir(fresh, backendLocal), "a directory of its own backend")

	err = checkDataDir(fresh, backendJetStream)
	require.ErrorContains(t, err, "holds the jobs of the local backend")
	require.ErrorContains(t, err, "delayq serve --backend local --data "+fresh)

	old := t.TempDir() // the jetstream default before FORMAT existed
	require.NoError(t, os.MkdirAll(filepath.Join(old, jetStreamDir, "streams"), 0o700))
	err = checkDataDir(old, backendLocal)
	require.ErrorContains(t, err, "holds the jobs of the jetstream backend")
	require.ErrorContains(t, err, "delayq export")
	_, err = os.Stat(filepath.Join(old, formatFile))
	require.ErrorIs(t, err, os.ErrNotExist, "a refused directory is left as it was")
	require.NoError(t, checkDataDir(old, backendJetStream), "the jetstream backend takes its own directory")
	raw, err = os.ReadFile(filepath.Join(old, formatFile))
	require.NoError(t, err)
	require.Equal(t, formats[backendJetStream], string(raw))

	earlier := t.TempDir() // a local directory of the release before expiry
	require.NoError(t, os.WriteFile(filepath.Join(earlier, formatFile), []byte("delayq local 1\n"), 0o600))
	require.ErrorContains(t, checkDataDir(earlier, backendJetStream), "holds the jobs of the local backend")
	require.NoError(t, checkDataDir(earlier, backendLocal))
	raw, err = os.ReadFile(filepath.Join(earlier, formatFile))
	require.NoError(t, err)
	require.Equal(t, "delayq local 4\n", string(raw), "taken, and marked with this version's format")

	odd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(odd, formatFile), []byte("delayq local 9\n"), 0o600))
	require.ErrorContains(t, checkDataDir(odd, backendLocal), "does not know")
}
