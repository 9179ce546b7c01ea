package core

import "fmt"

// Record is a piece of metadata a store keeps for core, under a kind and a
// name: a schedule with its cursor, say. Its Value is opaque to the store
// (core encodes and decodes it), so that a feature kept per topic or per
// schedule needs no store code. Every put gives the record a new Revision,
// which a later put or delete names to apply only to what it read
// (compare-and-set).
type Record struct {
	// Kind groups records: ListRecords lists one kind.
	Kind string
	// Name identifies the record within its kind.
	Name string
	// Value is what core stored, byte for byte.
	Value []byte
	// Revision is the record's current revision, never 0. A store never
	// gives a record of a kind and name a revision it had before, even
	// after the record was deleted and made again.
	Revision uint64
}

// Bounds of records.
const (
	// MaxRecordKindLen is the longest record kind.
	MaxRecordKindLen = 32
	// MaxRecordNameLen is the longest record name.
	MaxRecordNameLen = 512
)

// Record kinds core keeps.
const (
	// KindSchedule holds schedules: the definition with its cursor, as
	// JSON (Schedule).
	KindSchedule = "schedule"
	// KindTopic holds topic configurations, as JSON (Topic, without its
	// counts and pause), named by topic.
	KindTopic = "topic"
	// KindExpiring names, empty, the topics that were given a job with its
	// own expiry (Job.ExpiresAt without the topic's ExpiresIn): the expiry
	// sweep reads those and the topics with ExpiresIn, no others.
	KindExpiring = "expiring"
)

// PutRecordParams are the arguments of Store.PutRecord.
type PutRecordParams struct {
	Kind  string
	Name  string
	Value []byte
	// Revision is the revision the record must have for the put to apply:
	// the Revision read, or 0 for a record that must not exist (create).
	Revision uint64
}

// DeleteRecordParams are the arguments of Store.DeleteRecord.
type DeleteRecordParams struct {
	Kind string
	Name string
	// Revision is the revision the record must have for the delete to
	// apply, not 0.
	Revision uint64
}

// CheckRecordKind checks a record kind as every store must:
// ErrInvalidArgument when it is not 1-32 characters of [a-z0-9_-].
func CheckRecordKind(kind string) error {
	if kind == "" || len(kind) > MaxRecordKindLen {
		return Invalid("kind", "record kind must be 1-%d characters", MaxRecordKindLen)
	}
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return Invalid("kind", "record kind %q has a character outside [a-z0-9_-]", kind)
		}
	}
	return nil
}

// CheckRecord checks a record's kind and name as every store must:
// ErrInvalidArgument when CheckRecordKind refuses the kind, or the name is
// empty, longer than MaxRecordNameLen or holds a zero byte.
func CheckRecord(kind, name string) error {
	if err := CheckRecordKind(kind); err != nil {
		return err
	}
	if name == "" || len(name) > MaxRecordNameLen {
		return Invalid("name", "record name must be 1-%d bytes", MaxRecordNameLen)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return Invalid("name", "record name must not hold a zero byte")
		}
	}
	return nil
}

// CheckPutRecord checks the arguments of Store.PutRecord as every store
// must: ErrInvalidArgument when params is nil or CheckRecord refuses.
func CheckPutRecord(params *PutRecordParams) error {
	if params == nil {
		return Invalid("", "put record: no params")
	}
	return CheckRecord(params.Kind, params.Name)
}

// CheckDeleteRecord checks the arguments of Store.DeleteRecord as every
// store must: ErrInvalidArgument when params is nil, CheckRecord refuses
// or Revision is 0.
func CheckDeleteRecord(params *DeleteRecordParams) error {
	if params == nil {
		return Invalid("", "delete record: no params")
	}
	if params.Revision == 0 {
		return Invalid("revision", "delete record: a revision is required")
	}
	return CheckRecord(params.Kind, params.Name)
}

// RecordConflict is the conflict of a put or delete of a record that does
// not have the revision it names (0: that exists).
func RecordConflict(kind, name string, revision uint64) *ConflictError {
	if revision == 0 {
		return &ConflictError{Message: fmt.Sprintf("%s %q already exists", kind, name)}
	}
	return &ConflictError{Message: fmt.Sprintf("%s %q changed since revision %d", kind, name, revision)}
}

// RecordNotFound is the error of a record that does not exist, wrapping
// ErrNotFound.
func RecordNotFound(kind, name string) error {
	return fmt.Errorf("%s %q: %w", kind, name, ErrNotFound)
}
