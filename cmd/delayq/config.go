package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/backends/redisstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/keyring"
	"github.com/delayq/delayq/natsserver"
	"github.com/delayq/delayq/transports/httptransport"
	"github.com/delayq/delayq/transports/wstransport"
)

// Backends that `delayq serve --backend` accepts.
const (
	// backendLocal keeps jobs in a Pebble database under --data: the default.
	backendLocal = "local"
	// backendJetStream keeps jobs in NATS JetStream in process, files under
	// --data: the default before the local store. "embedded", its name
	// then, still selects it.
	backendJetStream = "jetstream"
	backendNATS      = "nats"
	backendMemory    = "memory"
	backendRedis     = "redis"
)

// redisJobsAuto is the --redis-jobs value that keeps a Redis prefix's form
// of jobs, packed for a new one.
const redisJobsAuto = "auto"

// isNATSBackend tells whether backend keeps jobs in NATS, whose server then
// also carries the NATS transports. Every other backend gets them from
// startNATS.
func isNATSBackend(backend string) bool { return backend == backendJetStream || backend == backendNATS }

// NATS settings of serve.
const (
	// natsOff is the --nats-listen value that turns NATS intake and
	// delivery off.
	natsOff = "off"
	// natsURLDefault is the NATS of --backend nats when --nats-url names
	// none.
	natsURLDefault = "nats://127.0.0.1:4222"
	// natsDir is the directory under --data where the in-process NATS
	// server of a backend that is not NATS keeps its JetStream files,
	// apart from any store's.
	natsDir = "nats"
)

// serveConfig is the configuration of `delayq serve`, as flags and their
// environment twins set it.
type serveConfig struct {
	// HTTPAddr is the HTTP API's listen address; port 0 picks a free one.
	HTTPAddr string
	// DataDir holds the local store (in localDir) or the jetstream
	// backend's files, the in-process NATS server's JetStream files of
	// another backend (in natsDir), the NATS client password file and
	// formatFile.
	DataDir string
	// Backend is local, jetstream, nats, redis or memory.
	Backend string
	// NATSListen is the in-process NATS server's client address (the
	// jetstream backend's, or the one startNATS runs for another backend);
	// port 0 or -1 picks a free one; natsOff turns NATS intake and delivery
	// off.
	NATSListen string
	// NATSURL is the external NATS server: the store of --backend nats
	// (natsURLDefault when empty), or the NATS of intake and delivery of a
	// backend that is not NATS, instead of an in-process server.
	NATSURL string
	// RedisURL is the Redis server, Sentinel or Cluster of --backend redis.
	RedisURL string
	// RedisWaitReplicas, when positive, is how many Redis replicas must
	// confirm a write (WAIT) before it is answered (--redis-wait-replicas).
	RedisWaitReplicas int
	// RedisWaitTimeout bounds that wait (--redis-wait-timeout).
	RedisWaitTimeout time.Duration
	// RedisJobs is the form of the jobs the Redis store creates
	// (--redis-jobs): auto (the prefix's), packed or hash
	// (redisstore.Config.JobForm).
	RedisJobs string
	// BackendWait is how long a start waits for an external backend
	// (Redis, a NATS of --backend nats) that does not answer yet; 0: not
	// at all.
	BackendWait time.Duration
	// NATSReplicas is how many NATS servers of a cluster keep each stream
	// (--backend nats); 3 survives the loss of one.
	NATSReplicas int
	// NATSUpgrade moves the jobs of the NATS store's first stream layout
	// into the current one at start (--nats-upgrade).
	NATSUpgrade bool
	// Sync is how often files under DataDir are synced: "always" or an
	// interval between fsyncs (--sync).
	Sync string
	// NATSClientUser is the in-process NATS server's user for producers
	// and consumers.
	NATSClientUser string
	// NATSClientPassword is that user's password; empty keeps a generated
	// one in the data directory.
	NATSClientPassword string
	// NATSDeliverySubjects are the subject patterns that tokens restricted
	// to some topics may deliver on besides delayq.deliver.<their topics>.
	NATSDeliverySubjects []string
	// MaxBody bounds a job body in bytes.
	MaxBody int
	// MaxBatch bounds the jobs of one batch request.
	MaxBatch int
	// Retention is how long finished jobs stay queryable.
	Retention time.Duration
	// RetentionMaxJobs, when positive, bounds the finished jobs the local
	// backend keeps: the oldest go first once there are more, within
	// Retention too. Other backends refuse it (checkRetention).
	RetentionMaxJobs int64
	// DiskReserve is the ballast the local and jetstream backends keep
	// under --data and release when the disk fills (local) or its free
	// space falls under half of it (jetstream); 0: none.
	DiskReserve int
	// LogLevel is the least level logged.
	LogLevel slog.Level
	// LogFormat is text or json.
	LogFormat string
	// ShutdownTimeout bounds a graceful shutdown.
	ShutdownTimeout time.Duration
	// DrainTimeout bounds the drain that starts a shutdown (within
	// ShutdownTimeout): claims refused, deliveries in flight finished,
	// the API serving the rest. 0: no drain.
	DrainTimeout time.Duration
	// PprofAddr, when set, is where net/http/pprof listens, apart from the
	// API so that profiles are never exposed on it by accident.
	PprofAddr string
	// EncryptionKeys, when set, is the key file whose ring seals job
	// bodies, topic configurations and schedules at rest
	// (--encryption-keys); its first key is current.
	EncryptionKeys string
	// Breaker configures the store's and the endpoints' circuit breakers.
	Breaker breakerFlags
	// Access configures API tokens, TLS and webhook destinations.
	Access accessFlags
	// HTTP bounds the HTTP listener and guards it against browsers.
	HTTP httpFlags
	// Roles are the parts of the service this instance runs (--roles).
	Roles roles
	// InstanceName names this instance in the attempts it hands out
	// (--instance-name); empty: the host name (instanceName).
	InstanceName string
	// Kafka reaches the Kafka cluster of Kafka delivery and intake.
	Kafka kafkaFlags
	// ConfigFile is the YAML configuration file of --config, if any.
	ConfigFile string
	// Topics are the configuration file's topics, applied at start.
	Topics []*core.Topic
	// Ring is the key ring read from EncryptionKeys; nil without.
	Ring *keyring.Ring
}

