package connecttransport

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

// TestTopicConfigMessageRoundTrips checks that a configuration written as
// PutTopic's message reads back as itself, every setting set: a setting
// added to core.Topic and not to topicConfigMessage would be dropped by
// every UpdateTopic.
func TestTopicConfigMessageRoundTrips(t *testing.T) {
	t.Parallel()
	full := coretest.FullTopic(t)
	got, err := topicConfig(full.Name, topicConfigMessage(full))
	require.NoError(t, err)
	require.Equal(t, full, got)
	empty, err := topicConfig("t", topicConfigMessage(&core.Topic{Name: "t"}))
	require.NoError(t, err)
	require.Equal(t, &core.Topic{Name: "t"}, empty)
}
