package keyring

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// KeyIDMax is the longest key id.
const KeyIDMax = 32

// prefix starts every sealed value; the 1 is the format's version.
const prefix = "dqenc1:"

// ErrUnknownKey is the error of a sealed value whose key is not in the
// ring: it cannot be opened until the ring has the key again.
var ErrUnknownKey = errors.New("keyring: sealed with a key that is not in the key ring")

// ErrCorrupt is the error of a sealed value that does not open with its
// key: changed, cut, or sealed for another job or record.
var ErrCorrupt = errors.New("keyring: sealed value does not open")

// KeyError is the error of a value that cannot be opened: it names the key
// the value was sealed with. It matches ErrUnknownKey or ErrCorrupt.
type KeyError struct {
	// KeyID is the id the value names, empty when it names none.
	KeyID string
	// Err is ErrUnknownKey or ErrCorrupt.
	Err error
}

// Error implements error.
func (e *KeyError) Error() string {
	if errors.Is(e.Err, ErrUnknownKey) {
		return fmt.Sprintf("keyring: sealed with key %q, which is not in the key ring (--encryption-keys)", e.KeyID)
	}
	return fmt.Sprintf("keyring: a value sealed with key %q does not open: changed, or sealed for another job or record", e.KeyID)
}

// Unwrap returns ErrUnknownKey or ErrCorrupt.
func (e *KeyError) Unwrap() error { return e.Err }

// Ring is a set of keys by id, the first current. It is safe for
// concurrent use. Make one with Parse or Load.
type Ring struct {
	current string
	ids     []string
	aeads   map[string]cipher.AEAD
}

// Parse reads a key file: a line per key, its id (1 to KeyIDMax
// characters of [A-Za-z0-9_-]), blanks, and its 32 bytes in standard
// base64; blank lines and lines starting with # are left out. The first
// key is current. Errors name the line: a malformed line, a key of
// another length, an id given twice, no key at all.
func Parse(data []byte) (*Ring, error) {
	r := &Ring{aeads: map[string]cipher.AEAD{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want a key id and a base64 key, separated by blanks", n)
		}
		id, enc := f[0], f[1]
		if !validID(id) {
			return nil, fmt.Errorf("line %d: key id %q must be 1-%d characters of [A-Za-z0-9_-]", n, id, KeyIDMax)
		}
		if _, dup := r.aeads[id]; dup {
			return nil, fmt.Errorf("line %d: key id %q is given twice", n, id)
		}
		key, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q is not standard base64", n, id)
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("line %d: key %q is %d bytes; AES-256 takes %d (openssl rand -base64 32 makes one)", n, id, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q: %w", n, id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q: %w", n, id, err)
		}
		r.aeads[id] = aead
		r.ids = append(r.ids, id)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(r.ids) == 0 {
		return nil, errors.New("no key: a key file holds a line per key, its id and its base64 key, the current key first")
	}
	r.current = r.ids[0]
	return r, nil
}

// Load reads the key file at path (Parse), refusing one that its group or
// others may read or write: the keys are what the encryption rests on.
// Errors name the file.
func Load(path string) (*Ring, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("encryption keys: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("encryption keys %s: mode %04o lets others than its owner read or write it; chmod 600 it", path, perm)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("encryption keys: %w", err)
	}
	r, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("encryption keys %s: %w", path, err)
	}
	return r, nil
}

// validID reports whether id may name a key.
func validID(id string) bool {
	if id == "" || len(id) > KeyIDMax {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Current returns the id of the key values are sealed with.
func (r *Ring) Current() string { return r.current }

// IDs returns the ids of the ring's keys, the current one first.
func (r *Ring) IDs() []string { return append([]string(nil), r.ids...) }

// Seal returns plain sealed with the current key, bound to ad: the prefix,
// the key id, a colon and the base64 of the nonce and ciphertext.
func (r *Ring) Seal(plain, ad []byte) []byte {
	aead := r.aeads[r.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	_, _ = rand.Read(nonce) // never fails (crypto/rand)
	raw := aead.Seal(nonce, nonce, plain, ad)
	out := make([]byte, 0, len(prefix)+len(r.current)+1+base64.StdEncoding.EncodedLen(len(raw)))
	out = append(out, prefix...)
	out = append(out, r.current...)
	out = append(out, ':')
	return base64.StdEncoding.AppendEncode(out, raw)
}

// KeyOf returns the id of the key stored was sealed with, and false when
// stored is not sealed (plaintext).
func KeyOf(stored []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(stored, []byte(prefix))
	if !ok {
		return "", false
	}
	id, _, ok := bytes.Cut(rest, []byte(":"))
	if !ok {
		return "", true
	}
	return string(id), true
}

// Open returns the plaintext of stored, a value Seal made with ad, or
// stored itself when it is not sealed (plaintext written before
// encryption was switched on). Errors: a *KeyError, ErrUnknownKey when its
// key is not in the ring, ErrCorrupt when it does not open with it.
func (r *Ring) Open(stored, ad []byte) ([]byte, error) {
	id, sealed := KeyOf(stored)
	if !sealed {
		return stored, nil
	}
	aead, ok := r.aeads[id]
	if !ok {
		return nil, &KeyError{KeyID: id, Err: ErrUnknownKey}
	}
	raw, err := base64.StdEncoding.AppendDecode(nil, stored[len(prefix)+len(id)+1:])
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, &KeyError{KeyID: id, Err: ErrCorrupt}
	}
	// Decrypted in place: raw is this call's own.
	nonce, ct := raw[:aead.NonceSize()], raw[aead.NonceSize():]
	plain, err := aead.Open(ct[:0], nonce, ct, ad)
	if err != nil {
		return nil, &KeyError{KeyID: id, Err: ErrCorrupt}
	}
	return plain, nil
}

// jobAD is what a job's body is bound to: its id.
func jobAD(id string) []byte { return append([]byte("job\x00"), id...) }

// bodyPrefix starts a sealed body: a JSON string of the sealed text.
var bodyPrefix = []byte(`"` + prefix)

// SealBody returns a job's body sealed for the job id, as a JSON string:
// stores, exports and imports keep it as any body.
func (r *Ring) SealBody(id string, body []byte) []byte {
	sealed := r.Seal(body, jobAD(id))
	out := make([]byte, 0, len(sealed)+2)
	out = append(out, '"')
	out = append(out, sealed...)
	return append(out, '"')
}

// BodyKey returns the id of the key a body was sealed with (SealBody), and
// false when it is plaintext.
func BodyKey(body []byte) (string, bool) {
	if !bytes.HasPrefix(body, bodyPrefix) || body[len(body)-1] != '"' {
		return "", false
	}
	return KeyOf(body[1 : len(body)-1])
}

// OpenBody returns the plaintext of the body of job id as SealBody made
// it, or body itself when it is not sealed. Errors: a *KeyError, wrapped
// with the job's id.
func (r *Ring) OpenBody(id string, body []byte) ([]byte, error) {
	if _, sealed := BodyKey(body); !sealed {
		return body, nil
	}
	plain, err := r.Open(body[1:len(body)-1], jobAD(id))
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return plain, nil
}

// ScheduleBodyID is what a schedule's job body is sealed for in an export
// (SealBody): never a job's id, which has no colon.
func ScheduleBodyID(name string) string { return "schedule:" + name }
