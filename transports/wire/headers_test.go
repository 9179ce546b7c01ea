package wire_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// pairs yields headers as a list of name and value pairs, as Kafka holds
// them.
func pairs(kv ...string) wire.Headers {
	return func(yield func(string, []string) bool) {
		for i := 0; i+1 < len(kv); i += 2 {
			if !yield(kv[i], []string{kv[i+1]}) {
				return
			}
		}
	}
}

// TestDecodePushHeadersExtra checks a transport's own headers: returned by
// their names in any case, refused when given twice as two pairs, and an
// unknown delayq header still refused by its name.
func TestDecodePushHeadersExtra(t *testing.T) {
	t.Parallel()
	var p core.PushParams
	extra, err := wire.DecodePushHeaders(&p, pairs("delayq-topic", "orders", "Delayq-Delay", "2s", "Delayq-Id", "a-1", "TraceParent",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "Delayq-Topic", "Delayq-Cancel")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"Delayq-Topic": "orders"}, extra)
	require.Equal(t, "a-1", p.ID)
	require.Equal(t, "2s", p.Delay.String())
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", p.TraceParent)

	for _, c := range []struct {
		hs    wire.Headers
		field string
	}{
		{pairs("Delayq-Topic", "a", "delayq-topic", "b"), "Delayq-Topic"},
		{pairs("Delayq-Id", "a", "Delayq-Id", "b"), "Delayq-Id"},
		{pairs("Delayq-Topik", "a"), "Delayq-Topik"},
	} {
		_, err := wire.DecodePushHeaders(&core.PushParams{}, c.hs, "Delayq-Topic")
		fe, ok := errors.AsType[*core.FieldError](err)
		require.True(t, ok, "%v", err)
		require.Equal(t, c.field, fe.Field)
	}
	_, err = wire.DecodePushHeaders(&core.PushParams{}, pairs("Delayq-Topic", "a"))
	require.ErrorContains(t, err, "unknown header", "a transport's header is known only where it is named")
}
