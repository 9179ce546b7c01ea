package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config configures a Client. Only URL is required.
type Config struct {
	// URL is the service's base URL, such as "http://127.0.0.1:8080" or
	// "https://delayq.internal"; a path in it is kept as a prefix.
	URL string

	// Token is the API token, sent as "Authorization: Bearer <Token>" on
	// every request, the subscription's handshake included. Empty: none,
	// for a service without tokens.
	Token string

	// HTTPClient sends the requests. Give one to set timeouts, proxies or
	// transports of your own. Nil: a client of its own with TLSConfig and
	// no overall timeout (every call takes a context; a claim with a wait
	// and an export last long).
	HTTPClient *http.Client

	// TLSConfig is the TLS configuration of the client made when
	// HTTPClient is nil: RootCAs to trust a private CA, Certificates for
	// client certificates. Ignored when HTTPClient is set.
	TLSConfig *tls.Config

	// UserAgent is sent as User-Agent. Defaults to UserAgentDefault.
	UserAgent string
}

// UserAgentDefault is the User-Agent of a Client without Config.UserAgent.
const UserAgentDefault = "delayq-go-client/1"

// maxAnswer bounds the answers read in full (all but export): the largest
// is a page of 1000 jobs of up to --max-body each.
const maxAnswer = 1 << 30

// Client calls a delayq service's HTTP API. It is safe for concurrent use;
// make one per service and share it.
type Client struct {
	base      *url.URL
	token     string
	http      *http.Client
	userAgent string
}

// New returns a Client for the service at cfg.URL. It returns an error
// matching ErrInvalidArgument when the URL is not an absolute http or https
// URL.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, invalidArgument("URL", "want an absolute http or https URL such as http://127.0.0.1:8080, got %q", cfg.URL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.TLSConfig != nil {
			tr.TLSClientConfig = cfg.TLSConfig.Clone()
		}
		hc = &http.Client{Transport: tr}
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = UserAgentDefault
	}
	return &Client{base: u, token: strings.TrimSpace(cfg.Token), http: hc, userAgent: ua}, nil
}

// Close closes the idle connections of the client's HTTP client. The
// Client stays usable.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// endpoint returns the URL of path (segments already escaped) with query.
func (c *Client) endpoint(path string, query url.Values) string {
	s := c.base.String() + path
	if len(query) > 0 {
		s += "?" + query.Encode()
	}
	return s
}

// header sets the headers every request carries.
func (c *Client) header(h http.Header) {
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	h.Set("User-Agent", c.userAgent)
}

// request is one call of the API.
type request struct {
	method, path string
	query        url.Values
	// body is sent as is with contentType (application/json when empty).
	body        []byte
	reader      io.Reader
	contentType string
	// lease marks ack, nack and touch, whose conflict is a lost lease.
	lease bool
}

// send sends r and returns the answer on 2xx, its body unread; any other
// answer is an *APIError, a failure to get one wraps ErrUnavailable.
func (c *Client) send(ctx context.Context, r *request) (*http.Response, error) {
	op := r.method + " " + r.path
	var rd io.Reader
	switch {
	case r.reader != nil:
		rd = r.reader
	case r.body != nil:
		rd = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.endpoint(r.path, r.query), rd)
	if err != nil {
		return nil, fmt.Errorf("delayq: %s: %w", op, err)
	}
	c.header(req.Header)
	if rd != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, op, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil && len(body) == 0 {
		return nil, transportError(ctx, op, err)
	}
	ae := decodeError(resp, body)
	ae.lease = r.lease
	return nil, ae
}

// do sends r and decodes a 2xx answer into out (unless out is nil), and
// returns the status.
func (c *Client) do(ctx context.Context, r *request, out any) (int, error) {
	resp, err := c.send(ctx, r)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, transportError(ctx, r.method+" "+r.path, fmt.Errorf("reading the answer: %w", err))
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return 0, fmt.Errorf("delayq: %s %s: decoding the answer: %w", r.method, r.path, err)
		}
	}
	if dst, ok := ctx.Value(rawAnswerKey{}).(*[]byte); ok {
		*dst = body
	}
	return resp.StatusCode, nil
}

// rawAnswerKey is the context key of WithRawAnswer.
type rawAnswerKey struct{}

// WithRawAnswer returns a context under which a call that succeeds also
// stores the body of the service's answer in *dst, byte for byte as it
// came, besides decoding it. It is for tools that pass the service's JSON
// on unchanged (the delayq command line prints it): the decoded types
// leave out fields this package does not know, and re-encoding them would
// not give the same bytes. A call answered without a body (Cancel,
// DeleteTopic...) stores an empty one; a failed call leaves *dst as it
// was; the lines of Export and ExportSeq are raw already and are not
// stored. Every call made with the context overwrites *dst, so use one
// context per call, and not concurrently.
func WithRawAnswer(ctx context.Context, dst *[]byte) context.Context {
	return context.WithValue(ctx, rawAnswerKey{}, dst)
}

// jsonBody marshals v for a request body.
func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only types of this package are marshalled here, and they cannot fail.
		panic(err)
	}
	return b
}

// durationString is d as the service reads durations: a Go duration string.
func durationString(d time.Duration) string { return d.String() }

// segment escapes one path segment (a job id or topic name).
func segment(s string) string { return url.PathEscape(s) }
