package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/pebblestore"
	"github.com/delayq/delayq/transports/kafkaclient"
)

// runResult is what one in-process run of the binary's commands produced.
type runResult struct {
	code           int
	stdout, stderr string
	// cfg is the configuration serve would have run with, nil when it
	// did not get that far.
	cfg *serveConfig
}

// runApp runs the command line in process with env as the whole
// environment; serve records its configuration instead of running.
func runApp(t *testing.T, env map[string]string, stdin string, args ...string) runResult {
	t.Helper()
	var res runResult
	var stdout, stderr bytes.Buffer
	a := &app{
		stdin:  strings.NewReader(stdin),
		stdout: &stdout,
		stderr: &stderr,
		lookupEnv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		},
		serve: func(_ context.Context, _ *app, cfg *serveConfig) error {
			c := *cfg
			res.cfg = &c
			return nil
		},
	}
	res.code = a.run(t.Context(), args)
	res.stdout, res.stderr = stdout.String(), stderr.String()
	return res
}

func TestServeDefaults(t *testing.T) {
	t.Parallel()
	res := runApp(t, nil, "", "serve")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.NotNil(t, res.cfg)
	require.Equal(t, defaultServeConfig(), *res.cfg)
	require.Equal(t, "127.0.0.1:8080", res.cfg.HTTPAddr)
	require.Equal(t, "./delayq-data", res.cfg.DataDir)
	require.Equal(t, backendLocal, res.cfg.Backend)
	require.Equal(t, "127.0.0.1:4222", res.cfg.NATSListen)
	require.Equal(t, 30*time.Second, res.cfg.ShutdownTimeout)
}

func TestServeFlags(t *testing.T) {
	t.Parallel()
	res := runApp(t, nil, "", "serve",
		"--http", "0.0.0.0:0", "--data", "/tmp/x", "--backend", "memory",
		"--nats-listen", "127.0.0.1:-1", "--nats-url", "nats://a:4222,nats://b:4222", "--redis-url", "redis+cluster://r1:7000,r2:7000", "--nats-replicas", "3",
		"--redis-wait-timeout", "250ms", "--backend-wait", "0", "--roles", "schedules, api,deliver", "--sync", "always", "--max-body", "64KiB", "--max-batch", "50",
		"--retention", "1h", "--log-level", "debug", "--log-format", "json",
		"--shutdown-timeout", "5s", "--max-connections", "10", "--max-subscribers", "3", "--body-read-timeout", "2s",
		"--allowed-hosts", "queue.example.com,*.internal,10.0.0.1", "--trusted-origins", "https://app.example.com",
		"--kafka-brokers", "k1:9092,k2:9092", "--kafka-intake-topic", "delayq.push", "--kafka-group", "g1", "--kafka-intake-dead-topic", "delayq.dead")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, serveConfig{
		HTTPAddr:         "0.0.0.0:0",
		DataDir:          "/tmp/x",
		Backend:          backendMemory,
		NATSListen:       "127.0.0.1:-1",
		NATSURL:          "nats://a:4222,nats://b:4222",
		RedisURL:         "redis+cluster://r1:7000,r2:7000",
		RedisWaitTimeout: 250 * time.Millisecond,
		RedisJobs:        "auto",
		Roles:            roles{roleSchedules, roleAPI, roleDeliver},
		NATSReplicas:     3,
		Sync:             "always",
		NATSClientUser:   "delayq-client",
		MaxBody:          64 << 10,
		MaxBatch:         50,
		Retention:        time.Hour,
		DiskReserve:      pebblestore.DiskReserveDefault,
		LogLevel:         slog.LevelDebug,
		LogFormat:        "json",
		ShutdownTimeout:  5 * time.Second,
		DrainTimeout:     10 * time.Second,
		Breaker:          defaultBreakerFlags(),
		HTTP: httpFlags{
			MaxConnections:  10,
			MaxSubscribers:  3,
			BodyReadTimeout: 2 * time.Second,
			AllowedHosts:    []string{"queue.example.com", "*.internal", "10.0.0.1"},
			TrustedOrigins:  []string{"https://app.example.com"},
			UI:              uiAuto,
		},
		Kafka: kafkaFlags{
			Config:           kafkaclient.Config{Brokers: []string{"k1:9092", "k2:9092"}},
			kafkaIntakeFlags: kafkaIntakeFlags{IntakeTopic: "delayq.push", Group: "g1", IntakeDeadTopic: "delayq.dead"},
		},
	}, *res.cfg)
}

