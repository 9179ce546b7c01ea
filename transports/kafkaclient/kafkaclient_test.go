package kafkaclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/delayq/delayq/transports/kafkaclient"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  kafkaclient.Config
		says string
	}{
		{kafkaclient.Config{Brokers: []string{"kafka:9092", "nohost"}}, `--kafka-brokers: "nohost" is not host:port`},
		{kafkaclient.Config{Brokers: []string{":9092"}}, "--kafka-brokers"},
		{kafkaclient.Config{Brokers: []string{"k:9092"}, SASLMechanism: "GSSAPI", SASLUser: "u", SASLPassword: "p"}, "--kafka-sasl-mechanism"},
		{kafkaclient.Config{Brokers: []string{"k:9092"}, SASLMechanism: kafkaclient.SASLSCRAMSHA512}, "needs --kafka-sasl-user"},
		{kafkaclient.Config{Brokers: []string{"k:9092"}, SASLUser: "u"}, "need --kafka-sasl-mechanism"},
		{kafkaclient.Config{TLS: true}, "need --kafka-brokers"},
	} {
		require.ErrorContains(t, c.cfg.Validate(), c.says)
	}
	require.NoError(t, kafkaclient.Config{}.Validate(), "no brokers: Kafka off")
	require.False(t, kafkaclient.Config{}.Enabled())
	_, err := kafkaclient.Config{Brokers: []string{"k:9092"}, TLSCAFile: "/nonexistent/ca.pem"}.Opts()
	require.ErrorContains(t, err, "--kafka-tls-ca")
}

// TestNewClientSCRAM reaches an in-process cluster that requires
// SCRAM-SHA-256: with the right password a record goes through; with a
// wrong one the client is refused at once.
func TestNewClientSCRAM(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(kafkaclient.SASLSCRAMSHA256, "delayq", "s3cret-pass"),
		kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cfg := kafkaclient.Config{Brokers: c.ListenAddrs(), SASLMechanism: kafkaclient.SASLSCRAMSHA256, SASLUser: "delayq", SASLPassword: "s3cret-pass"}
	cl, err := cfg.NewClient(ctx)
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("1")}).FirstErr())

	cfg.SASLPassword = "wrong"
	_, err = cfg.NewClient(ctx)
	require.Error(t, err)
}
