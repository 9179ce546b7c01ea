package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/kafkaclient"
	"github.com/delayq/delayq/transports/kafkatransport"
)

// kafkaFlags are the serve flags that reach a Kafka cluster, shared by
// Kafka delivery and intake (kafkaclient.Config).
type kafkaFlags struct {
	kafkaclient.Config
	// DeliveryTopics are the Kafka topic patterns that tokens restricted
	// to some topics may name as delivery.kafka_topic.
	DeliveryTopics []string
}

func (f *kafkaFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.Brokers, "kafka-brokers", f.Brokers, "Kafka seed brokers, host:port, comma-separated; empty: no Kafka")
	fs.BoolVar(&f.TLS, "kafka-tls", f.TLS, "reach the Kafka brokers over TLS, verifying their certificates against the system's CAs (or --kafka-tls-ca)")
	fs.StringVar(&f.TLSCAFile, "kafka-tls-ca", f.TLSCAFile, "PEM file of the CA certificates that sign the Kafka brokers' certificates; implies --kafka-tls")
	fs.StringVar(&f.SASLMechanism, "kafka-sasl-mechanism", f.SASLMechanism, "SASL mechanism for the Kafka brokers: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: none")
	fs.StringVar(&f.SASLUser, "kafka-sasl-user", f.SASLUser, "SASL user for the Kafka brokers")
	fs.StringVar(&f.SASLPassword, "kafka-sasl-password", f.SASLPassword, "SASL password for the Kafka brokers (prefer DELAYQ_KAFKA_SASL_PASSWORD: a flag shows in the process list)")
	fs.Var(&subjectPatternsValue{p: &f.DeliveryTopics}, "kafka-delivery-topics", "Kafka topic patterns, comma-separated (billing.>, orders-due; * one dot-separated part, a final > the rest), that tokens restricted to topics may name as delivery.kafka_topic; empty: none")
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
	d, err := kafkatransport.NewDeliverer(kafkatransport.DelivererConfig{Client: client})
	if err != nil {
		return err
	}
	deliverers[core.DeliveryKafka] = d
	log.Info("kafka delivery on", "brokers", strings.Join(cfg.Kafka.Brokers, ","))
	return nil
}