func TestServeEnvTwins(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DELAYQ_HTTP":               "127.0.0.1:9000",
		"DELAYQ_DATA":               "/var/lib/delayq",
		"DELAYQ_BACKEND":            "nats",
		"DELAYQ_NATS_LISTEN":        "127.0.0.1:0",
		"DELAYQ_NATS_URL":           "nats://nats:4222",
		"DELAYQ_REDIS_URL":          "redis://:pw@redis:6380/2",
		"DELAYQ_NATS_REPLICAS":      "5",
		"DELAYQ_REDIS_WAIT_TIMEOUT": "2s",
		"DELAYQ_BACKEND_WAIT":       "3m",
		"DELAYQ_ROLES":              "schedules",
		"DELAYQ_NATS_SYNC":          "1s",
		"DELAYQ_MAX_BODY":           "2048",
		"DELAYQ_MAX_BATCH":          "10",
		"DELAYQ_RETENTION":          "24h",
		"DELAYQ_LOG_LEVEL":          "warn",
		"DELAYQ_LOG_FORMAT":         "json",
		"DELAYQ_SHUTDOWN_TIMEOUT":   "1m",
		"DELAYQ_MAX_CONNECTIONS":    "100",
		"DELAYQ_ALLOWED_HOSTS":      "a.example,b.example",
		"DELAYQ_KAFKA_BROKERS":      "k:9092",
		"DELAYQ_KAFKA_INTAKE_TOPIC": "delayq.push",
	}
	res := runApp(t, env, "", "serve")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, serveConfig{
		HTTPAddr:         "127.0.0.1:9000",
		DataDir:          "/var/lib/delayq",
		Backend:          backendNATS,
		NATSListen:       "127.0.0.1:0",
		NATSURL:          "nats://nats:4222",
		RedisURL:         "redis://:pw@redis:6380/2",
		RedisWaitTimeout: 2 * time.Second,
		RedisJobs:        "auto",
		BackendWait:      3 * time.Minute,
		Roles:            roles{roleSchedules},
		NATSReplicas:     5,
		Sync:             "1s",
		NATSClientUser:   "delayq-client",
		MaxBody:          2048,
		MaxBatch:         10,
		Retention:        24 * time.Hour,
		DiskReserve:      pebblestore.DiskReserveDefault,
		LogLevel:         slog.LevelWarn,
		LogFormat:        "json",
		ShutdownTimeout:  time.Minute,
		DrainTimeout:     10 * time.Second,
		Breaker:          defaultBreakerFlags(),
		HTTP: httpFlags{
			MaxConnections:  100,
			MaxSubscribers:  1024,
			BodyReadTimeout: 30 * time.Second,
			AllowedHosts:    []string{"a.example", "b.example"},
			UI:              uiAuto,
		},
		Kafka: kafkaFlags{
			Config:           kafkaclient.Config{Brokers: []string{"k:9092"}},
			kafkaIntakeFlags: kafkaIntakeFlags{IntakeTopic: "delayq.push", Group: "delayq"},
		},
	}, *res.cfg)
}

func TestServeFlagBeatsEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DELAYQ_HTTP":    "127.0.0.1:9000",
		"DELAYQ_BACKEND": "postgres", // bad, but the flag overrides it
		"DELAYQ_DATA":    "",         // empty counts as unset
	}
	res := runApp(t, env, "", "serve", "--http", "127.0.0.1:9001", "--backend=memory")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, "127.0.0.1:9001", res.cfg.HTTPAddr)
	require.Equal(t, backendMemory, res.cfg.Backend)
	require.Equal(t, "./delayq-data", res.cfg.DataDir)
}

func TestServeBadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"redis url", nil, []string{"--backend", "redis", "--redis-url", "http://x"}, "--redis-url"},
		{"redis url env", map[string]string{"DELAYQ_REDIS_URL": "redis://h:port"}, nil, "DELAYQ_REDIS_URL"},
		{"unknown backend env", map[string]string{"DELAYQ_BACKEND": "postgres"}, nil, "DELAYQ_BACKEND"},
		{"nats replicas", nil, []string{"--nats-replicas", "7"}, "from 1 to 5"},
		{"nats replicas env", map[string]string{"DELAYQ_NATS_REPLICAS": "0"}, nil, "DELAYQ_NATS_REPLICAS"},
		{"unknown backend", nil, []string{"--backend", "postgres"}, "want local, jetstream, nats, redis or memory"},
		{"http without port", nil, []string{"--http", "localhost"}, `"--http"`},
		{"http port range", nil, []string{"--http", "127.0.0.1:70000"}, "port"},
		{"http port -1", nil, []string{"--http", "127.0.0.1:-1"}, "port"},
		{"http env", map[string]string{"DELAYQ_HTTP": "nope"}, nil, `invalid value "nope" for DELAYQ_HTTP`},
		{"nats listen", nil, []string{"--nats-listen", "127.0.0.1:x"}, "port"},
		{"nats url", nil, []string{"--nats-url", "localhost"}, "not a URL"},
		{"sync", nil, []string{"--sync", "sometimes"}, "always"},
		{"sync zero", map[string]string{"DELAYQ_SYNC": "0s"}, nil, "DELAYQ_SYNC"},
		{"max body", nil, []string{"--max-body", "-1"}, "positive size"},
		{"max body unit", map[string]string{"DELAYQ_MAX_BODY": "1PB"}, nil, "DELAYQ_MAX_BODY"},
		{"max batch", nil, []string{"--max-batch", "0"}, "at least 1"},
		{"retention", nil, []string{"--retention", "forever"}, "duration"},
		{"retention max jobs", nil, []string{"--retention-max-jobs", "-1"}, "at least 0"},
		{"retention max jobs env", map[string]string{"DELAYQ_RETENTION_MAX_JOBS": "1e6"}, nil, "DELAYQ_RETENTION_MAX_JOBS"},
		{"retention max jobs redis", nil, []string{"--backend", "redis", "--retention-max-jobs", "1000"}, "--retention-max-jobs bounds the finished jobs of --backend local only; --backend redis"},
		{"retention max jobs memory env", map[string]string{"DELAYQ_BACKEND": "memory", "DELAYQ_RETENTION_MAX_JOBS": "5"}, nil, "--backend memory keeps them for --retention alone"},
		{"disk reserve", nil, []string{"--disk-reserve", "-1"}, "or 0 for none"},
		{"disk reserve env", map[string]string{"DELAYQ_DISK_RESERVE": "lots"}, nil, "DELAYQ_DISK_RESERVE"},
		{"redis wait replicas", nil, []string{"--backend", "redis", "--redis-wait-replicas", "-1"}, "from 0 (no wait) to 16"},
		{"redis wait replicas env", map[string]string{"DELAYQ_REDIS_WAIT_REPLICAS": "x"}, nil, "DELAYQ_REDIS_WAIT_REPLICAS"},
		{"redis wait replicas backend", nil, []string{"--backend", "memory", "--redis-wait-replicas", "1"}, "--redis-wait-replicas applies to --backend redis only, not memory"},
		{"redis wait replicas cluster", nil, []string{"--backend", "redis", "--redis-url", "redis+cluster://r1:7000", "--redis-wait-replicas", "1"}, "waiting for the replicas of a Redis Cluster is not supported"},
		{"redis wait timeout", nil, []string{"--redis-wait-timeout", "0s"}, "positive duration"},
		{"kafka brokers", nil, []string{"--kafka-brokers", "kafka"}, "--kafka-brokers"},
		{"kafka sasl", nil, []string{"--kafka-brokers", "k:9092", "--kafka-sasl-mechanism", "SCRAM-SHA-256"}, "--kafka-sasl-user"},
		{"kafka intake without brokers", nil, []string{"--kafka-intake-topic", "delayq.push"}, "--kafka-intake-topic needs --kafka-brokers"},
		{"kafka intake dead topic alone", nil, []string{"--kafka-brokers", "k:9092", "--kafka-intake-dead-topic", "dead"}, "--kafka-intake-dead-topic needs --kafka-intake-topic"},
		{"log level", nil, []string{"--log-level", "verbose"}, "debug, info, warn or error"},
		{"log format", map[string]string{"DELAYQ_LOG_FORMAT": "xml"}, nil, "DELAYQ_LOG_FORMAT"},
		{"shutdown timeout", nil, []string{"--shutdown-timeout", "0s"}, "positive duration"},
		{"max connections", nil, []string{"--max-connections", "0"}, "at least 1"},
		{"max subscribers", map[string]string{"DELAYQ_MAX_SUBSCRIBERS": "-1"}, nil, "DELAYQ_MAX_SUBSCRIBERS"},
		{"body read timeout", nil, []string{"--body-read-timeout", "0s"}, "positive duration"},
		{"allowed hosts port", nil, []string{"--allowed-hosts", "localhost:8080"}, "--allowed-hosts"},
		{"trusted origins", nil, []string{"--trusted-origins", "app.example.com"}, "--trusted-origins"},
		{"unknown flag", nil, []string{"--port", "80"}, "unknown flag"},
		{"argument", nil, []string{"extra"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runApp(t, tt.env, "", append([]string{"serve"}, tt.args...)...)
			require.Equal(t, exitUsage, res.code, res.stderr)
			require.Nil(t, res.cfg, "serve must not run")
			require.Contains(t, res.stderr, tt.want)
			require.True(t, strings.HasPrefix(res.stderr, "delayq: "), res.stderr)
			require.Contains(t, res.stderr, "--help")
		})
	}
}

