package main

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/delayq/delayq/core"
)

// writeConfig writes content to a configuration file in a fresh directory
// and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "delayq.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestConfigFilePrecedence(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
http: 127.0.0.1:7000
backend: memory
max-batch: 50
retention: 1h
log-level: debug
max-body: 64KiB
`)
	env := map[string]string{
		"DELAYQ_RETENTION": "2h",   // env beats the file
		"DELAYQ_LOG_LEVEL": "warn", // the flag beats both
		"DELAYQ_MAX_BODY":  "",     // empty counts as unset: the file applies
	}
	res := runApp(t, env, "", "serve", "--config", path, "--log-level", "error")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, "127.0.0.1:7000", res.cfg.HTTPAddr, "file beats default")
	require.Equal(t, backendMemory, res.cfg.Backend)
	require.Equal(t, 50, res.cfg.MaxBatch)
	require.Equal(t, 64<<10, res.cfg.MaxBody)
	require.Equal(t, 2*time.Hour, res.cfg.Retention, "env beats file")
	require.Equal(t, slog.LevelError, res.cfg.LogLevel, "flag beats env and file")
	require.Equal(t, "./delayq-data", res.cfg.DataDir, "not in the file: default")
	require.Equal(t, path, res.cfg.ConfigFile)

	// DELAYQ_CONFIG names the file too.
	res = runApp(t, map[string]string{"DELAYQ_CONFIG": path}, "", "serve", "--max-batch", "7")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 7, res.cfg.MaxBatch)
	require.Equal(t, time.Hour, res.cfg.Retention)
	require.Equal(t, "127.0.0.1:7000", res.cfg.HTTPAddr)

	// A bad value that a flag or variable overrides is not used.
	path = writeConfig(t, "max-batch: lots\nretention: never\n")
	res = runApp(t, map[string]string{"DELAYQ_RETENTION": "1h"}, "", "serve", "--config", path, "--max-batch", "3")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 3, res.cfg.MaxBatch)
}

func TestConfigFileEmpty(t *testing.T) {
	t.Parallel()
	for _, content := range []string{"", "# nothing\n", "topics:\n"} {
		res := runApp(t, nil, "", "serve", "--config", writeConfig(t, content))
		require.Equal(t, exitOK, res.code, "%q: %s", content, res.stderr)
		want := defaultServeConfig()
		want.ConfigFile = res.cfg.ConfigFile
		require.Equal(t, want, *res.cfg)
	}
}

func TestConfigFileTopicsDecoded(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
topics:
  - name: orders.close
    ttr: 45s
    max_attempts: 5
    backoff: {initial: 2s, max: 600000, factor: 3}
  - name: hooks
    delivery: {type: webhook, url: "http://127.0.0.1:9000/hook", timeout: 1500, secret: s}
    concurrency: 4
`)
	res := runApp(t, nil, "", "serve", "--config", path)
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, []*core.Topic{
		{Name: "orders.close", TTR: 45 * time.Second, MaxAttempts: 5,
			Backoff: core.Backoff{Initial: 2 * time.Second, Max: 10 * time.Minute, Factor: 3}},
		{Name: "hooks", Concurrency: 4, Delivery: core.Delivery{Type: core.DeliveryWebhook,
			URL: "http://127.0.0.1:9000/hook", Timeout: 1500 * time.Millisecond, Secret: "s"}},
	}, res.cfg.Topics)
}

func TestConfigFileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, content string
		args          []string
		// want are substrings of the message, after "config file PATH".
		want []string
	}{
		{"UnknownKey", "max-batch: 5\nmax_batch: 5\n", nil, []string{"line 2: unknown key \"max_batch\""}},
		{"HelpIsNoKey", "help: true\n", nil, []string{"unknown key \"help\""}},
		{"ConfigKey", "config: other.yaml\n", nil, []string{"line 1: config cannot be set in a config file"}},
		{"BadValue", "http: 127.0.0.1:0\nmax-batch: lots\n", nil, []string{"line 2: max-batch: invalid value \"lots\": want a whole number"}},
		{"BadDuration", "retention: -1h\n", nil, []string{"retention: invalid value \"-1h\""}},
		{"BadEnum", "backend: postgres\n", nil, []string{"backend: invalid value \"postgres\""}},
		{"Null", "http:\n", nil, []string{"line 1: http: has no value"}},
		{"ListForSingle", "max-batch: [1, 2]\n", nil, []string{"max-batch: want a single value, not a list"}},
		{"Mapping", "http: {host: a}\n", nil, []string{"http: want a single value, not a mapping"}},
		{"WrongShapeUnderFlag", "http: [a]\n", []string{"--http", "127.0.0.1:0"}, []string{"http: want a single value, not a list"}},
		{"Duplicate", "http: a:1\nhttp: a:2\n", nil, []string{`mapping key "http" already defined`}},
		{"Syntax", "http: [\n", nil, []string{"line 1: did not find expected node content"}},
		{"NotAMapping", "- http\n", nil, []string{"cannot unmarshal"}},
		{"TwoDocuments", "http: 127.0.0.1:1\n---\nhttp: 127.0.0.1:2\n", nil, []string{"want one YAML document"}},
		{"TopicsNotAList", "topics: {name: a}\n", nil, []string{"line 1: topics must be a list"}},
		{"TopicNotAMapping", "topics:\n  - a\n", nil, []string{"line 2: topics[0] must be a mapping"}},
		{"TopicNoName", "topics:\n  - {ttr: 1s}\n", nil, []string{"topics[0] has no name"}},
		{"TopicNameNotString", "topics:\n  - {name: [a]}\n", nil, []string{"topics[0] has no name"}},
		{"TopicBadName", "topics:\n  - {name: 'bad*name'}\n", nil, []string{`topic "bad*name"`}},
		{"TopicTwice", "topics:\n  - {name: a}\n  - {name: a}\n", nil, []string{`line 3: topic "a" is configured twice (first at line 2)`}},
		{"TopicUnknownField", "topics:\n  - {name: a, deliveryy: {type: webhook}}\n", nil, []string{`topic "a": unknown field "deliveryy"`}},
		{"TopicUnknownNestedField", "topics:\n  - {name: a, backoff: {initail: 1s}}\n", nil, []string{`topic "a": unknown field "backoff.initail"`}},
		{"TopicWrongType", "topics:\n  - {name: a, max_attempts: many}\n", nil, []string{`topic "a": max_attempts must be an integer`}},
		{"TopicBadDuration", "topics:\n  - {name: a, ttr: soon}\n", nil, []string{`topic "a": ttr must be a duration`}},
		{"TopicBadValue", "topics:\n  - {name: a, concurrency: -1}\n", nil, []string{`topic "a": concurrency must be between`}},
		{"TopicBadBackoff", "topics:\n  - {name: a, backoff: {factor: 0.5}}\n", nil, []string{`topic "a": backoff.factor must be between`}},
		{"TopicBadDeliveryType", "topics:\n  - {name: a, delivery: {type: email}}\n", nil, []string{`topic "a": delivery.type must be`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tt.content)
			res := runApp(t, nil, "", append([]string{"serve", "--config", path}, tt.args...)...)
			require.Equal(t, exitUsage, res.code, res.stderr)
			require.Nil(t, res.cfg, "serve must not run")
			require.Contains(t, res.stderr, "delayq: config file "+path)
			for _, w := range tt.want {
				require.Contains(t, res.stderr, w)
			}
		})
	}

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "nope.yaml")
		res := runApp(t, nil, "", "serve", "--config", path)
		require.Equal(t, exitUsage, res.code, res.stderr)
		require.Contains(t, res.stderr, "delayq: config file "+path+": no such file or directory")

		res = runApp(t, map[string]string{"DELAYQ_CONFIG": path}, "", "serve")
		require.Equal(t, exitUsage, res.code, res.stderr)
		require.Contains(t, res.stderr, "delayq: config file "+path)
	})
}

// TestConfigFileListFlag covers list values, which no serve flag takes yet.
func TestConfigFileListFlag(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	list := fs.StringSlice("list", []string{"x"}, "")
	one := fs.String("one", "", "")
	node := func(src string) *yaml.Node {
		var doc yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(src), &doc))
		return doc.Content[0]
	}
	require.NoError(t, setFlagFromNode(fs.Lookup("list"), node("[a, b]"), false))
	require.Equal(t, []string{"a", "b"}, *list)
	require.ErrorContains(t, setFlagFromNode(fs.Lookup("list"), node("[a, [b]]"), false), "want a list of single values")
	require.ErrorContains(t, setFlagFromNode(fs.Lookup("one"), node("[a]"), false), "not a list")
	require.ErrorContains(t, setFlagFromNode(fs.Lookup("one"), node("[a]"), true), "not a list")
	require.NoError(t, setFlagFromNode(fs.Lookup("one"), node("z"), true))
	require.Empty(t, *one, "shape only sets nothing")
}

// exampleConfig is the documented example configuration file.
var exampleConfig = filepath.Join("..", "..", "docs", "delayq.example.yaml")

