package core

import "github.com/oklog/ulid/v2"

// NewID returns a new job id: a ULID, 26 characters that sort by creation
// time (ms) and, thanks to 80 random bits, are unique across instances
// without coordination. Within one process ids are strictly increasing.
func NewID() string { return ulid.Make().String() }
