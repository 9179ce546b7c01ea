package httptransport

import (
	"encoding/json"
	"net/http"
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
	if err := decodeObject(patch, "", &obj); err != nil || obj == nil {
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
	obj := func(v any) json.RawMessage {
		b, _ := json.Marshal(v)
		if string(b) == "{}" {
			return nil
		}
		return b
	}
	d := t.Delivery
	var errorBody, allowJobURL *bool
	if d.ErrorBody {
		errorBody = &d.ErrorBody
	}
	if d.AllowJobURL {
		allowJobURL = &d.AllowJobURL
	}
	var delays []json.RawMessage
	for _, x := range t.Backoff.Delays {
		b, _ := json.Marshal(x.String())
		delays = append(delays, b)
	}
	req := struct {
		Delivery    json.RawMessage `json:"delivery,omitempty"`
		TTR         json.RawMessage `json:"ttr,omitempty"`
		MaxAttempts int             `json:"max_attempts,omitempty"`
		Backoff     json.RawMessage `json:"backoff,omitempty"`
		Concurrency int             `json:"concurrency,omitempty"`
		UniqueKeys  string          `json:"unique_keys,omitempty"`
		OnDead      string          `json:"on_dead,omitempty"`
		Rate        json.RawMessage `json:"rate,omitempty"`
		MaxInFlight int             `json:"max_in_flight,omitempty"`
	}{
		Delivery: obj(struct {
			Type           string            `json:"type,omitempty"`
			URL            string            `json:"url,omitempty"`
			Timeout        json.RawMessage   `json:"timeout,omitempty"`
			Secret         string            `json:"secret,omitempty"`
			PreviousSecret string            `json:"previous_secret,omitempty"`
			Subject        string            `json:"subject,omitempty"`
			Success        string            `json:"success,omitempty"`
			Method         string            `json:"method,omitempty"`
			Headers        map[string]string `json:"headers,omitempty"`
			ErrorBody      *bool             `json:"error_body,omitempty"`
			AllowJobURL    *bool             `json:"allow_job_url,omitempty"`
		}{d.Type, d.URL, dur(d.Timeout), d.Secret, d.PreviousSecret, d.Subject, d.Success, d.Method, d.Headers, errorBody, allowJobURL}),
		TTR:         dur(t.TTR),
		MaxAttempts: t.MaxAttempts,
		Backoff: obj(struct {
			Initial json.RawMessage   `json:"initial,omitempty"`
			Max     json.RawMessage   `json:"max,omitempty"`
			Factor  float64           `json:"factor,omitempty"`
			Jitter  float64           `json:"jitter,omitempty"`
			Delays  []json.RawMessage `json:"delays,omitempty"`
		}{dur(t.Backoff.Initial), dur(t.Backoff.Max), t.Backoff.Factor, t.Backoff.Jitter, delays}),
		Concurrency: t.Concurrency,
		UniqueKeys:  t.UniqueKeys,
		OnDead:      t.OnDead,
		Rate: obj(struct {
			Limit  int             `json:"limit,omitempty"`
			Period json.RawMessage `json:"period,omitempty"`
			Burst  int             `json:"burst,omitempty"`
		}{t.Rate.Limit, dur(t.Rate.Period), t.Rate.Burst}),
		MaxInFlight: t.MaxInFlight,
	}
	b, _ := json.Marshal(req)
	return b
}