// loadKeyRing reads --encryption-keys, when given. Errors are usage
// errors naming the flag.
func (c *serveConfig) loadKeyRing() error {
	if c.EncryptionKeys == "" {
		return nil
	}
	r, err := keyring.Load(c.EncryptionKeys)
	if err != nil {
		return usageErrorf("--encryption-keys: %w", err)
	}
	c.Ring = r
	return nil
}

// defaultServeConfig returns the defaults of every serve flag.
func defaultServeConfig() serveConfig {
	return serveConfig{
		HTTPAddr:         "127.0.0.1:8080",
		DataDir:          "./delayq-data",
		Backend:          backendLocal,
		NATSListen:       natsserver.ListenDefault,
		RedisURL:         "redis://127.0.0.1:6379",
		RedisWaitTimeout: redisstore.WaitTimeoutDefault,
		RedisJobs:        redisJobsAuto,
		BackendWait:      time.Minute,
		NATSReplicas:     1,
		Sync:             natsserver.SyncDefault,
		NATSClientUser:   natsserver.ClientUserDefault,
		MaxBody:          1 << 20,
		MaxBatch:         1000,
		DiskReserve:      pebblestore.DiskReserveDefault,
		Retention:        72 * time.Hour,
		LogLevel:         slog.LevelInfo,
		LogFormat:        "text",
		ShutdownTimeout:  30 * time.Second,
		DrainTimeout:     10 * time.Second,
		Breaker:          defaultBreakerFlags(),
		HTTP:             defaultHTTPFlags(),
		Roles:            slices.Clone(allRoles),
		Kafka:            defaultKafkaFlags(),
	}
}

