// Package kafkaclient holds what delayq's Kafka delivery and Kafka intake
// share: the brokers and how to reach them (TLS, SASL), as options of
// franz-go's client (kgo), so that both connect alike and a flag is
// defined once.
package kafkaclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanisms Config.SASLMechanism names.
const (
	SASLPlain       = "PLAIN"
	SASLSCRAMSHA256 = "SCRAM-SHA-256"
	SASLSCRAMSHA512 = "SCRAM-SHA-512"
)

// Config says how to reach a Kafka cluster. The zero value has no
// brokers: Kafka is off.
type Config struct {
	// Brokers are the seed brokers, host:port each.
	Brokers []string
	// TLS connects over TLS, verifying the brokers' certificates against
	// the system's roots, or TLSCAFile's when set.
	TLS bool
	// TLSCAFile is a PEM file of the CA certificates that sign the
	// brokers' certificates; it implies TLS.
	TLSCAFile string
	// SASLMechanism is "", SASLPlain, SASLSCRAMSHA256 or SASLSCRAMSHA512;
	// with one, SASLUser and SASLPassword are required.
	SASLMechanism string
	// SASLUser and SASLPassword authenticate with SASLMechanism.
	SASLUser, SASLPassword string
}

// Enabled reports whether c names brokers.
func (c Config) Enabled() bool { return len(c.Brokers) > 0 }

// Validate checks c without connecting: brokers as host:port, a known
// SASL mechanism with its user and password, TLS options only with
// brokers. Errors name the flag at fault.
func (c Config) Validate() error {
	for _, b := range c.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("--kafka-brokers: %q is not host:port", b)
		}
	}
	switch c.SASLMechanism {
	case "":
		if c.SASLUser != "" || c.SASLPassword != "" {
			return errors.New("--kafka-sasl-user and --kafka-sasl-password need --kafka-sasl-mechanism")
		}
	case SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512:
		if c.SASLUser == "" || c.SASLPassword == "" {
			return fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-user and --kafka-sasl-password", c.SASLMechanism)
		}
	default:
		return fmt.Errorf("--kafka-sasl-mechanism: %q is not %s, %s or %s", c.SASLMechanism, SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512)
	}
	if !c.Enabled() && (c.TLS || c.TLSCAFile != "" || c.SASLMechanism != "") {
		return errors.New("the --kafka-tls and --kafka-sasl flags need --kafka-brokers")
	}
	return nil
}

// Opts returns the client options that reach c's brokers, to which the
// caller adds its own (a producer's acks, a consumer's group). Errors: an
// invalid c (Validate), a CA file that cannot be read or holds no
// certificate.
func (c Config) Opts() ([]kgo.Opt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.DialTimeout(5 * time.Second)}
	if c.TLS || c.TLSCAFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.TLSCAFile != "" {
			pem, err := os.ReadFile(c.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("--kafka-tls-ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--kafka-tls-ca: no PEM certificate in %s", c.TLSCAFile)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if m := c.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// mechanism returns c's SASL mechanism, nil without one.
func (c Config) mechanism() sasl.Mechanism {
	switch c.SASLMechanism {
	case SASLPlain:
		return plain.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsMechanism()
	case SASLSCRAMSHA256:
		return scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha256Mechanism()
	case SASLSCRAMSHA512:
		return scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha512Mechanism()
	}
	return nil
}

// NewClient returns a client of c's brokers with c's options and extra,
// after a ping that tells, within ctx, whether a broker answers. Errors:
// those of Opts, a client refused, no broker answering.
func (c Config) NewClient(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.Opts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka brokers %s: %w", strings.Join(c.Brokers, ","), err)
	}
	return cl, nil
}