// TestServeRedisWait: --redis-wait-replicas and --redis-wait-timeout come
// from flags, environment and configuration file, for a standalone or
// Sentinel URL.
func TestServeRedisWait(t *testing.T) {
	t.Parallel()
	res := runApp(t, map[string]string{"DELAYQ_REDIS_WAIT_REPLICAS": "1"}, "", "serve", "--backend", "redis",
		"--redis-url", "redis+sentinel://s1:26379,s2:26379/mymaster", "--redis-wait-timeout", "300ms")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 1, res.cfg.RedisWaitReplicas)
	require.Equal(t, 300*time.Millisecond, res.cfg.RedisWaitTimeout)
	path := writeConfig(t, "backend: redis\nredis-wait-replicas: 2\nredis-wait-timeout: 2s\n")
	res = runApp(t, nil, "", "serve", "--config", path)
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 2, res.cfg.RedisWaitReplicas)
	require.Equal(t, 2*time.Second, res.cfg.RedisWaitTimeout)
}

// TestServeRetentionMaxJobs: the local backend takes --retention-max-jobs
// from the flag, its environment twin or the configuration file; 0 (the
// default) is no bound and is accepted with every backend.
func TestServeRetentionMaxJobs(t *testing.T) {
	t.Parallel()
	res := runApp(t, nil, "", "serve", "--retention-max-jobs", "10000000")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, int64(10_000_000), res.cfg.RetentionMaxJobs)

	res = runApp(t, map[string]string{"DELAYQ_RETENTION_MAX_JOBS": "250000"}, "", "serve")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, int64(250_000), res.cfg.RetentionMaxJobs)

	path := writeConfig(t, "retention-max-jobs: 42\n")
	res = runApp(t, nil, "", "serve", "--config", path)
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, int64(42), res.cfg.RetentionMaxJobs)

	res = runApp(t, nil, "", "serve", "--backend", "memory", "--retention-max-jobs", "0")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Zero(t, res.cfg.RetentionMaxJobs)
}

