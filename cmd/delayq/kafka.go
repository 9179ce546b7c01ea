package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/kafkaclient"
	"github.com/delayq/delayq/transports/kafkaintake"
	"github.com/delayq/delayq/transports/kafkatransport"
)

// kafkaFlags are the serve flags of Kafka: those that reach a cluster,
// shared by Kafka delivery and intake (kafkaclient.Config), and those of
// intake.
type kafkaFlags struct {
	kafkaclient.Config
	// DeliveryTopics are the Kafka topic patterns that tokens restricted
	// to some topics may name as delivery.kafka_topic.
	DeliveryTopics []string
	kafkaIntakeFlags
}

func defaultKafkaFlags() kafkaFlags {
	return kafkaFlags{kafkaIntakeFlags: kafkaIntakeFlags{Group: kafkaintake.GroupDefault}}
}

func (f *kafkaFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.Brokers, "kafka-brokers", f.Brokers, "Kafka seed brokers, host:port, comma-separated; empty: no Kafka")
	fs.BoolVar(&f.TLS, "kafka-tls", f.TLS, "reach the Kafka brokers over TLS, verifying their certificates against the system's CAs (or --kafka-tls-ca)")
	fs.StringVar(&f.TLSCAFile, "kafka-tls-ca", f.TLSCAFile, "PEM file of the CA certificates that sign the Kafka brokers' certificates; implies --kafka-tls")
	fs.StringVar(&f.SASLMechanism, "kafka-sasl-mechanism", f.SASLMechanism, "SASL mechanism for the Kafka brokers: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: none")
	fs.StringVar(&f.SASLUser, "kafka-sasl-user", f.SASLUser, "SASL user for the Kafka brokers")
	fs.StringVar(&f.SASLPassword, "kafka-sasl-password", f.SASLPassword, "SASL password for the Kafka brokers (prefer DELAYQ_KAFKA_SASL_PASSWORD: a flag shows in the process list)")
	fs.Var(&subjectPatternsValue{p: &f.DeliveryTopics}, "kafka-delivery-topics", "Kafka topic patterns, comma-separated (billing.>, orders-due; * one dot-separated part, a final > the rest), that tokens restricted to topics may name as delivery.kafka_topic; empty: none")
	f.kafkaIntakeFlags.addFlags(fs)
}

// Validate checks the Kafka flags without connecting, naming the flag at
// fault: the cluster's (the kafkaclient.Config.Validate it stands in for)
// and intake's.
func (f *kafkaFlags) Validate() error {
	if err := f.Config.Validate(); err != nil {
		return err
	}
	return f.kafkaIntakeFlags.validate(f.Config)
}

// kafkaIntakeFlags are the serve flags of intake from Kafka
// (kafkaintake.Config).
type kafkaIntakeFlags struct {
	IntakeTopic     string
	Group           string
	IntakeDeadTopic string
}

func (f *kafkaIntakeFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.IntakeTopic, "kafka-intake-topic", f.IntakeTopic, "Kafka topic whose records are pushes and cancels (docs/api.md, Kafka intake); empty: no Kafka intake. Needs --kafka-brokers")
	fs.StringVar(&f.Group, "kafka-group", f.Group, "Kafka consumer group of Kafka intake, shared by the instances that split the topic's partitions")
	fs.StringVar(&f.IntakeDeadTopic, "kafka-intake-dead-topic", f.IntakeDeadTopic, "Kafka topic that takes the intake records refused, with the error in the delayq-error header; empty: they are logged and dropped")
}

func (f *kafkaIntakeFlags) validate(c kafkaclient.Config) error {
	switch {
	case f.IntakeTopic == "" && f.IntakeDeadTopic != "":
		return errors.New("--kafka-intake-dead-topic needs --kafka-intake-topic")
	case f.IntakeTopic == "":
		return nil
	case !c.Enabled():
		return errors.New("--kafka-intake-topic needs --kafka-brokers")
	case f.Group == "":
		return errors.New("--kafka-group must not be empty")
	case f.IntakeDeadTopic == f.IntakeTopic:
		return errors.New("--kafka-intake-dead-topic must not be --kafka-intake-topic")
	}
	return nil
}

// kafkaStartTimeout bounds the wait for a Kafka broker at start.
const kafkaStartTimeout = 30 * time.Second

// startKafkaIntake starts Kafka intake when --kafka-intake-topic is set and
// pushes its stop, which runs before the engine's: the batch in hand is
// stored and committed, or left uncommitted to be read again.
func startKafkaIntake(ctx context.Context, cfg *serveConfig, log *slog.Logger, engine *core.Engine, svc *service.Service, obs *observability, stops *stopStack) error {
	k := cfg.Kafka
	if k.IntakeTopic == "" {
		return nil
	}
	in, err := kafkaintake.New(kafkaintake.Config{
		Kafka:         k.Config,
		Topic:         k.IntakeTopic,
		Group:         k.Group,
		DeadTopic:     k.IntakeDeadTopic,
		Engine:        engine,
		Service:       svc,
		Logger:        log,
		MeterProvider: obs.tcfg.MeterProvider,
	})
	if err == nil {
		// A start waits for a broker, not forever.
		sctx, cancel := context.WithTimeout(ctx, kafkaStartTimeout)
		err = in.Start(sctx)
		cancel()
	}
	if err != nil {
		return err
	}
	stops.push("kafka intake stopped before committing the batch in hand; its records are read again", in.Stop)
	log.Info("kafka intake consuming", "topic", k.IntakeTopic, "group", k.Group, "dead_topic", k.IntakeDeadTopic)
	return nil
}

// addKafkaDeliverer adds the deliverer of kafka topics to deliverers when
// --kafka-brokers is set, its client's close on stops (after the engine's
// stop, pushed later, lets deliveries in flight end). Brokers that do not
// answer at start are waited for as an unavailable backend is
// (--backend-wait), then the start fails: a wrong address shows at once,
// not as deliveries that fail one by one. Once started, brokers that go
// down fail deliveries, which are retried; the endpoint breakers fail
// them fast meanwhile.
func addKafkaDeliverer(ctx context.Context, cfg *serveConfig, log *slog.Logger, deliverers map[string]core.Deliverer, stops *stopStack) error {
	if !cfg.Kafka.Enabled() {
		return nil
	}
	// A configuration error (a CA file that cannot be read) exits at once;
	// only brokers that do not answer are waited for.
	if _, err := cfg.Kafka.Opts(); err != nil {
		return err
	}
	client, err := waitForBackend(ctx, log, cfg.BackendWait, func() (*kgo.Client, error) {
		pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cl, err := cfg.Kafka.NewClient(pingCtx, kafkatransport.ProducerOpts()...)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", core.ErrUnavailable, err)
		}
		return cl, nil
	})
	if err != nil {
		return fmt.Errorf("kafka delivery (--kafka-brokers): %w", err)
	}
	stops.pushFunc(client.Close)
	var refused []string
	if cfg.Kafka.IntakeTopic != "" {
		refused = []string{cfg.Kafka.IntakeTopic}
	}
	d, err := kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{Client: client, Refused: refused})
	if err != nil {
		return err
	}
	deliverers[core.DeliveryKafka] = d
	log.Info("kafka delivery on", "brokers", strings.Join(cfg.Kafka.Brokers, ","))
	return nil
}
