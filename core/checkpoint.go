package core

import "context"

// Checkpointer is the optional capability of a Store to copy its data, in
// its own format, while it serves: an online backup of a store that keeps
// its data in files of its own (the local backend's Pebble directory). Find
// it by type assertion; decorators of a store implement it and answer
// ErrUnsupported when the store under them does not. Stores whose data
// lives in another server (Redis, NATS) or nowhere (memory) lack it: their
// servers' own tools back them up, and JobExporter works on every store.
type Checkpointer interface {
	// Checkpoint writes a checkpoint of the store into dir, which must not
	// exist yet: a consistent copy of its data, jobs in every state
	// (finished ones within retention) and topic configurations, as of
	// one moment between the call and its return. Every write answered
	// before the call is in it; a write answered during it is in it whole
	// or not at all. A store of the same backend opens dir as its data
	// directory as it is, and finds what the store held then (a reserved
	// job with its lease, which expires by the clock as it would have).
	// Other calls go on while it runs. On the file system of the store's
	// data it costs little (the store's immutable files are hard-linked);
	// elsewhere they are copied. A checkpoint that failed leaves no dir
	// behind. Errors: ctx's before it began, ErrClosed, fs.ErrExist when
	// dir exists (left as it was), those of the file system.
	Checkpoint(ctx context.Context, dir string) error
}

// Checkpoint writes a checkpoint of the store into dir, which must not
// exist yet (see Checkpointer). Errors: ErrUnsupported, those of the store.
func (e *Engine) Checkpoint(ctx context.Context, dir string) error {
	c, ok := e.store.(Checkpointer)
	if !ok {
		return ErrUnsupported
	}
	return c.Checkpoint(ctx, dir)
}