// TestServeDiskReserve: --disk-reserve is 64MiB by default, and is taken
// from the flag, its environment twin or the configuration file; 0 is
// none.
func TestServeDiskReserve(t *testing.T) {
	t.Parallel()
	res := runApp(t, nil, "", "serve")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 64<<20, res.cfg.DiskReserve)

	res = runApp(t, nil, "", "serve", "--disk-reserve", "0")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Zero(t, res.cfg.DiskReserve)

	res = runApp(t, map[string]string{"DELAYQ_DISK_RESERVE": "8MiB"}, "", "serve")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 8<<20, res.cfg.DiskReserve)

	path := writeConfig(t, "disk-reserve: 1GiB\n")
	res = runApp(t, nil, "", "serve", "--config", path)
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 1<<30, res.cfg.DiskReserve)
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"1": 1, "512B": 512, "64KiB": 64 << 10, "1MiB": 1 << 20, "2 MB": 2 << 20, "1GiB": 1 << 30} {
		var n int
		require.NoError(t, (&byteSizeValue{p: &n}).Set(in), in)
		require.Equal(t, want, n, in)
	}
	for _, in := range []string{"", "0", "-5", "1.5MiB", "3GiB", "MiB", "12XB"} {
		var n int
		require.Error(t, (&byteSizeValue{p: &n}).Set(in), in)
	}
	for n, want := range map[int]string{1 << 20: "1MiB", 1 << 30: "1GiB", 3 << 10: "3KiB", 1000: "1000"} {
		require.Equal(t, want, formatBytes(n))
	}
}

func TestHelpNamesEnvTwins(t *testing.T) {
	t.Parallel()
	res := runApp(t, nil, "", "serve", "--help")
	require.Equal(t, exitOK, res.code)
	require.Nil(t, res.cfg)
	for _, key := range []string{"DELAYQ_HTTP", "DELAYQ_DATA", "DELAYQ_BACKEND", "DELAYQ_NATS_LISTEN", "DELAYQ_NATS_URL",
		"DELAYQ_REDIS_URL", "DELAYQ_SYNC", "DELAYQ_MAX_BODY", "DELAYQ_MAX_BATCH", "DELAYQ_LOG_LEVEL", "DELAYQ_LOG_FORMAT", "DELAYQ_SHUTDOWN_TIMEOUT"} {
		require.Contains(t, res.stdout, key)
	}
	res = runApp(t, nil, "", "push", "--help")
	require.Contains(t, res.stdout, "DELAYQ_SERVER")
	require.NotContains(t, res.stdout, "DELAYQ_DELAY", "only --server has a twin among client flags")
}

