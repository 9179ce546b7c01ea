package httptransport

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// patchTopic serves PATCH /v1/topics/{topic}: the body, a JSON merge patch
// (RFC 7386), changes the topic's configuration as PUT takes it, so that
// one setting changes without sending the secrets and headers again: a
// member sets that setting, an object merges into the one stored, null
// drops the setting (its default again). The result is checked as a PUT
// body would be. 200 with the topic as GET shows it; 404 for a topic with
// neither jobs nor configuration.
func (s *Server) patchTopic(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("topic")
	data, release, err := readBodyOf(w, r, wire.SmallRequestBytes, jsonType, mergePatchType)
	if err != nil {
		return err
	}
	patch := append([]byte(nil), data...)
	release()
	var obj map[string]json.RawMessage
	if err := wire.DecodeObject(patch, "", &obj); err != nil || obj == nil {
		return core.Invalid("", "the body must be a JSON merge patch (RFC 7386): an object of the settings to change, null for those to drop")
	}
	stored, err := s.svc.UpdateTopic(r.Context(), name, func(cur *core.Topic) (*core.Topic, error) {
		merged, err := jsonpatch.MergePatch(topicRequestJSON(cur), patch)
		if err != nil {
			return nil, core.Invalid("", "the merge patch does not apply: %v", err)
		}
		return decodeTopicRequest(name, merged)
	})
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, newTopicView(stored))
	return nil
}

// topicRequestJSON is t's configuration in the form of a PUT body, secrets
// and headers included: what a merge patch applies to. Settings left at
// their defaults are absent, as a PUT body without them stores them.
func topicRequestJSON(t *core.Topic) []byte {
	dur := func(d time.Duration) json.RawMessage {
		if d == 0 {
			return nil
		}
		b, _ := json.Marshal(d.String())
		return b
	}
	// obj is v as JSON, nil when it has no member.
	obj := func(v any) json.RawMessage {
		b, _ := json.Marshal(v)
		if string(b) == "{}" {
			return nil
		}
		return b
	}
	flag := func(b bool) *bool {
		if !b {
			return nil
		}
		return &b
	}
	d, b, r := t.Delivery, t.Backoff, t.Rate
	// An explicit zero is written as one, so that a patch keeps it.
	zeroDur := func(field string, x time.Duration) json.RawMessage {
		if x == 0 && slices.Contains(b.Zeros, field) {
			return json.RawMessage(`"0s"`)
		}
		return dur(x)
	}
	var jitter *float64
	if b.Jitter != 0 || slices.Contains(b.Zeros, "jitter") {
		jitter = &b.Jitter
	}
	var delays []json.RawMessage
	for _, x := range b.Delays {
		delays = append(delays, dur(x))
	}
	req := topicRequest{
		Delivery: obj(deliveryRequest{Type: d.Type, URL: d.URL, Timeout: dur(d.Timeout), Secret: d.Secret, PreviousSecret: d.PreviousSecret,
			Subject: d.Subject, KafkaTopic: d.KafkaTopic, Success: d.Success, Method: d.Method, Headers: d.Headers, ErrorBody: flag(d.ErrorBody), AllowJobURL: flag(d.AllowJobURL)}),
		TTR: dur(t.TTR), MaxAttempts: t.MaxAttempts, Concurrency: t.Concurrency, UniqueKeys: t.UniqueKeys, OnDead: t.OnDead,
		Backoff:        obj(backoffRequest{Initial: zeroDur("initial", b.Initial), Max: zeroDur("max", b.Max), Factor: b.Factor, Jitter: jitter, Delays: delays}),
		Rate:           obj(rateRequest{Limit: r.Limit, Period: dur(r.Period), Burst: r.Burst, PerKey: r.PerKey}),
		MaxInFlight:    t.MaxInFlight,
		KeyConcurrency: t.KeyConcurrency,
		Fair:           t.Fair,
		ExpiresIn:      dur(t.ExpiresIn),
		Delay:          dur(t.Delay),
		Retention:      dur(t.Retention),
		Events:         newEventsView(t.Events),
	}
	out, _ := json.Marshal(req)
	return out
}