// addFlags defines the serve flags on fs, bound to c, with c's values as
// defaults, and gives each an environment twin.
func (c *serveConfig) addFlags(fs *pflag.FlagSet) {
	fs.Var(&addrValue{p: &c.HTTPAddr}, "http", "HTTP API listen address, host:port; port 0 picks a free port")
	fs.StringVar(&c.DataDir, "data", c.DataDir, "data directory: the local or jetstream backend's files; with the others, the in-process NATS server's client password file and (local, redis) its JetStream files in <data>/"+natsDir)
	fs.Var(&backendValue{p: &c.Backend}, "backend", "where jobs are kept: local (a database under --data), jetstream (NATS JetStream in process, files under --data), nats (an external NATS server), redis or memory (lost on exit)")
	fs.Var(&natsListenValue{p: &c.NATSListen}, "nats-listen", "client listen address of delayq's in-process NATS server (the jetstream backend's store; with local, redis or memory, one for NATS intake and delivery), host:port; port 0 or -1 picks a free port; off: no NATS intake or delivery")
	fs.Var(&urlValue{p: &c.NATSURL}, "nats-url", "NATS server URL(s), comma-separated: the store of --backend nats (default "+natsURLDefault+"); with local, redis or memory, the NATS of intake and delivery instead of an in-process server (instances sharing a Redis must share one NATS)")
	fs.Var(&redisURLValue{p: &c.RedisURL}, "redis-url", "Redis URL for --backend redis: redis://[:password@]host:port[/db], rediss:// for TLS, redis+cluster://h1:p1,h2:p2 for a Cluster, redis+sentinel://s1:p1,s2:p2/master")
	fs.Var(&waitReplicasValue{p: &c.RedisWaitReplicas}, "redis-wait-replicas", "with --backend redis: how many replicas must confirm each put, ack, retry, cancel... (Redis WAIT) before it is answered, so that a failover cannot lose it; fewer within --redis-wait-timeout: 503 unavailable, the write done on the master but not durable. 0: no wait (replication is asynchronous). Standalone or Sentinel URLs only")
	fs.Var(&positiveDurationValue{p: &c.RedisWaitTimeout}, "redis-wait-timeout", "how long a write waits for --redis-wait-replicas replicas before it is answered 503")
	fs.Var(&enumValue{p: &c.RedisJobs, allowed: []string{redisJobsAuto, redisstore.JobFormPacked, redisstore.JobFormHash}}, "redis-jobs",
		"with --backend redis: the form of the jobs it stores. auto: packed for a new prefix (one string per job), a prefix's own otherwise; packed: also switch a prefix of hashes to packed jobs, which earlier releases cannot read (once every instance runs this release or a later one); hash: a new prefix of hashes, which earlier releases read")
	fs.Var(&durationValue{p: &c.BackendWait}, "backend-wait", "how long a start waits for --backend redis or nats, or for the --kafka-brokers, when they do not answer yet (a Redis loading its data, a NATS cluster electing its stream's leader), trying again with a warning each time, before it exits; 0: exit at once")
	fs.Var(&replicasValue{p: &c.NATSReplicas}, "nats-replicas", "how many servers of the NATS cluster keep delayq's streams (1-5), for --backend nats; 3 survives the loss of one")
	fs.BoolVar(&c.NATSUpgrade, "nats-upgrade", c.NATSUpgrade, "with --backend nats or jetstream: move the jobs of the first NATS stream layout (stream DELAYQ_JOBS, before this release) into the current one, then delete that stream; stop every instance of the earlier version first")
	fs.Var(&syncValue{p: &c.Sync}, "sync", `how often delayq fsyncs its files under --data: "always" (every write, before answering) or an interval such as 1s; the local backend syncs creates and cancels before answering either way, and this bounds what a power cut can lose of acks and claims (a redelivery); the jetstream backend and the in-process NATS server sync everything by it`)
	fs.Var(&subjectValue{p: &c.NATSClientUser}, "nats-client-user", "user name of producers and consumers on delayq's in-process NATS server")
	fs.Var(&passwordValue{p: &c.NATSClientPassword}, "nats-client-password", "password of --nats-client-user, at least 16 characters; empty: generated at first start and kept in <data>/"+natsserver.ClientPasswordFile)
	fs.Var(&subjectPatternsValue{p: &c.NATSDeliverySubjects}, "nats-delivery-subjects", "NATS subject patterns, comma-separated (billing.>, audit.*.log), that tokens restricted to topics may name as delivery.subject; they may always name delayq.deliver.<topic> of their topics")
	fs.Var(&byteSizeValue{p: &c.MaxBody}, "max-body", "largest job body, in bytes or with a KiB/MiB suffix")
	fs.Var(&positiveIntValue{p: &c.MaxBatch}, "max-batch", "most jobs, acks or nacks in one batch request")
	fs.Var(&positiveDurationValue{p: &c.Retention}, "retention", "how long finished jobs (done, cancelled) stay queryable")
	fs.Var(&countValue{p: &c.RetentionMaxJobs}, "retention-max-jobs", "most finished jobs (done, cancelled, all topics) the local backend keeps: past it the oldest are deleted first, before their --retention ends; 0: no bound. Other backends refuse it")
	fs.Var(&byteSizeValue{p: &c.DiskReserve, zero: true}, "disk-reserve", "with --backend local or jetstream: the space kept free under --data (a ballast file, at most a tenth of the disk) and released when the disk fills (jetstream: when less than half of it is free), so that claims and acks go on while new jobs are refused (503) until space is freed; in bytes or with a KiB/MiB suffix; 0: none")
	fs.Var(&levelValue{p: &c.LogLevel}, "log-level", "least level logged: debug, info, warn or error")
	fs.Var(&enumValue{p: &c.LogFormat, allowed: []string{"text", "json"}}, "log-format", "log format: text or json")
	fs.Var(&positiveDurationValue{p: &c.ShutdownTimeout}, "shutdown-timeout", "how long a shutdown waits for in-flight requests and deliveries")
	fs.Var(&durationValue{p: &c.DrainTimeout}, "drain-timeout", "how long a shutdown first drains, within --shutdown-timeout: claims refused and /readyz 503 while the API serves everything else and deliveries in flight finish; 0: no drain")
	fs.Var(&rolesValue{p: &c.Roles}, "roles", "what this instance runs, comma-separated: api (the HTTP, gRPC, WebSocket and NATS APIs: intake, reads, pull claims, subscribers), deliver (webhook and NATS deliveries, dead-letter notices, the expiry sweep), schedules (recurring schedules); an instance without api serves only /healthz, /readyz and /metrics. A partial set needs --backend redis or nats, where other instances run the rest")
	fs.Var(&instanceNameValue{p: &c.InstanceName}, "instance-name", "name of this instance in the trail of each job it hands out (GET /v1/jobs/{id}: which instance delivered it), at most 64 bytes; empty: the host name, which stays across restarts")
	fs.Var(&addrValue{p: &c.PprofAddr}, "pprof", "listen address of Go's profiling endpoints (/debug/pprof/), host:port; port 0 picks a free port; off when empty")
	fs.StringVar(&c.EncryptionKeys, "encryption-keys", c.EncryptionKeys, "key file that turns on encryption at rest: job bodies, webhook secrets and delivery headers are stored AES-256-GCM encrypted; a line per key, its id and 32 bytes in base64, the current key first (older ones still decrypt); readable by its owner only (docs/security.md)")
	c.Breaker.addFlags(fs)
	c.Access.addFlags(fs)
	c.HTTP.addFlags(fs)
	c.Kafka.addFlags(fs)
	fs.StringVar(&c.ConfigFile, configFlag, c.ConfigFile, "YAML configuration file: serve's flag names as keys, and topics; a flag or environment variable beats it")
	fs.VisitAll(func(f *pflag.Flag) { withEnv(fs, f.Name) })
}

