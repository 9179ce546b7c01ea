package service

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/keyring"
)

// Config configures a Service.
type Config struct {
	// Engine serves every operation. Required.
	Engine *core.Engine
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// NATSDeliverySubjects are NATS subject patterns (`*` one token, a
	// final `>` one or more) that a token restricted to some topics may
	// name as a topic's delivery.subject besides delayq.deliver.<topic> of
	// its own topics (see AllowDelivery). Nil allows no other subject.
	NATSDeliverySubjects []string
	// KafkaDeliveryTopics are Kafka topic patterns, of the syntax of
	// NATSDeliverySubjects over the dot-separated parts of a name, that a
	// token restricted to some topics may name as a topic's
	// delivery.kafka_topic (see AllowDelivery). Nil allows none.
	KafkaDeliveryTopics []string
	// Encryption is the store's encryption at rest (--encryption-keys):
	// exports seal bodies with its ring unless asked for plaintext,
	// imports open them, and Rekey runs over it. Nil when off.
	Encryption *keyring.Store
}

// Service applies the API's policy to the operations of a core.Engine. It
// is safe for concurrent use.
type Service struct {
	engine       *core.Engine
	log          *slog.Logger
	natsSubjects []string
	kafkaTopics  []string
	encryption   *keyring.Store
}

// New returns a Service over cfg.Engine. It panics when cfg.Engine is nil.
func New(cfg Config) *Service {
	if cfg.Engine == nil {
		panic("service: Config.Engine is required")
	}
	return &Service{engine: cfg.Engine, log: cmp.Or(cfg.Logger, slog.Default()), natsSubjects: cfg.NATSDeliverySubjects,
		kafkaTopics: cfg.KafkaDeliveryTopics, encryption: cfg.Encryption}
}

// identityKey is the context key of the caller's *auth.Identity.
type identityKey struct{}

// WithIdentity returns ctx carrying id, the token that authenticated the
// call.
func WithIdentity(ctx context.Context, id *auth.Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity WithIdentity put in ctx: nil when the
// API has no tokens, the operation is open, or the call came by NATS.
func IdentityFrom(ctx context.Context) *auth.Identity {
	id, _ := ctx.Value(identityKey{}).(*auth.Identity)
	return id
}

// pushOf returns the push of params by the call of ctx: the transport it
// came by (core.TransportFrom, whose names are the Origin constants of
// the intakes) and the name of its token, kept in the jobs' Changes.
func pushOf(ctx context.Context, params []*core.PushParams, replace bool) *core.PushBatchParams {
	p := &core.PushBatchParams{Jobs: params, Replace: replace, Via: core.TransportFrom(ctx)}
	if id := IdentityFrom(ctx); id != nil {
		p.Token = id.Name
	}
	return p
}
