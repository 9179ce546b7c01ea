package natstransport

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Headers of intake messages, as docs/api.md's NATS section names them
// (those of every intake from a message queue, package wire's). They are
// matched in any case.
const (
	HeaderDelay         = wire.HeaderDelay
	HeaderRunAt         = wire.HeaderRunAt
	HeaderID            = wire.HeaderID
	HeaderTTR           = wire.HeaderTTR
	HeaderMaxAttempts   = wire.HeaderMaxAttempts
	HeaderKey           = wire.HeaderKey
	HeaderBackoffDelays = wire.HeaderBackoffDelays
	HeaderPriority      = wire.HeaderPriority
	HeaderURL           = wire.HeaderURL
	HeaderExpiresAt     = wire.HeaderExpiresAt
	HeaderExpiresIn     = wire.HeaderExpiresIn
	HeaderTraceParent   = wire.HeaderTraceParent
)

// Headers of deliveries besides HeaderID and HeaderTraceParent.
const (
	// HeaderAttempt is the 1-based attempt of a delivery.
	HeaderAttempt = "Delayq-Attempt"
	// HeaderTopic is the topic of a delivered job.
	HeaderTopic = "Delayq-Topic"
)

// decodePush builds the engine's push parameters from an intake message:
// the topic from the subject after subjectPrefix, the body from the
// payload, the rest from the headers (wire.DecodePushHeaders). Errors are
// *core.FieldError values naming the header.
func decodePush(subjectPrefix string, m *nats.Msg) (*core.PushParams, error) {
	p := &core.PushParams{
		Topic: strings.TrimPrefix(m.Subject, subjectPrefix),
		Body:  json.RawMessage(m.Data),
	}
	if _, err := wire.DecodePushHeaders(p, maps.All(m.Header)); err != nil {
		return nil, err
	}
	return p, nil
}

// deliveryHeaders returns the headers of a delivery of job.
func deliveryHeaders(job *core.Job) nats.Header {
	h := nats.Header{}
	h.Set(HeaderID, job.ID)
	h.Set(HeaderAttempt, strconv.Itoa(job.Attempt))
	h.Set(HeaderRunAt, job.RunAt.UTC().Format(wire.TimeLayout))
	h.Set(HeaderTopic, job.Topic)
	if job.TraceParent != "" {
		h.Set(HeaderTraceParent, job.TraceParent)
	}
	return h
}

// appendPushed appends the reply to a created job: id, topic, run_at and
// state, as the HTTP API answers it.
func appendPushed(b []byte, j *core.Job) []byte {
	b = append(b, `{"id":`...)
	b = wire.AppendString(b, j.ID)
	b = append(b, `,"topic":`...)
	b = wire.AppendString(b, j.Topic)
	b = append(b, `,"run_at":`...)
	b = wire.AppendTime(b, j.RunAt)
	b = append(b, `,"state":`...)
	b = wire.AppendString(b, string(j.State))
	return append(b, '}')
}