// addrValue is a host:port flag. With random, port -1 is allowed too.
type addrValue struct {
	p      *string
	random bool
}

func (v *addrValue) String() string { return *v.p }
func (v *addrValue) Type() string   { return "addr" }
func (v *addrValue) Set(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	n, err := strconv.Atoi(port)
	lowest := 0
	if v.random {
		lowest = -1
	}
	if err != nil || n < lowest || n > 65535 {
		return fmt.Errorf("port %q must be a number from %d to 65535", port, lowest)
	}
	*v.p = s
	return nil
}

// natsListenValue is the --nats-listen flag: host:port, port 0 or -1
// picking a free one, or natsOff.
type natsListenValue struct{ p *string }

func (v *natsListenValue) String() string { return *v.p }
func (v *natsListenValue) Type() string   { return "addr|off" }
func (v *natsListenValue) Set(s string) error {
	if s == natsOff {
		*v.p = s
		return nil
	}
	if err := (&addrValue{p: v.p, random: true}).Set(s); err != nil {
		return fmt.Errorf("want host:port or %s: %w", natsOff, err)
	}
	return nil
}

// checkNATS refuses --nats-listen off with --nats-url on a backend that is
// not NATS: the one turns NATS intake and delivery off, the other names
// the NATS to carry them.
func (c *serveConfig) checkNATS() error {
	if c.NATSListen == natsOff && c.NATSURL != "" && !isNATSBackend(c.Backend) {
		return fmt.Errorf("--nats-listen %s turns NATS intake and delivery off, --nats-url names a NATS for them: give one of the two", natsOff)
	}
	return nil
}

