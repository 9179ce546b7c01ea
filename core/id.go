package core

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// ids makes the process's ids from one monotonic entropy source under a
// lock: ulid.Make draws from a pool of sources, so two ids of one
// millisecond could come out of order.
var ids = struct {
	sync.Mutex
	entropy *ulid.MonotonicEntropy
}{entropy: ulid.Monotonic(rand.Reader, 0)}

// NewID returns a new job id: a ULID, 26 characters that sort by creation
// time (ms) and, thanks to 80 random bits, are unique across instances
// without coordination. Within one process ids are strictly increasing
// while the wall clock does not step back.
func NewID() string {
	ids.Lock()
	defer ids.Unlock()
	// The wall clock, not an injected Clock: an id records when it was
	// really made, and ids of instances must sort together.
	return ulid.MustNew(ulid.Timestamp(time.Now()), ids.entropy).String()
}

// keyIDPrefix starts every KeyID; with keyIDHexLen hex digits after it, an
// id of that form is reserved (IsKeyID).
const (
	keyIDPrefix = "k-"
	keyIDHexLen = 32
)

// KeyID returns the id of the job of topic with business key key on a topic
// with unique keys (Topic.UniqueKeys): "k-" and 32 hex digits of the
// SHA-256 of topic and key. One id per topic and key is what makes the key
// unique: every store already refuses (or replaces) a second unfinished job
// with the id, atomically, and on a sharded store the id keeps the job and
// the check in one shard, as a separate key index could not.
func KeyID(topic, key string) string {
	h := sha256.New()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return keyIDPrefix + hex.EncodeToString(h.Sum(nil)[:keyIDHexLen/2])
}

// IsKeyID reports whether id has the form of a KeyID, which clients may not
// choose for other jobs.
func IsKeyID(id string) bool { return isDerivedID(id, keyIDPrefix) }

// derivedIDPrefixes are the prefixes of every id the engine derives: KeyID,
// ScheduleID, NoticeID, EventID, ChainID. A new derived form adds its prefix here,
// so that IsDerivedID, and with it every transport's refusal, covers it.
var derivedIDPrefixes = [...]string{keyIDPrefix, scheduleIDPrefix, noticeIDPrefix, eventIDPrefix, chainIDPrefix}

// IsDerivedID reports whether id has the form of an id the engine derives
// (KeyID, ScheduleID, NoticeID, EventID, ChainID): a prefix and 32
// lowercase hex digits.
// Clients may not choose such ids (Engine.Push refuses them, but for the
// key's own id on a topic with unique keys), and an import takes them
// only from an unrestricted admin: whoever could would block the slot of
// another topic's schedule, a notice, or another topic's unique key.
func IsDerivedID(id string) bool {
	for _, p := range derivedIDPrefixes {
		if isDerivedID(id, p) {
			return true
		}
	}
	return false
}

// isDerivedID reports whether id is prefix and keyIDHexLen lowercase hex
// digits: the form of the ids the engine derives (KeyID, ScheduleID,
// NoticeID).
func isDerivedID(id, prefix string) bool {
	if len(id) != len(prefix)+keyIDHexLen || id[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