func TestClientUsageErrors(t *testing.T) {
	t.Parallel()
	// No server runs at this address; every case must fail before a request.
	server := []string{"--server", "http://127.0.0.1:1"}
	tests := []struct {
		name  string
		env   map[string]string
		stdin string
		args  []string
		want  string
	}{
		{"push without topic", nil, "", []string{"push"}, "accepts between 1 and 2 arg(s)"},
		{"push bad delay", nil, "", []string{"push", "t", "--delay", "soon"}, `invalid --delay "soon"`},
		{"push bad run-at", nil, "", []string{"push", "t", "--run-at", "tomorrow"}, `invalid --run-at "tomorrow"`},
		{"push delay and run-at", nil, "", []string{"push", "t", "--delay", "1s", "--run-at", "2030-01-01T00:00:00Z"}, "exclusive"},
		{"push bad ttr", nil, "", []string{"push", "t", "--ttr", "long"}, `invalid --ttr "long"`},
		{"push body not JSON", nil, "", []string{"push", "t", "hello"}, "BODY must be one JSON value"},
		{"push stdin not JSON", nil, "{oops", []string{"push", "t", "-"}, "BODY must be one JSON value"},
		{"push bad max-attempts", nil, "", []string{"push", "t", "--max-attempts", "many"}, "--max-attempts"},
		{"get without id", nil, "", []string{"get"}, "accepts 1 arg(s)"},
		{"cancel two ids", nil, "", []string{"cancel", "a", "b"}, "accepts 1 arg(s)"},
		{"cancel running by key", nil, "", []string{"cancel", "--running", "--key", "k", "t"}, "--running cancels one job: it goes with neither --key, --all nor a filter flag"},
		{"topics two names", nil, "", []string{"topics", "a", "b"}, "accepts at most 1 arg(s)"},
		{"claim without topic", nil, "", []string{"claim"}, "accepts 1 arg(s)"},
		{"claim bad max", nil, "", []string{"claim", "t", "--max", "0"}, "invalid --max 0"},
		{"claim max too large", nil, "", []string{"claim", "t", "--max", "1001"}, "invalid --max 1001"},
		{"claim bad wait", nil, "", []string{"claim", "t", "--wait", "soon"}, `invalid argument "soon"`},
		{"claim wait too long", nil, "", []string{"claim", "t", "--wait", "2m"}, "invalid --wait 2m0s"},
		{"ack without args", nil, "", []string{"ack"}, "requires at least 2 arg(s)"},
		{"ack odd args", nil, "", []string{"ack", "a", "l", "b"}, `want pairs of ID LEASE, but got 3 arguments: the lease of "b" is missing`},
		{"nack odd args", nil, "", []string{"nack", "a", "l", "b"}, "want pairs of ID LEASE"},
		{"nack bad delay", nil, "", []string{"nack", "a", "l", "--delay", "soon"}, `invalid --delay "soon"`},
		{"bad server flag", nil, "", []string{"get", "x", "--server", "127.0.0.1:8080"}, "invalid --server"},
		{"push zero ttr", nil, "", []string{"push", "t", "--ttr", "0s"}, `invalid --ttr "0s"`},
		{"find zero limit", nil, "", []string{"find", "t", "k", "--limit", "0"}, "invalid --limit 0: want 1 to 1000"},
		{"dead limit too large", nil, "", []string{"dead", "t", "--limit", "1001"}, "invalid --limit 1001"},
		{"bad output flag", nil, "", []string{"topics", "--output", "yaml"}, `invalid argument "yaml" for "--output" flag: want json or table`},
		{"bad output env", map[string]string{"DELAYQ_OUTPUT": "xml"}, "", []string{"schedule", "list"}, `invalid value "xml" for DELAYQ_OUTPUT: want json or table`},
		{"bad server env", map[string]string{"DELAYQ_SERVER": "ftp://x"}, "", []string{"topics"}, "invalid --server"},
		{"unknown command", nil, "", []string{"pusj"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := tt.args
			if tt.env == nil && !strings.Contains(strings.Join(args, " "), "--server") {
				args = append(append([]string(nil), args...), server...)
			}
			res := runApp(t, tt.env, tt.stdin, args...)
			require.Equal(t, exitUsage, res.code, res.stderr)
			require.Contains(t, res.stderr, tt.want)
			require.Empty(t, res.stdout)
		})
	}
}

func TestClientUnreachable(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback refuses connections: a runtime failure, exit 1.
	res := runApp(t, map[string]string{"DELAYQ_SERVER": "http://127.0.0.1:1"}, "", "get", "x")
	require.Equal(t, exitError, res.code, res.stderr)
	require.Contains(t, res.stderr, "delayq: ")
	require.NotContains(t, res.stderr, "--help")
}