// checkRetention refuses --retention-max-jobs with a backend other than
// local: only the local store bounds its finished jobs by count, and a
// bound silently ignored would let another backend's storage grow past
// what its operator planned for.
func (c *serveConfig) checkRetention() error {
	if c.RetentionMaxJobs > 0 && c.Backend != backendLocal {
		return fmt.Errorf("--retention-max-jobs bounds the finished jobs of --backend %s only; --backend %s keeps them for --retention alone: unset it (DELAYQ_RETENTION_MAX_JOBS, retention-max-jobs in the configuration file) or set it to 0", backendLocal, c.Backend)
	}
	return nil
}

// checkRedisWait refuses --redis-wait-replicas with a backend other than
// redis, or with a Redis Cluster URL: a durability asked for and silently
// not given would let a failover lose what the operator meant to keep.
func (c *serveConfig) checkRedisWait() error {
	if c.RedisWaitReplicas == 0 {
		return nil
	}
	if c.Backend != backendRedis {
		return fmt.Errorf("--redis-wait-replicas applies to --backend %s only, not %s: unset it (DELAYQ_REDIS_WAIT_REPLICAS, redis-wait-replicas in the configuration file) or set it to 0", backendRedis, c.Backend)
	}
	client, err := redisstore.ParseURL(c.RedisURL)
	if err != nil {
		return fmt.Errorf("--redis-url: %w", err)
	}
	defer client.Close()
	if _, plain := client.(*redis.Client); !plain {
		return errors.New("--redis-wait-replicas needs a standalone (redis://) or Sentinel (redis+sentinel://) --redis-url: waiting for the replicas of a Redis Cluster is not supported")
	}
	return nil
}

// waitReplicasValue is the --redis-wait-replicas flag: 0 or more.
type waitReplicasValue struct{ p *int }

func (v *waitReplicasValue) String() string { return strconv.Itoa(*v.p) }
func (v *waitReplicasValue) Type() string   { return "count" }
func (v *waitReplicasValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > 16 {
		return errors.New("want a number of replicas from 0 (no wait) to 16")
	}
	*v.p = n
	return nil
}

// backendValue is the --backend flag.
type backendValue struct{ p *string }

func (v *backendValue) String() string { return *v.p }
func (v *backendValue) Type() string   { return "backend" }
func (v *backendValue) Set(s string) error {
	switch s {
	case backendLocal, backendJetStream, backendNATS, backendRedis, backendMemory:
		*v.p = s
		return nil
	case "embedded":
		*v.p = backendJetStream
		return nil
	}
	return errors.New("want local, jetstream, nats, redis or memory")
}

// redisURLValue is the --redis-url flag, checked by parsing it as the store
// will.
type redisURLValue struct{ p *string }

func (v *redisURLValue) String() string { return *v.p }
func (v *redisURLValue) Type() string   { return "url" }
func (v *redisURLValue) Set(s string) error {
	client, err := redisstore.ParseURL(s)
	if err != nil {
		return err
	}
	_ = client.Close() // parsed only; serve makes its own
	*v.p = s
	return nil
}

// enumValue is a string flag with a fixed set of values.
type enumValue struct {
	p       *string
	allowed []string
}

