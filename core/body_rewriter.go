package core

import "context"

// BodyRewriter is the optional capability of a Store to change the body
// of a job it keeps and nothing else, for re-encryption with a new key
// (keyring's Rekey) while the service runs. Find it by type assertion.
type BodyRewriter interface {
	// RewriteBody replaces the body of the job params.ID with params.Body
	// when it is params.Old now (compare-and-set, byte for byte), in one
	// atomic write: state, attempt, lease, times, history and the job's
	// place in every listing stay as they are, so that claims, acks and
	// deliveries running meanwhile are unaffected, and a lease taken
	// before it settles after it. Any job GetJob finds, finished ones
	// within retention included. Errors: ErrNotFound, ErrConflict (a
	// *ConflictError, BodyChangedConflict) when the body is not
	// params.Old, a put having replaced it.
	RewriteBody(ctx context.Context, params *RewriteBodyParams) error
}

// RewriteBodyParams are the arguments of BodyRewriter.RewriteBody.
type RewriteBodyParams struct {
	ID string
	// Old is the body the job must have for the rewrite to apply.
	Old []byte
	// Body is the new body, a valid JSON value as any job's.
	Body []byte
}

// BodyChangedConflict is the conflict of a RewriteBody whose job's body is
// not the one it names.
func BodyChangedConflict(id string) *ConflictError {
	return &ConflictError{Message: "job " + id + ": its body changed since it was read"}
}
