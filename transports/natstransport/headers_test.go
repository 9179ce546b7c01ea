package natstransport

import (
	stdjson "encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// FuzzDecodePush checks that any intake message is refused with a field
// error naming a header, or decoded into parameters that reflect it.
func FuzzDecodePush(f *testing.F) {
	for _, seed := range [][3]string{
		{"orders.close", "Delayq-Delay", "500ms"},
		{"t", "Delayq-Delay", "1500"},
		{"t", "Delayq-Run-At", "2026-11-21T10:00:00.250Z"},
		{"t", "Delayq-TTR", "30s"},
		{"t", "Delayq-Max-Attempts", "3"},
		{"t", "Delayq-Priority", "-10"},
		{"t", "Delayq-Url", "https://svc/own?x=1"},
		{"t", "delayq-url", ""},
		{"t", "delayq-id", "a-1"},
		{"t", "Delayq-Key", "k"},
		{"t", "Delayq-Backoff-Delays", "1m, 3m,0"},
		{"t", "Delayq-Backoff-Delays", ",,-1"},
		{"t", "Delayq-Expires-At", "2026-11-21T10:00:00Z"},
		{"t", "Delayq-Expires-In", "90m"},
		{"t", "Delayq-Other", "x"},
		{"t", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"", "X", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], []byte(`{"a":1}`))
	}
	f.Fuzz(func(t *testing.T, topic, key, value string, body []byte) {
		m := &nats.Msg{Subject: "delayq.push." + topic, Data: body, Header: nats.Header{key: []string{value}}}
		p, err := decodePush("delayq.push.", m)
		if err != nil {
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			fe, ok := errors.AsType[*core.FieldError](err)
			require.True(t, ok, "%T", err)
			require.True(t, strings.EqualFold(key, fe.Field), "the error names the header: %q for %q", fe.Field, key)
			require.True(t, stdjson.Valid(appendErrorReply(nil, toReplyError(err))))
			return
		}
		require.Equal(t, topic, p.Topic)
		require.Equal(t, string(body), string(p.Body))
		require.False(t, p.Delay != nil && p.RunAt != nil)
		if p.TTR != 0 {
			require.Positive(t, p.TTR)
		}
		require.NoError(t, core.ValidatePriority("priority", p.Priority))
		if strings.EqualFold(key, HeaderURL) {
			require.Equal(t, value, p.URL, "the url as given")
		} else {
			require.Empty(t, p.URL)
		}
	})
}