func (v *enumValue) String() string { return *v.p }
func (v *enumValue) Type() string   { return strings.Join(v.allowed, "|") }
func (v *enumValue) Set(s string) error {
	for _, a := range v.allowed {
		if s == a {
			*v.p = s
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(v.allowed, ", "))
}

// urlValue is a comma-separated list of NATS URLs.
type urlValue struct{ p *string }

func (v *urlValue) String() string { return *v.p }
func (v *urlValue) Type() string   { return "url" }
func (v *urlValue) Set(s string) error {
	for _, u := range strings.Split(s, ",") {
		scheme, rest, ok := strings.Cut(strings.TrimSpace(u), "://")
		if !ok || scheme == "" || rest == "" {
			return fmt.Errorf("%q is not a URL such as nats://host:4222", u)
		}
	}
	*v.p = s
	return nil
}

// syncValue is the --sync flag: "always" or a positive interval.
type syncValue struct{ p *string }

func (v *syncValue) String() string { return *v.p }
func (v *syncValue) Type() string   { return "always|duration" }
func (v *syncValue) Set(s string) error {
	if s != "always" {
		d, err := parseFlagDuration(s)
		if err != nil {
			return fmt.Errorf(`want "always" or an interval: %w`, err)
		}
		if d <= 0 {
			return errors.New(`want "always" or a positive duration such as 1s`)
		}
	}
	*v.p = s
	return nil
}

// subjectValue is a single NATS subject token, such as a user name.
type subjectValue struct{ p *string }

func (v *subjectValue) String() string { return *v.p }
func (v *subjectValue) Type() string   { return "name" }
func (v *subjectValue) Set(s string) error {
	if core.ValidateID(s) != nil {
		return errors.New("want letters, digits, - and _")
	}
	*v.p = s
	return nil
}

// instanceNameValue is the --instance-name flag: at most core.NameMaxLen
// bytes of what a job's trail keeps as is (core.CleanName).
type instanceNameValue struct{ p *string }

func (v *instanceNameValue) String() string { return *v.p }
func (v *instanceNameValue) Type() string   { return "name" }
func (v *instanceNameValue) Set(s string) error {
	if len(s) > core.NameMaxLen || core.CleanName(s) != s {
		return fmt.Errorf("want at most %d bytes without control characters, ',', '/' or '|'", core.NameMaxLen)
	}
	*v.p = s
	return nil
}

// passwordValue is the --nats-client-password flag: empty, or at least
// natsserver.ClientPasswordMinLen characters without spaces.
type passwordValue struct{ p *string }

func (v *passwordValue) String() string { return *v.p }
func (v *passwordValue) Type() string   { return "password" }
func (v *passwordValue) Set(s string) error {
	if s != "" && (len(s) < natsserver.ClientPasswordMinLen || strings.ContainsFunc(s, unicode.IsSpace)) {
		return fmt.Errorf("want at least %d characters without spaces", natsserver.ClientPasswordMinLen)
	}
	*v.p = s
	return nil
}

// subjectPatternsValue is a list of NATS subject patterns, comma-separated
// on the command line. The first Set replaces the default; later ones add.
type subjectPatternsValue struct {
	p   *[]string
	set bool
}

func (v *subjectPatternsValue) String() string { return strings.Join(*v.p, ",") }
func (v *subjectPatternsValue) Type() string   { return "patterns" }
func (v *subjectPatternsValue) Set(s string) error {
	var list []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			list = append(list, p)
		}
	}
	if !v.set {
		v.set = true
		return v.Replace(list)
	}
	return v.Replace(append(slices.Clone(*v.p), list...))
}

// Append adds one pattern.
func (v *subjectPatternsValue) Append(s string) error {
	return v.Replace(append(slices.Clone(*v.p), s))
}

// Replace checks every pattern and sets the list to them.
func (v *subjectPatternsValue) Replace(list []string) error {
	for _, p := range list {
		if err := auth.ValidatePattern(p); err != nil {
			return err
		}
		if strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("subject pattern %q must not contain spaces or control characters", p)
		}
	}
	*v.p = list
	return nil
}

// GetSlice returns the patterns.
func (v *subjectPatternsValue) GetSlice() []string { return slices.Clone(*v.p) }

// byteSizeValue is a positive size in bytes, with an optional KiB, MiB or
// GiB suffix (KB, MB, GB mean the same powers of two); 0 too when zero is
// set.
type byteSizeValue struct {
	p    *int
	zero bool
}

func (v *byteSizeValue) String() string { return formatBytes(*v.p) }
func (v *byteSizeValue) Type() string   { return "bytes" }
func (v *byteSizeValue) Set(s string) error {
	num, mult := strings.TrimSpace(s), 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || (n == 0 && !v.zero) || n > (1<<31)/mult {
		if v.zero {
			return errors.New("want a size such as 67108864 or 64MiB, at most 2GiB, or 0 for none")
		}
		return errors.New("want a positive size such as 1048576 or 1MiB, at most 2GiB")
	}
	*v.p = n * mult
	return nil
}

// formatBytes writes n with the largest exact binary suffix.
func formatBytes(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + "GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n)
}

// positiveIntValue is an int flag that must be at least 1.
type positiveIntValue struct{ p *int }

func (v *positiveIntValue) String() string { return strconv.Itoa(*v.p) }
func (v *positiveIntValue) Type() string   { return "int" }
func (v *positiveIntValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return errors.New("want a whole number of at least 1")
	}
	*v.p = n
	return nil
}