func TestConfigFileExample(t *testing.T) {
	t.Parallel()
	res := runApp(t, nil, "", "serve", "--config", exampleConfig)
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, "127.0.0.1:8080", res.cfg.HTTPAddr)
	require.Equal(t, 1000, res.cfg.MaxBatch)
	require.Len(t, res.cfg.Topics, 2)
	require.Equal(t, "orders.close", res.cfg.Topics[0].Name)
	require.Equal(t, "reminders", res.cfg.Topics[1].Name)
	require.Equal(t, core.DeliveryWebhook, res.cfg.Topics[1].Delivery.Type)
}

// TestE2EConfigFile runs the binary with a configuration file: its settings
// apply, flags beat it, and its topics are configured at start.
func TestE2EConfigFile(t *testing.T) {
	t.Parallel()

	t.Run("Topics", func(t *testing.T) {
		t.Parallel()
		path := writeConfig(t, `
backend: memory
http: 127.0.0.1:1   # the flag below wins
topics:
  - name: e2e.file.pull
    ttr: 45s
    max_attempts: 7
  - name: e2e.file.hook
    delivery: {type: webhook, url: "http://127.0.0.1:9/hook", timeout: 2s, secret: s3cr3t}
    backoff: {initial: 3s, max: 1m}
`)
		srv := startServer(t, "--config", path, "--http", "127.0.0.1:0", "--nats-listen", "off")
		require.Contains(t, srv.log(), "memory backend: jobs are lost", "backend from the file")
		require.Contains(t, srv.log(), `msg="topic configured from the config file" topic=e2e.file.hook delivery=webhook`)
		api := newCaller(t, srv.HTTPURL)
		var got struct {
			Name       string `json:"name"`
			Configured bool   `json:"configured"`
			TTR        string `json:"ttr"`
			MaxAtt     int    `json:"max_attempts"`
			Delivery   struct {
				Type      string `json:"type"`
				URL       string `json:"url"`
				Timeout   string `json:"timeout"`
				SecretSet bool   `json:"secret_set"`
			} `json:"delivery"`
			Backoff struct {
				Initial string `json:"initial"`
				Max     string `json:"max"`
			} `json:"backoff"`
		}
		api.callJSON(http.MethodGet, "/v1/topics/e2e.file.pull", nil, http.StatusOK, &got)
		require.True(t, got.Configured)
		require.Equal(t, "45s", got.TTR)
		require.Equal(t, 7, got.MaxAtt)
		require.Equal(t, "consumer", got.Delivery.Type)

		api.callJSON(http.MethodGet, "/v1/topics/e2e.file.hook", nil, http.StatusOK, &got)
		require.True(t, got.Configured)
		require.Equal(t, "webhook", got.Delivery.Type)
		require.Equal(t, "http://127.0.0.1:9/hook", got.Delivery.URL)
		require.Equal(t, "2s", got.Delivery.Timeout)
		require.True(t, got.Delivery.SecretSet)
		require.Equal(t, "3s", got.Backoff.Initial)
		require.Equal(t, "1m0s", got.Backoff.Max)
		require.Equal(t, 0, srv.signal(syscall.SIGTERM, 10*time.Second))
	})

	t.Run("Example", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t, "--config", exampleConfig, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off")
		api := newCaller(t, srv.HTTPURL)
		for _, name := range []string{"orders.close", "reminders"} {
			var got struct {
				Configured bool `json:"configured"`
			}
			api.callJSON(http.MethodGet, "/v1/topics/"+name, nil, http.StatusOK, &got)
			require.True(t, got.Configured, name)
		}
		require.Equal(t, 0, srv.signal(syscall.SIGTERM, 10*time.Second))
	})

	t.Run("InvalidTopicAtStart", func(t *testing.T) {
		t.Parallel()
		// Only the running server knows which deliveries it has and what
		// the webhook deliverer accepts.
		for _, tt := range []struct{ topic, want string }{
			{"{name: e2e.nats, delivery: {type: nats}}", `topic "e2e.nats": delivery.type: delivery type "nats" is not available on this server`},
			{"{name: e2e.hook, delivery: {type: webhook}}", `topic "e2e.hook": delivery.url is required`},
			{"{name: e2e.hook, delivery: {type: webhook, url: 'ftp://x/'}}", `topic "e2e.hook": delivery.url`},
		} {
			path := writeConfig(t, "backend: memory\nhttp: 127.0.0.1:0\nnats-listen: off\ntopics:\n  - "+tt.topic+"\n")
			code, _, stderr := runCLI(t, "serve", "--config", path)
			require.Equal(t, exitUsage, code, stderr)
			require.Contains(t, stderr, "delayq: config file "+path+": "+tt.want)
			require.False(t, strings.Contains(stderr, "http listening"), "serve stops before taking requests")
		}
	})
}
