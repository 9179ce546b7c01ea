package httptransport

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// TestTopicRequestJSONRoundTrips checks that a configuration written in
// the form of a PUT body decodes to itself, every setting set: a setting
// added to core.Topic and not to topicRequestJSON would be dropped by
// every PATCH.
func TestTopicRequestJSONRoundTrips(t *testing.T) {
	t.Parallel()
	full := coretest.FullTopic(t)
	got, err := decodeTopicRequest(full.Name, topicRequestJSON(full))
	require.NoError(t, err)
	require.Equal(t, full, got)

	require.JSONEq(t, `{}`, string(topicRequestJSON(&core.Topic{Name: "t"})))
	empty, err := decodeTopicRequest("t", topicRequestJSON(&core.Topic{Name: "t"}))
	require.NoError(t, err)
	require.Equal(t, &core.Topic{Name: "t"}, empty)
}
