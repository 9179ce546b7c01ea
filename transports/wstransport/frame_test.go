package wstransport

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// FuzzDecodeFrame checks that any client frame is either refused with a
// field error or decoded into a frame that is complete and that its own
// JSON form decodes to again.
func FuzzDecodeFrame(f *testing.F) {
	for _, seed := range []string{
		`{"type":"ack","id":"01J","lease":"l"}`,
		`{"type":"nack","id":"01J","lease":"l","delay":"1500ms","error":"boom"}`,
		`{"type":"nack","id":"01J","lease":"l","delay":1500}`,
		`{"type":"nack","id":"01J","lease":"l","delay":null}`,
		`{"type":"touch","id":"01J","lease":"l"}`,
		` {"type":"ack","id":"a","lease":"b"} `,
		`{"type":"ack","id":"a","lease":"b","delay":"1s"}`,
		`{"type":"ack","id":"a","lease":"b"}{}`,
		`{"type":"hello"}`, `{"type":7}`, `{}`, `[]`, `null`, ``, `"ack"`, `{"type":"ack"`,
		`{"type":"ack","id":"a","lease":"b","x":1}`, `{"type":"nack","id":"a","lease":"b","delay":"9999999999h"}`,
		`{"type":"ack","id":"\u00e9\ud800","lease":"b"}`,
		`{"TYPE":"ack","id":"a","lease":"b"}`, `{"typ\u0065":"ack","id":"a","lease":"b"}`,
		`{"type":"ack","id":"a","lease":"b","x":{"type":1}}`, `{"type":"ack","id":"a:b","lease":"\":"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The quick path of decodeWire decides as the strict decoder does.
		if obj := wire.TrimJSONSpace(data); len(obj) > 0 && obj[0] == '{' {
			quick, quickErr := decodeWire(obj)
			var strict frameWire
			dec := json.NewDecoder(bytes.NewReader(obj))
			dec.DisallowUnknownFields()
			strictErr := dec.Decode(&strict)
			if strictErr == nil && len(wire.TrimJSONSpace(obj[dec.InputOffset():])) != 0 {
				strictErr = errors.New("trailing data")
			}
			require.Equal(t, strictErr == nil, quickErr == nil, "quick %v, strict %v", quickErr, strictErr)
			if strictErr == nil {
				require.Equal(t, strict, quick)
			}
		}
		fr, err := decodeFrame(data)
		if err != nil {
			require.True(t, errors.Is(err, core.ErrInvalidArgument), "%v", err)
			_, ok := errors.AsType[*core.FieldError](err)
			require.True(t, ok, "%T", err)
			require.NotEmpty(t, err.Error())
			// The error frame that answers it is valid JSON.
			out := appendErrorFrame(nil, toWireError(err), truncate(fr.ID, core.MaxIDLen))
			require.True(t, json.Valid(out), "%s", out)
			return
		}
		require.Contains(t, []string{frameAck, frameNack, frameTouch}, fr.Type)
		require.NotEmpty(t, fr.ID)
		require.NotEmpty(t, fr.Lease)
		if fr.Type != frameNack {
			require.Nil(t, fr.Delay)
			require.Empty(t, fr.Error)
		}
		w := map[string]any{"type": fr.Type, "id": fr.ID, "lease": fr.Lease}
		if fr.Delay != nil {
			w["delay"] = fr.Delay.String()
		}
		if fr.Error != "" {
			w["error"] = fr.Error
		}
		again, err := json.Marshal(w)
		require.NoError(t, err)
		fr2, err := decodeFrame(again)
		require.NoError(t, err, "%s", again)
		require.Equal(t, fr, fr2)
	})
}

func TestJobFrame(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 10, 0, 0, 250e6, time.UTC)
	j := &core.Job{ID: "a", Topic: "t", Body: json.RawMessage(" [1, 2] "), Attempt: 3, RunAt: at, Lease: "l", LeaseExpiresAt: at.Add(time.Second)}
	prefix := []byte("keep")
	out := appendJobFrame(prefix, j)
	require.Equal(t, `keep{"type":"job","id":"a","topic":"t","body": [1, 2] ,"attempt":3,"run_at":"2026-11-21T10:00:00.250Z","lease":"l","lease_expires_at":"2026-11-21T10:00:01.250Z"}`, string(out))
}
