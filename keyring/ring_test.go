package keyring_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/keyring"
)

// keyLine returns a key file line of id with a key of n bytes of b.
func keyLine(id string, b byte, n int) string {
	return id + " " + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n)) + "\n"
}

func mustParse(t testing.TB, text string) *keyring.Ring {
	t.Helper()
	r, err := keyring.Parse([]byte(text))
	require.NoError(t, err)
	return r
}

func TestParse(t *testing.T) {
	t.Parallel()
	r := mustParse(t, "# delayq keys\n\n"+keyLine("k2", 2, 32)+"  "+keyLine("k1", 1, 32))
	require.Equal(t, "k2", r.Current())
	require.Equal(t, []string{"k2", "k1"}, r.IDs())

	for name, tc := range map[string]struct{ text, want string }{
		"empty":        {"# nothing\n", "no key"},
		"one field":    {"k1\n", "line 1: want a key id and a base64 key"},
		"three fields": {"k1 a b\n", "line 1: want a key id and a base64 key"},
		"bad id":       {keyLine("k/1", 1, 32), `line 1: key id "k/1" must be`},
		"long id":      {keyLine(strings.Repeat("k", 33), 1, 32), "must be 1-32 characters"},
		"not base64":   {"k1 !!!!\n", `line 1: key "k1" is not standard base64`},
		"short":        {keyLine("k1", 1, 16), `line 1: key "k1" is 16 bytes; AES-256 takes 32`},
		"long":         {keyLine("k1", 1, 33), "is 33 bytes"},
		"duplicate":    {keyLine("k1", 1, 32) + "\n" + keyLine("k1", 2, 32), `line 3: key id "k1" is given twice`},
	} {
		_, err := keyring.Parse([]byte(tc.text))
		require.ErrorContains(t, err, tc.want, name)
	}
}

func TestLoadRefusesOpenModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(path, []byte(keyLine("k1", 1, 32)), 0o600))
	r, err := keyring.Load(path)
	require.NoError(t, err)
	require.Equal(t, "k1", r.Current())
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620} {
		require.NoError(t, os.Chmod(path, mode))
		_, err := keyring.Load(path)
		require.ErrorContains(t, err, "lets others than its owner read or write it; chmod 600", mode.String())
	}
	require.NoError(t, os.Chmod(path, 0o400))
	_, err = keyring.Load(path)
	require.NoError(t, err)
	_, err = keyring.Load(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(bad, []byte(keyLine("k1", 1, 31)), 0o600))
	_, err = keyring.Load(bad)
	require.ErrorContains(t, err, bad+": line 1")
}

func TestSealOpenBody(t *testing.T) {
	t.Parallel()
	r := mustParse(t, keyLine("k1", 1, 32))
	body := []byte(`{"email":"someone@example.com"}`)
	sealed := r.SealBody("j1", body)
	require.True(t, json.Valid(sealed), "a sealed body is a JSON value: %s", sealed)
	require.NotContains(t, string(sealed), "someone")
	id, ok := keyring.BodyKey(sealed)
	require.True(t, ok)
	require.Equal(t, "k1", id)
	got, err := r.OpenBody("j1", sealed)
	require.NoError(t, err)
	require.Equal(t, body, got)
	_, err = r.OpenBody("j2", sealed)
	require.ErrorIs(t, err, keyring.ErrCorrupt)
	require.ErrorContains(t, err, "job j2: keyring:")
	for _, plain := range []string{`"dqenc1"`, `"dqenc2:k1:AAAA"`, `null`, `"a"`, `"`} {
		_, ok := keyring.BodyKey([]byte(plain))
		require.False(t, ok, plain)
		got, err := r.OpenBody("j1", []byte(plain))
		require.NoError(t, err)
		require.Equal(t, plain, string(got))
	}
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	old := mustParse(t, keyLine("k1", 1, 32))
	rotated := mustParse(t, keyLine("k2", 2, 32)+keyLine("k1", 1, 32))
	plain := []byte(`{"email":"someone@example.com"}`)

	sealed := old.Seal(plain, []byte("job-1"))
	require.True(t, bytes.HasPrefix(sealed, []byte("dqenc1:k1:")), string(sealed))
	require.NotContains(t, string(sealed), "someone")
	id, ok := keyring.KeyOf(sealed)
	require.True(t, ok)
	require.Equal(t, "k1", id)
	require.NotEqual(t, sealed, old.Seal(plain, []byte("job-1")), "a nonce per seal")

	// The rotated ring seals with its new key and still opens the old.
	got, err := rotated.Open(sealed, []byte("job-1"))
	require.NoError(t, err)
	require.Equal(t, plain, got)
	resealed := rotated.Seal(plain, []byte("job-1"))
	id, _ = keyring.KeyOf(resealed)
	require.Equal(t, "k2", id)

	// A ring without the key says which key it lacks.
	_, err = old.Open(resealed, []byte("job-1"))
	var ke *keyring.KeyError
	require.ErrorAs(t, err, &ke)
	require.Equal(t, "k2", ke.KeyID)
	require.ErrorIs(t, err, keyring.ErrUnknownKey)
	require.ErrorContains(t, err, `sealed with key "k2", which is not in the key ring`)

	// Bound to its job: another job's, or a changed value, does not open.
	_, err = old.Open(sealed, []byte("job-2"))
	require.ErrorIs(t, err, keyring.ErrCorrupt)
	changed := bytes.Clone(sealed)
	changed[len(changed)-3] ^= 1
	_, err = old.Open(changed, []byte("job-1"))
	require.ErrorIs(t, err, keyring.ErrCorrupt)
	_, err = old.Open(sealed[:20], []byte("job-1"))
	require.ErrorIs(t, err, keyring.ErrCorrupt)

	// A value without the prefix is plaintext, read as it is.
	got, err = old.Open(plain, []byte("job-1"))
	require.NoError(t, err)
	require.Equal(t, plain, got)
	_, ok = keyring.KeyOf(plain)
	require.False(t, ok)
}
