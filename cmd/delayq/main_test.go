package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/internal/logproc"
	"go.uber.org/goleak"
)

// binDir holds the delayq binary that the end-to-end tests run.
var binDir string

// e2eParallel is how many tests of this package run at once unless
// -test.parallel says otherwise: more than go test's default (GOMAXPROCS),
// since most of them wait on their servers (kills, restarts, failovers,
// timed histories) more than they compute; each uses about half a core.
const e2eParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", fmt.Sprint(e2eParallel))
	}
	var err error
	if binDir, err = os.MkdirTemp("", "delayq-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(binDir)
	if code == 0 {
		// Toxiproxy's link goroutines (TestE2ENetworkFaults) whose
		// connection was cut while they held data stay blocked sending it
		// on their channels: Toxiproxy's, not delayq's.
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
			goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// buildBinary builds the delayq binary once, on the first test that needs
// it, with -race when the tests run with it.
var buildBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "delayq")
	// With the test-only clock hook (testhooks.go), inert unless its
	// variable is set (childEnv drops DELAYQ_* for the others), so that the
	// history runs need no build of their own.
	args := []string{"build", "-tags", "delayq_testhooks", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// binary returns the path of the delayq binary, building it if need be.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: builds and runs the binary")
	}
	bin, err := buildBinary()
	require.NoError(t, err)
	return bin
}

// childEnv is the environment of processes under test: this one's without
// DELAYQ_* variables, so that the developer's settings change nothing.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DELAYQ_") {
			env = append(env, kv)
		}
	}
	return env
}

// serverProc is a running `delayq serve`.
type serverProc struct {
	t *testing.T
	*logproc.Proc
	// HTTPURL is the base URL of its HTTP API; NATSURL its embedded NATS
	// server's, when it has one.
	HTTPURL, NATSURL string
	// NATSUser is the embedded NATS server's client user, and
	// NATSPasswordFile the file of its password unless a flag gave it.
	NATSUser, NATSPasswordFile string
}

var (
	httpListening = regexp.MustCompile(`msg="http listening" addr=(\S+)`)
	natsListening = regexp.MustCompile(`msg="nats listening" url=(\S+) .*user=(\S+)(?: password_file=(\S+))?`)
)

// startServer runs `delayq serve args...` and returns once its HTTP API
// listens, with the addresses read from its log. The process is killed at
// the end of the test if it still runs; its log is shown when the test
// failed, and a data race it reports fails the test.
func startServer(t *testing.T, args ...string) *serverProc {
	t.Helper()
	return startServerBin(t, binary(t), args...)
}

// startServerBin is startServer with the delayq binary bin: an earlier
// release's, for the upgrade test.
func startServerBin(t *testing.T, bin string, args ...string) *serverProc {
	t.Helper()
	p, err := tryStartServerBin(t, bin, args...)
	require.NoError(t, err)
	return p
}

// tryStartServerBin is startServerBin answering an error, with the
// process's log, when the process exits before it listens.
func tryStartServerBin(t *testing.T, bin string, args ...string) (*serverProc, error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = childEnv()
	proc, seen, err := logproc.Start(t.Context(), cmd, 30*time.Second, httpListening, natsListening)
	if err != nil {
		return nil, err
	}
	p := &serverProc{t: t, Proc: proc}
	t.Cleanup(func() {
		p.Kill()
		log := p.log()
		if strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("the server reported a data race")
		}
		if t.Failed() {
			t.Logf("delayq serve %s log:\n%s", strings.Join(args, " "), log)
		}
	})
	for _, m := range seen {
		if strings.HasPrefix(m[0], `msg="nats`) {
			p.NATSURL, p.NATSUser, p.NATSPasswordFile = m[1], m[2], m[3]
		} else {
			p.HTTPURL = "http://" + m[1]
		}
	}
	return p, nil
}

