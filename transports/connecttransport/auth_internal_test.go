package connecttransport

import (
	"testing"

	"github.com/stretchr/testify/require"

	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// TestEveryProcedureHasAnOp checks that every method of the service maps to
// an operation of the service's table, so that a new method gets its
// access on purpose rather than falling to admin unseen.
func TestEveryProcedureHasAnOp(t *testing.T) {
	t.Parallel()
	methods := delayqv1.File_delayq_v1_delayq_proto.Services().ByName("DelayqService").Methods()
	require.Positive(t, methods.Len())
	for i := range methods.Len() {
		name := string(methods.Get(i).Name())
		op, listed := procedureOps[servicePrefix+name]
		require.True(t, listed, "%s has no operation in procedureOps", name)
		require.True(t, op.Known(), "%s maps to %q, not in the service's table", name, op)
	}
	require.Len(t, procedureOps, methods.Len(), "procedureOps names only methods of the service")
}
