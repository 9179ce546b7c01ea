package connecttransport

import (
	"context"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// UpdateTopic changes the settings of a topic's configuration that the
// request's update_mask names, from its config, and keeps the others, as
// PATCH /v1/topics/{topic}: a named setting config leaves unset takes its
// default again. The result is checked as PutTopic checks its config.
// Errors: InvalidArgument for an empty or unknown path, or a bad result;
// NotFound for a topic with neither jobs nor configuration.
func (s *Server) UpdateTopic(ctx context.Context, req *connect.Request[delayqv1.UpdateTopicRequest]) (*connect.Response[delayqv1.UpdateTopicResponse], error) {
	mask, src := req.Msg.GetUpdateMask().GetPaths(), req.Msg.GetConfig()
	if src == nil {
		src = &delayqv1.TopicConfig{}
	}
	if len(mask) == 0 {
		return nil, core.Invalid("update_mask", "update_mask names no setting: name those to change, as paths of TopicConfig (max_attempts, delivery.timeout)")
	}
	if !req.Msg.GetUpdateMask().IsValid(src) {
		return nil, core.Invalid("update_mask", "update_mask %q names a setting TopicConfig does not have", strings.Join(mask, ","))
	}
	stored, err := s.svc.UpdateTopic(ctx, req.Msg.Name, func(cur *core.Topic) (*core.Topic, error) {
		m := topicConfigMessage(cur)
		for _, path := range mask {
			copyPath(m.ProtoReflect(), src.ProtoReflect(), strings.Split(path, "."))
		}
		return topicConfig(req.Msg.Name, m)
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.UpdateTopicResponse{Topic: topicMessage(stored)}), nil
}

// copyPath sets the field of dst at path to src's, or clears it where src
// has none; path is valid for both (FieldMask.IsValid).
func copyPath(dst, src protoreflect.Message, path []string) {
	fd := dst.Descriptor().Fields().ByName(protoreflect.Name(path[0]))
	if len(path) > 1 {
		copyPath(dst.Mutable(fd).Message(), src.Get(fd).Message(), path[1:])
		return
	}
	if src.Has(fd) {
		dst.Set(fd, src.Get(fd))
	} else {
		dst.Clear(fd)
	}
}

// topicConfigMessage is t's configuration as PutTopic takes it, secrets
// and headers included: what UpdateTopic changes. Durations at zero (their
// defaults) are empty, as topicConfig reads them.
func topicConfigMessage(t *core.Topic) *delayqv1.TopicConfig {
	d, r, b := t.Delivery, t.Rate, t.Backoff
	return &delayqv1.TopicConfig{
		Ttr: durText(t.TTR), MaxAttempts: int32(t.MaxAttempts), Concurrency: int32(t.Concurrency),
		UniqueKeys: t.UniqueKeys, OnDead: t.OnDead, Events: eventsMessage(t.Events), MaxInFlight: int32(t.MaxInFlight), KeyConcurrency: int32(t.KeyConcurrency), Fair: t.Fair, ExpiresIn: durText(t.ExpiresIn), Delay: durText(t.Delay), Retention: durText(t.Retention),
		Delivery: &delayqv1.DeliveryConfig{Type: d.Type, Url: d.URL, Timeout: durText(d.Timeout), Secret: d.Secret,
			PreviousSecret: d.PreviousSecret, Subject: d.Subject, KafkaTopic: d.KafkaTopic, Success: d.Success, Method: d.Method, Headers: d.Headers,
			ErrorBody: d.ErrorBody, AllowJobUrl: d.AllowJobURL},
		Rate: &delayqv1.RateConfig{Limit: int32(r.Limit), Period: durText(r.Period), Burst: int32(r.Burst), PerKey: r.PerKey},
		Backoff: &delayqv1.BackoffConfig{Initial: zeroText("initial", b, b.Initial), Max: zeroText("max", b, b.Max), Factor: b.Factor,
			Jitter: b.Jitter, Delays: durationTexts(b.Delays), Zeros: b.Zeros},
	}
}

// zeroText is durText of the backoff field d, "0s" when it is an explicit
// zero (core.Backoff.Zeros), so that an update keeps it.
func zeroText(field string, b core.Backoff, d time.Duration) string {
	if d == 0 && slices.Contains(b.Zeros, field) {
		return "0s"
	}
	return durText(d)
}

// durText is d as a wire duration, empty for 0.
func durText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}