// natsClient connects to the embedded NATS server as its client user with
// the password from the file the server logged, closed at cleanup.
func (p *serverProc) natsClient(t *testing.T, opts ...nats.Option) *nats.Conn {
	t.Helper()
	require.NotEmpty(t, p.NATSPasswordFile, "the password file is logged")
	password, err := os.ReadFile(p.NATSPasswordFile)
	require.NoError(t, err)
	nc, err := nats.Connect(p.NATSURL, append([]nats.Option{nats.UserInfo(p.NATSUser, strings.TrimSpace(string(password)))}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// log returns what the server wrote so far.
func (p *serverProc) log() string { return p.Log() }

// signal sends sig to the server and waits up to timeout for it to exit,
// returning its exit code.
func (p *serverProc) signal(sig syscall.Signal, timeout time.Duration) int {
	p.t.Helper()
	require.NoError(p.t, p.Signal(sig))
	select {
	case <-p.Done():
	case <-time.After(timeout):
		p.t.Fatalf("delayq serve did not exit within %s of %s", timeout, sig)
	}
	var ee *exec.ExitError
	if errors.As(p.Err(), &ee) {
		return ee.ExitCode()
	}
	require.NoError(p.t, p.Err())
	return 0
}

// runCLI runs the binary and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLIWith(t, nil, "", args...)
}

// runCLIWith is runCLI with extra environment variables and standard input.
func runCLIWith(t *testing.T, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// The binary first: building it (once, for every test) is not the
	// command's time.
	bin := binary(t)
	// A bound, not a measure: an export of 10 000 jobs under -race, with
	// the suite's other servers busy on 2 cores, took longer than 30 s.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(childEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errOut.String()
	}
	require.NoError(t, err)
	return 0, out.String(), errOut.String()
}

// apiCaller calls a server's HTTP API in tests.
type apiCaller struct {
	t    *testing.T
	base string
	http *http.Client
}

// newCaller returns an apiCaller for base whose connections close at the
// end of the test.
func newCaller(t *testing.T, base string) *apiCaller {
	c := &apiCaller{t: t, base: base, http: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(c.http.CloseIdleConnections)
	return c
}

// call sends body as JSON (none when nil) and returns the status and the
// answer; a transport error fails the test.
func (c *apiCaller) call(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, rd)
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, answer
}

// callJSON is call that requires status want and decodes the answer into
// out (unless out is nil).
func (c *apiCaller) callJSON(method, path string, body any, want int, out any) {
	c.t.Helper()
	status, answer := c.call(method, path, body)
	require.Equal(c.t, want, status, "%s %s answered %s", method, path, answer)
	if out != nil {
		require.NoError(c.t, json.Unmarshal(answer, out), "%s", answer)
	}
}

// ackAll acknowledges deliveries, a few at a time, and returns the status of
// each ack (0 when the request failed).
func (c *apiCaller) ackAll(ds []delivery) []int {
	statuses := make([]int, len(ds))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			body := fmt.Sprintf(`{"lease": %q}`, d.Lease)
			req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.base+"/v1/jobs/"+d.ID+"/ack", strings.NewReader(body))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.http.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	return statuses
}

// delivery is a claimed job as the API answers it.
type delivery struct {
	ID      string          `json:"id"`
	Topic   string          `json:"topic"`
	Body    json.RawMessage `json:"body"`
	Attempt int             `json:"attempt"`
	RunAt   time.Time       `json:"run_at"`
	Lease   string          `json:"lease"`
}

// claim claims up to max jobs of topic, waiting up to wait.
func (c *apiCaller) claim(topic string, max int, wait time.Duration) []delivery {
	c.t.Helper()
	var out struct {
		Jobs []delivery `json:"jobs"`
	}
	c.callJSON(http.MethodPost, "/v1/topics/"+topic+"/claim", map[string]any{"max": max, "wait": wait.String()}, http.StatusOK, &out)
	return out.Jobs
}
