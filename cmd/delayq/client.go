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
)

// apiClient calls a running service's HTTP API for the client commands.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// clientFlags are the flags every client command shares.
type clientFlags struct {
	server string
	token  string
}

// apiError is an error answer of the API: its code and message.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// clientRequestTimeout bounds one client command's request.
const clientRequestTimeout = 30 * time.Second

// newAPIClient checks the --server URL and returns a client for it that
// sends the --token, if any.
func newAPIClient(f clientFlags) (*apiClient, error) {
	u, err := url.Parse(f.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("invalid --server %q: want a URL such as http://127.0.0.1:8080", f.server)
	}
	return &apiClient{
		base:  strings.TrimRight(f.server, "/"),
		token: strings.TrimSpace(f.token),
		http:  &http.Client{Timeout: clientRequestTimeout},
	}, nil
}

// authorize sets the Authorization header of h from the client's token.
func (c *apiClient) authorize(h http.Header) {
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
}

// header returns the headers every request of the client carries, for
// requests it does not build itself (the WebSocket handshake).
func (c *apiClient) header() http.Header {
	h := http.Header{}
	c.authorize(h)
	return h
}

// do sends a request with an optional JSON body and returns the answer's
// body on 2xx. Any other answer is an *apiError (exit 1); a transport failure
// is an error with exit 1 too.
func (c *apiClient) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	c.authorize(req.Header)
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &exitCodeError{code: exitError, err: fmt.Errorf("cannot reach %s (--server, DELAYQ_SERVER): %w", c.base, err)}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &exitCodeError{code: exitError, err: fmt.Errorf("reading the answer: %w", err)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return answer, nil
	}
	return nil, &exitCodeError{code: exitError, err: decodeAPIError(resp.StatusCode, answer)}
}

// print makes a request as do does and prints its answer (printJSON).
func (c *apiClient) print(ctx context.Context, w io.Writer, method, path string, body any) error {
	answer, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	return printJSON(w, answer)
}

// decodeAPIError reads an error answer; one without the API's error body
// (from a proxy, say) is described by its status and text.
func decodeAPIError(status int, body []byte) *apiError {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return &apiError{Status: status, Code: e.Error.Code, Message: e.Error.Message}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return &apiError{Status: status, Code: fmt.Sprintf("http %d", status), Message: cmp.Or(msg, http.StatusText(status))}
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

// addClientFlags defines --server (env DELAYQ_SERVER) and --token (env
// DELAYQ_TOKEN) on fs.
func addClientFlags(fs *pflag.FlagSet, f *clientFlags) {
	fs.StringVar(&f.server, "server", "http://127.0.0.1:8080", "URL of the delayq service")
	fs.StringVar(&f.token, "token", "", "API token, sent as an Authorization: Bearer header, for a service with tokens; "+
		"prefer the environment variable, since a flag shows in the process list")
	withEnv(fs, "server", "token")
}

// clientRun wraps a client command's body: it builds the client from its
// flags and marks failures without an exit code as exit 1.
func clientRun(f *clientFlags, run func(ctx context.Context, c *apiClient, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := newAPIClient(*f)
		if err != nil {
			return err
		}
		defer c.http.CloseIdleConnections()
		if err := run(cmd.Context(), c, cmd, args); err != nil {
			var ce *exitCodeError
			if errors.As(err, &ce) {
				return err
			}
			return &exitCodeError{code: exitError, err: err}
		}
		return nil
	}
}
