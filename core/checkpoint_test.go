package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
)

// recordingCheckpointer is a store with the checkpoint capability that
// records the directories asked for.
type recordingCheckpointer struct {
	core.Store
	dirs []string
}

func (r *recordingCheckpointer) Checkpoint(_ context.Context, dir string) error {
	r.dirs = append(r.dirs, dir)
	return nil
}

func TestCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := core.NewEngine(core.EngineConfig{Store: plainStore{memstore.New(memstore.Config{})}})
	require.NoError(t, err)
	err = e.Checkpoint(ctx, t.TempDir())
	require.ErrorIs(t, err, core.ErrUnsupported)
	require.ErrorIs(t, err, errors.ErrUnsupported)

	rec := &recordingCheckpointer{Store: memstore.New(memstore.Config{})}
	e, err = core.NewEngine(core.EngineConfig{Store: rec})
	require.NoError(t, err)
	require.NoError(t, e.Checkpoint(ctx, "/backups/x"))
	require.Equal(t, []string{"/backups/x"}, rec.dirs)
}
