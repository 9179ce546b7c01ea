package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/delayq/delayq/client"
)

// clientFlags are the flags every client command shares.
type clientFlags struct {
	server string
	token  string
	output outputFormat
}

// cliClient is a client command's connection to the service: the Go
// client, and what backup and subscribe, which the client has no call for
// as the command line needs them, use directly.
type cliClient struct {
	*client.Client
	// base is --server without a trailing slash, for messages and for
	// the requests of backup and subscribe.
	base  string
	token string
	// http sends every request; its Timeout is clientRequestTimeout, which
	// a command that waits or streams changes before its call.
	http *http.Client
	// output is --output.
	output outputFormat
}

// clientRequestTimeout bounds one client command's request.
const clientRequestTimeout = 30 * time.Second

// newCLIClient checks the --server URL and returns a client for it that
// sends the --token, if any.
func newCLIClient(f clientFlags) (*cliClient, error) {
	u, err := url.Parse(f.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("invalid --server %q: want a URL such as http://127.0.0.1:8080", f.server)
	}
	hc := &http.Client{Timeout: clientRequestTimeout}
	token := strings.TrimSpace(f.token)
	c, err := client.New(client.Config{URL: f.server, Token: token, HTTPClient: hc})
	if err != nil {
		return nil, usageErrorf("invalid --server %q: %v", f.server, err)
	}
	return &cliClient{Client: c, base: strings.TrimRight(f.server, "/"), token: token, http: hc, output: cmp.Or(f.output, outputJSON)}, nil
}

// header returns the headers every request of the client carries, for
// the requests it does not make through the Go client.
func (c *cliClient) header() http.Header {
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	return h
}

// download asks for path with GET, accepting accept, with no time limit
// but ctx's, and returns the answer for the caller to read and close when
// it is 2xx. Any other answer is an *client.APIError. It is for `delayq
// backup`, whose tar archive the Go client has no call for.
func (c *cliClient) download(ctx context.Context, path, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header = c.header()
	req.Header.Set("Accept", accept+", application/json")
	resp, err := (&http.Client{Transport: c.http.Transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", client.ErrUnavailable, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return nil, decodeAPIError(resp.StatusCode, answer)
}

// decodeAPIError reads an error answer that did not come through the Go
// client (the backup's, the subscription handshake's) as the client would;
// one without the API's error body (from a proxy, say) is described by its
// status and text.
func decodeAPIError(status int, body []byte) *client.APIError {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return &client.APIError{StatusCode: status, Code: e.Error.Code, Message: e.Error.Message}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return &client.APIError{StatusCode: status, Code: fmt.Sprintf("http %d", status), Message: cmp.Or(msg, http.StatusText(status))}
}

// commandError turns the error of a client command into what the command
// line prints, with its exit code: an error answer is `<code>: <message>`
// and a service out of reach `cannot reach ...`, both exit 1, as
// docs/api.md ("Exit codes") says; an error that has its code keeps it.
func commandError(base string, err error) error {
	if ce, ok := errors.AsType[*exitCodeError](err); ok {
		return ce
	}
	if ae, ok := errors.AsType[*client.APIError](err); ok {
		return &exitCodeError{code: exitError, err: fmt.Errorf("%s: %s", ae.Code, ae.Message)}
	}
	if errors.Is(err, client.ErrUnavailable) {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			return &exitCodeError{code: exitError, err: fmt.Errorf("cannot reach %s (--server, DELAYQ_SERVER): %w", base, ue.Err)}
		}
	}
	// The client's own errors start with "delayq: ", which run prints
	// already.
	return &exitCodeError{code: exitError, err: errors.New(strings.TrimPrefix(err.Error(), "delayq: "))}
}

// rawAnswer returns a context under which a call of the Go client keeps
// the service's answer, as it came, in the returned slice.
func rawAnswer(ctx context.Context) (context.Context, *[]byte) {
	raw := new([]byte)
	return client.WithRawAnswer(ctx, raw), raw
}

// show prints a call's answer: the service's JSON as it came, on one line
// (--output json), or the rows table writes (--output table).
func (c *cliClient) show(w io.Writer, raw []byte, table func(t *tableWriter)) error {
	if c.output == outputTable {
		t := newTableWriter(w)
		table(t)
		return t.flush()
	}
	return printJSON(w, raw)
}

// printJSON writes an answer to w as one line.
func printJSON(w io.Writer, answer []byte) error {
	answer = bytes.TrimSpace(answer)
	if len(answer) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "%s\n", answer)
	return err
}

// addClientFlags defines --server (env DELAYQ_SERVER), --token (env
// DELAYQ_TOKEN) and --output (env DELAYQ_OUTPUT) on fs.
func addClientFlags(fs *pflag.FlagSet, f *clientFlags) {
	fs.StringVar(&f.server, "server", "http://127.0.0.1:8080", "URL of the delayq service")
	fs.StringVar(&f.token, "token", "", "API token, sent as an Authorization: Bearer header, for a service with tokens; "+
		"prefer the environment variable, since a flag shows in the process list")
	f.output = outputJSON
	fs.Var(&f.output, "output", "how answers are printed: json (the service's JSON, one line) or table (aligned columns)")
	withEnv(fs, "server", "token", "output")
}

// clientRun wraps a client command's body: it builds the client from its
// flags and turns its failures into the command line's messages and exit
// codes (commandError).
func clientRun(f *clientFlags, run func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := newCLIClient(*f)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := run(cmd.Context(), c, cmd, args); err != nil {
			return commandError(c.base, err)
		}
		return nil
	}
}
