package core

import (
	"crypto/rand"
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
