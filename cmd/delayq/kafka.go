package main

import (
	"github.com/spf13/pflag"

	"github.com/delayq/delayq/transports/kafkaclient"
)

// kafkaFlags are the serve flags that reach a Kafka cluster, shared by
// Kafka delivery and intake (kafkaclient.Config).
type kafkaFlags struct {
	kafkaclient.Config
}

func (f *kafkaFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.Brokers, "kafka-brokers", f.Brokers, "Kafka seed brokers, host:port, comma-separated; empty: no Kafka")
	fs.BoolVar(&f.TLS, "kafka-tls", f.TLS, "reach the Kafka brokers over TLS, verifying their certificates against the system's CAs (or --kafka-tls-ca)")
	fs.StringVar(&f.TLSCAFile, "kafka-tls-ca", f.TLSCAFile, "PEM file of the CA certificates that sign the Kafka brokers' certificates; implies --kafka-tls")
	fs.StringVar(&f.SASLMechanism, "kafka-sasl-mechanism", f.SASLMechanism, "SASL mechanism for the Kafka brokers: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: none")
	fs.StringVar(&f.SASLUser, "kafka-sasl-user", f.SASLUser, "SASL user for the Kafka brokers")
	fs.StringVar(&f.SASLPassword, "kafka-sasl-password", f.SASLPassword, "SASL password for the Kafka brokers (prefer DELAYQ_KAFKA_SASL_PASSWORD: a flag shows in the process list)")
}