// TestParseFlagDuration: a duration on the command line carries its unit;
// a bare number but 0 is refused with the unit it lacks, so that --wait 5
// and --delay 5 cannot mean different things.
func TestParseFlagDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"1500ms": 1500 * time.Millisecond, "15m": 15 * time.Minute, "-1s": -time.Second,
		"1h30m": 90 * time.Minute, "0": 0} {
		got, err := flagDuration("delay", in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, want := range map[string]string{
		"1 day": `invalid --delay "1 day": want a duration with its unit`,
		"5":     `invalid --delay "5": add a unit, e.g. 5s or 5ms`,
		"1.5":   `invalid --delay "1.5": add a unit, e.g. 1.5s or 1.5ms`,
	} {
		_, err := flagDuration("delay", in)
		require.ErrorContains(t, err, want)
		require.Equal(t, exitUsage, err.(*exitCodeError).code)
	}
}

func TestNATSServerLevel(t *testing.T) {
	t.Parallel()
	require.Equal(t, slog.LevelDebug, natsServerLevel(slog.LevelDebug))
	require.Equal(t, slog.LevelWarn, natsServerLevel(slog.LevelInfo))
	require.Equal(t, slog.LevelWarn, natsServerLevel(slog.LevelWarn))
	require.Equal(t, slog.LevelError, natsServerLevel(slog.LevelError))
}

// TestServeNATSAccessFlags checks the flags of the embedded NATS server's
// client user and of the delivery subjects of restricted tokens, their
// environment twins and the configuration file.
func TestServeNATSAccessFlags(t *testing.T) {
	t.Parallel()
	res := runApp(t, nil, "", "serve")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, "delayq-client", res.cfg.NATSClientUser)
	require.Empty(t, res.cfg.NATSClientPassword)
	require.Empty(t, res.cfg.NATSDeliverySubjects)

	res = runApp(t, nil, "", "serve", "--nats-client-user", "producers", "--nats-client-password", "sixteen-chars-ok",
		"--nats-delivery-subjects", "billing.>, audit.*.log", "--nats-delivery-subjects", "x")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, "producers", res.cfg.NATSClientUser)
	require.Equal(t, "sixteen-chars-ok", res.cfg.NATSClientPassword)
	require.Equal(t, []string{"billing.>", "audit.*.log", "x"}, res.cfg.NATSDeliverySubjects)

	res = runApp(t, map[string]string{"DELAYQ_NATS_CLIENT_PASSWORD": "from-the-environment", "DELAYQ_NATS_DELIVERY_SUBJECTS": "a.>,b"}, "", "serve")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, "from-the-environment", res.cfg.NATSClientPassword)
	require.Equal(t, []string{"a.>", "b"}, res.cfg.NATSDeliverySubjects)

	for _, args := range [][]string{
		{"--nats-client-password", "short"},
		{"--nats-client-password", "sixteen chars no"},
		{"--nats-client-user", "a.b"},
		{"--nats-delivery-subjects", "a.>.b"},
		{"--nats-delivery-subjects", "a..b"},
		{"--nats-delivery-subjects", "a*.b"},
	} {
		res := runApp(t, nil, "", append([]string{"serve"}, args...)...)
		require.Equal(t, exitUsage, res.code, "%v: %s", args, res.stderr)
		require.Contains(t, res.stderr, args[0])
	}
}

// TestServeKafkaDeliveryTopics checks --kafka-delivery-topics, its
// environment twin, and its refusal of a pattern that is not one.
func TestServeKafkaDeliveryTopics(t *testing.T) {
	t.Parallel()
	res := runApp(t, nil, "", "serve")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Empty(t, res.cfg.Kafka.DeliveryTopics)
	res = runApp(t, nil, "", "serve", "--kafka-delivery-topics", "billing.>, orders-due")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, []string{"billing.>", "orders-due"}, res.cfg.Kafka.DeliveryTopics)
	res = runApp(t, map[string]string{"DELAYQ_KAFKA_DELIVERY_TOPICS": "a.*"}, "", "serve")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, []string{"a.*"}, res.cfg.Kafka.DeliveryTopics)
	for _, p := range []string{"a.>.b", "a..b", "a*"} {
		res := runApp(t, nil, "", "serve", "--kafka-delivery-topics", p)
		require.Equal(t, exitUsage, res.code, "%s: %s", p, res.stderr)
		require.Contains(t, res.stderr, "--kafka-delivery-topics")
	}
}
