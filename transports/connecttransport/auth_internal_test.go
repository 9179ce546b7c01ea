package connecttransport

import (
	"testing"

	"github.com/stretchr/testify/require"

	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// TestProcedureScopesComplete checks that every method of the service is
// either in procedureScopes or one of those its route keeps to admin, so
// that a new method gets its route's scopes on purpose rather than
// falling to admin unseen.
func TestProcedureScopesComplete(t *testing.T) {
	t.Parallel()
	adminOnly := map[string]bool{
		"Requeue": true, "ListDead": true, "PutTopic": true, "DeleteTopic": true,
		"PauseTopic": true, "ResumeTopic": true, "PutSchedule": true, "GetSchedule": true,
		"ListSchedules": true, "DeleteSchedule": true, "Export": true, "Import": true,
	}
	methods := delayqv1.File_delayq_v1_delayq_proto.Services().ByName("DelayqService").Methods()
	require.Positive(t, methods.Len())
	for i := range methods.Len() {
		name := string(methods.Get(i).Name())
		_, listed := procedureScopes[servicePrefix+name]
		require.NotEqual(t, adminOnly[name], listed, "%s must be in procedureScopes or admin-only, not both nor neither", name)
	}
	require.Len(t, procedureScopes, methods.Len()-len(adminOnly), "procedureScopes names only methods of the service")
}