// countValue is a number of things, 0 or more; 0 means no bound.
type countValue struct{ p *int64 }

func (v *countValue) String() string { return strconv.FormatInt(*v.p, 10) }
func (v *countValue) Type() string   { return "count" }
func (v *countValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return errors.New("want a whole number of at least 0 (0: no bound)")
	}
	*v.p = n
	return nil
}

// replicasValue is the --nats-replicas flag: 1 to 5, as JetStream allows.
type replicasValue struct{ p *int }

func (v *replicasValue) String() string { return strconv.Itoa(*v.p) }
func (v *replicasValue) Type() string   { return "int" }
func (v *replicasValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 5 {
		return errors.New("want a whole number from 1 to 5")
	}
	*v.p = n
	return nil
}

// levelValue is a log level flag.
type levelValue struct{ p *slog.Level }

func (v *levelValue) String() string { return strings.ToLower(v.p.String()) }
func (v *levelValue) Type() string   { return "level" }
func (v *levelValue) Set(s string) error {
	switch s {
	case "debug", "info", "warn", "error":
		return v.p.UnmarshalText([]byte(s))
	}
	return errors.New("want debug, info, warn or error")
}

// httpFlags are the serve flags that bound the HTTP listener and guard it
// against browsers.
type httpFlags struct {
	// MaxConnections bounds the listener's open connections, WebSocket
	// subscribers and idle keep-alive connections included.
	MaxConnections int
	// MaxSubscribers bounds the WebSocket subscribers served at once, and
	// the gRPC Subscribe streams, each on its own.
	MaxSubscribers int
	// BodyReadTimeout bounds the read of a request body.
	BodyReadTimeout time.Duration
	// AllowedHosts are the Host header patterns served.
	AllowedHosts []string
	// TrustedOrigins are browser origins allowed to send cross-origin
	// requests, WebSocket subscribe included.
	TrustedOrigins []string
	// UI is when the web UI is served at /ui/: auto, on or off.
	UI string
}

// defaultHTTPFlags returns the defaults of the HTTP flags.
func defaultHTTPFlags() httpFlags {
	return httpFlags{
		MaxConnections:  4096,
		MaxSubscribers:  wstransport.MaxSubscribersDefault,
		BodyReadTimeout: httptransport.BodyReadTimeoutDefault,
		UI:              uiAuto,
	}
}

// addFlags defines the HTTP flags on fs, bound to f.
func (f *httpFlags) addFlags(fs *pflag.FlagSet) {
	fs.Var(&positiveIntValue{p: &f.MaxConnections}, "max-connections", "most connections the HTTP listener holds open at once (WebSocket and idle keep-alive ones included); more wait to be accepted")
	fs.Var(&positiveIntValue{p: &f.MaxSubscribers}, "max-subscribers", "most WebSocket subscribers served at once, and most gRPC Subscribe streams; more are answered 503 with Retry-After (gRPC: Unavailable)")
	fs.Var(&positiveDurationValue{p: &f.BodyReadTimeout}, "body-read-timeout", "how long a request body may take to arrive (for an import, each read of it); then 400 and the connection is closed")
	fs.StringSliceVar(&f.AllowedHosts, "allowed-hosts", f.AllowedHosts, "Host header names the HTTP API serves, comma-separated (queue.example.com, *.example.com, an address, *); when empty, a request on a loopback address must name localhost or a loopback address")
	fs.Var(&enumValue{p: &f.UI, allowed: []string{uiAuto, uiOn, uiOff}}, "ui", "serve the web admin UI at /ui/: auto (when API tokens are configured, or, without tokens, on a loopback listener only), on or off")
	fs.StringSliceVar(&f.TrustedOrigins, "trusted-origins", f.TrustedOrigins, "browser origins (https://app.example.com) allowed to send cross-origin requests that change state and to subscribe by WebSocket, comma-separated")
}

// check validates the host patterns and origins, naming the flag.
func (f *httpFlags) check() error {
	if err := (httptransport.Config{AllowedHosts: f.AllowedHosts}).Validate(); err != nil {
		return fmt.Errorf("--allowed-hosts: %w", err)
	}
	if err := (httptransport.Config{TrustedOrigins: f.TrustedOrigins}).Validate(); err != nil {
		return fmt.Errorf("--trusted-origins: %w", err)
	}
	return nil
}
