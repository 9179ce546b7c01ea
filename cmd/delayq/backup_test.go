package main

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// tarOf builds an archive of headers, each regular file with its body.
func tarOf(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := []byte(h.Linkname)
		if h.Typeflag == tar.TypeReg {
			h.Size, h.Linkname = int64(len(body)), ""
		}
		require.NoError(t, tw.WriteHeader(&h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write(body)
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// file is a regular file entry of tarOf with its body.
func file(name, body string) tar.Header {
	return tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Linkname: body}
}

func TestUnpackBackup(t *testing.T) {
	t.Parallel()
	good := tarOf(t,
		file("FORMAT", "delayq local 1\n"),
		tar.Header{Typeflag: tar.TypeDir, Name: "local/", Mode: 0o755},
		file("local/CURRENT", "MANIFEST-000001\n"),
		file("deep/er/file", "x"), // parents not listed first
	)
	dir := filepath.Join(t.TempDir(), "new", "backup")
	sum, err := unpackBackup(bytes.NewReader(good), dir)
	require.NoError(t, err)
	require.Equal(t, backupSummary{Files: 3, Bytes: 15 + 16 + 1}, sum)
	got, err := os.ReadFile(filepath.Join(dir, "local", "CURRENT"))
	require.NoError(t, err)
	require.Equal(t, "MANIFEST-000001\n", string(got))
	for name, mode := range map[string]os.FileMode{".": 0o700, "local": 0o700, "deep/er": 0o700, "FORMAT": 0o600, "local/CURRENT": 0o600} {
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, mode, info.Mode().Perm(), name)
	}

	// An empty directory that exists takes it too.
	empty := t.TempDir()
	_, err = unpackBackup(bytes.NewReader(good), empty)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(empty, "FORMAT"))
}

// TestUnpackBackupRefuses: names that lead out of the directory, links,
// a file twice, an archive cut short or without FORMAT are refused, and
// nothing is left of what was written.
func TestUnpackBackupRefuses(t *testing.T) {
	t.Parallel()
	format := file("FORMAT", "delayq local 1\n")
	cut := tarOf(t, format, file("local/big", string(make([]byte, 10000))))
	bad := map[string]struct {
		data []byte
		err  string
	}{
		"dot-dot":      {tarOf(t, format, file("../evil", "x")), "not inside the directory"},
		"inner-dotdot": {tarOf(t, format, file("local/../../evil", "x")), "not inside the directory"},
		"absolute":     {tarOf(t, format, file("/tmp/evil", "x")), "not inside the directory"},
		"backslash":    {tarOf(t, format, file(`..\evil`, "x")), "not inside the directory"},
		"symlink":      {tarOf(t, format, tar.Header{Typeflag: tar.TypeSymlink, Name: "local", Linkname: "/etc"}), "only files and directories"},
		"hardlink":     {tarOf(t, format, tar.Header{Typeflag: tar.TypeLink, Name: "passwd", Linkname: "/etc/passwd"}), "only files and directories"},
		"twice":        {tarOf(t, format, file("FORMAT", "delayq local 1\n")), "file exists"},
		"no-format":    {tarOf(t, file("local/CURRENT", "x")), "holds no FORMAT"},
		"cut-short":    {cut[:len(cut)-3000], "unexpected EOF"},
		"not-tar":      {[]byte(`{"error":{"code":"internal"}}`), "reading the backup"},
	}
	parent := t.TempDir()
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(parent, name)
			_, err := unpackBackup(bytes.NewReader(tt.data), dir)
			require.ErrorContains(t, err, tt.err)
			require.NoDirExists(t, dir, "the directory made for the backup is removed")

			existing := t.TempDir()
			_, err = unpackBackup(bytes.NewReader(tt.data), existing)
			require.ErrorContains(t, err, tt.err)
			entries, err := os.ReadDir(existing)
			require.NoError(t, err)
			require.Empty(t, entries, "what was written into an empty directory is removed")
		})
	}
	require.NoFileExists(t, filepath.Join(filepath.Dir(parent), "evil"))
}

func TestCheckBackupDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, checkBackupDir(filepath.Join(dir, "missing")))
	require.NoError(t, checkBackupDir(dir))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x"), nil, 0o600))
	require.ErrorContains(t, checkBackupDir(dir), "is not empty")
	require.ErrorContains(t, checkBackupDir(filepath.Join(dir, "x")), "not a directory")
}
