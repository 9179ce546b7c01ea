package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/cel"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Defaults of Config.
const (
	// UserAgentDefault is the User-Agent of deliveries unless Config sets one.
	UserAgentDefault = "delayq-webhook/1"
	// MaxAnswerBytesDefault is how much of an answer is read for the
	// condition and the error message unless Config sets it.
	MaxAnswerBytesDefault = 64 << 10
	// MaxURLLen is the longest delivery.url accepted.
	MaxURLLen = 2048
)

// errorSnippetLen is how much of a failed answer goes into the error.
const errorSnippetLen = 200

// maxAnswerHeaderBytes bounds the headers of an answer read, unless the
// Config's client sets its own bound, so that headers stay small for
// delivery.success conditions.
const maxAnswerHeaderBytes = 64 << 10

// drainLimit bounds the bytes read past MaxAnswerBytes to keep a connection
// reusable; a longer answer costs its connection instead.
const drainLimit = 256 << 10

// Config configures a Deliverer. Zero fields take their defaults.
type Config struct {
	// Client sends the requests. It is copied and its CheckRedirect replaced,
	// so that redirects are never followed; its Timeout, if any, applies on
	// top of the topic's delivery.timeout.
	//
	// Defaults to a client of its own with keep-alives and a large idle pool
	// per host.
	Client *http.Client
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock stamps signatures. Defaults to the real clock.
	Clock core.Clock
	// UserAgent is sent with every delivery. Defaults to UserAgentDefault.
	UserAgent string
	// MaxAnswerBytes bounds the bytes of an answer read for the
	// delivery.success condition and the error message; a longer answer is
	// cut there, so it does not parse as JSON. Defaults to
	// MaxAnswerBytesDefault (64 KiB).
	MaxAnswerBytes int64
	// Destinations decides which hosts and addresses deliveries may reach,
	// checked by ValidateTopic and again when each connection is dialled,
	// against the addresses the host resolves to then. The check at dial
	// time needs the client's Transport to be an *http.Transport (or nil);
	// with a proxy from the environment it checks the proxy's address.
	//
	// Defaults to the built-in denials of link-local and cloud metadata
	// addresses only (see Destinations).
	Destinations *Destinations
	// LookupNetIPFunc resolves host names for the destination checks.
	//
	// Defaults to net.DefaultResolver.LookupNetIP.
	LookupNetIPFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Deliverer posts due jobs of webhook topics to their URL. It implements
// core.Deliverer and is safe for concurrent use.
type Deliverer struct {
	client    *http.Client
	log       *slog.Logger
	clock     core.Clock
	userAgent string
	maxAnswer int64
	conds     conditions
	dests     *Destinations
	// lookupFunc resolves host names for the destination checks.
	lookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// stale holds, by topic name, the delivery.success last logged as not
	// compiling.
	stale sync.Map
}

var _ core.Deliverer = (*Deliverer)(nil)

// New returns a Deliverer configured by cfg.
func New(cfg Config) *Deliverer {
	d := &Deliverer{
		log:        cmp.Or(cfg.Logger, slog.Default()),
		clock:      cmp.Or[core.Clock](cfg.Clock, core.RealClock()),
		userAgent:  cmp.Or(cfg.UserAgent, UserAgentDefault),
		maxAnswer:  cmp.Or(max(cfg.MaxAnswerBytes, 0), MaxAnswerBytesDefault),
		dests:      cmp.Or(cfg.Destinations, &Destinations{}),
		lookupFunc: cfg.LookupNetIPFunc,
	}
	if d.lookupFunc == nil {
		d.lookupFunc = net.DefaultResolver.LookupNetIP
	}
	d.conds.maxAnswer = d.maxAnswer
	var client http.Client
	if cfg.Client != nil {
		client = *cfg.Client
	}
	switch t := client.Transport.(type) {
	case nil:
		if cfg.Client == nil {
			client.Transport = d.guard(newTransport())
		} else {
			client.Transport = d.guard(http.DefaultTransport.(*http.Transport).Clone())
		}
	case *http.Transport:
		client.Transport = d.guard(t.Clone())
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	d.client = &client
	return d
}

// guard makes t dial through the destination checks.
func (d *Deliverer) guard(t *http.Transport) *http.Transport {
	t.DialContext = d.dialContext(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	t.DialTLSContext = nil
	if t.MaxResponseHeaderBytes == 0 {
		t.MaxResponseHeaderBytes = maxAnswerHeaderBytes
	}
	return t
}

// newTransport returns the default transport: http.DefaultTransport's
// settings (proxy from the environment, HTTP/2) with a pool sized for many
// concurrent deliveries to few hosts.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// CloseIdleConnections closes the idle keep-alive connections of the
// Deliverer's client, for shutdown. Deliveries may continue afterwards.
func (d *Deliverer) CloseIdleConnections() { d.client.CloseIdleConnections() }

// ValidateTopic checks the webhook fields of a topic: delivery.url must be an
// absolute http or https URL with a host and no user information, whose
// host name and the addresses it resolves to now are allowed by
// Config.Destinations (a name that does not resolve passes; deliveries are
// checked again), delivery.secret and delivery.previous_secret, when in
// the whsec_ form, must hold a valid key (StandardKey),
// delivery.success, when set, must compile to a boolean CEL condition over
// status, body and headers within the cost limits (see
// MaxConditionEstimatedCost), and delivery.subject must be empty. It
// returns a *core.FieldError naming the bad field.
func (d *Deliverer) ValidateTopic(t *core.Topic) error {
	if t.Delivery.Type != core.DeliveryWebhook {
		return core.Invalid("delivery.type", "delivery.type must be %s for a webhook topic", core.DeliveryWebhook)
	}
	if err := d.checkURL("delivery.url", t.Delivery.URL); err != nil {
		return err
	}
	if t.Delivery.Subject != "" {
		return core.Invalid("delivery.subject", "delivery.subject is only for nats delivery")
	}
	for field, secret := range map[string]string{"delivery.secret": t.Delivery.Secret, "delivery.previous_secret": t.Delivery.PreviousSecret} {
		if _, err := StandardKey(secret); err != nil {
			return core.Invalid(field, "%s: %s", field, err)
		}
	}
	if t.Delivery.Success != "" {
		if _, err := d.conds.compile(t.Delivery.Success); err != nil {
			return core.Invalid("delivery.success", "delivery.success: %s", err.Error())
		}
	}
	return nil
}

// ValidateJobURL implements core.JobURLValidator: a job's own url is
// checked as a topic's delivery.url is (see ValidateTopic), with errors
// naming field "url". Each delivery checks its addresses again.
func (d *Deliverer) ValidateJobURL(raw string) error {
	return d.checkURL("url", raw)
}

// checkURL checks a delivery URL named field: its form (validateURL), then
// its host against Config.Destinations.
func (d *Deliverer) checkURL(field, raw string) error {
	if err := validateURL(field, raw); err != nil {
		return err
	}
	if u, err := url.Parse(raw); err == nil {
		if err := d.checkURLHost(u.Hostname()); err != nil {
			return &core.FieldError{Field: field, Message: field + ": " + err.Error(), Err: errors.Join(core.ErrInvalidArgument, err)}
		}
	}
	return nil
}

// validateURL checks the form of a delivery URL named field.
func validateURL(field, raw string) error {
	if raw == "" {
		return core.Invalid(field, "%s is required for webhook delivery", field)
	}
	if len(raw) > MaxURLLen {
		return core.Invalid(field, "%s must be at most %d bytes", field, MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return core.Invalid(field, "%s is not a URL: %s", field, urlMessage(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return core.Invalid(field, "%s must be an absolute http or https URL", field)
	case u.Opaque != "" || u.Hostname() == "":
		return core.Invalid(field, "%s must have a host", field)
	case u.User != nil:
		return core.Invalid(field, "%s must not contain user information; sign with delivery.secret instead", field)
	}
	return nil
}

// urlMessage drops the URL from a url.Error, which is quoted back in full.
func urlMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// StatusError is the error of an attempt that got an answer that is not a
// success: a non-2xx status without a condition, including a redirect. Its
// message is "status <code>", followed, when the topic sets
// delivery.error_body, by ": <start of the answer>" or, for a redirect,
// ": redirect to <location> not followed".
type StatusError struct {
	// Status is the answer's HTTP status code.
	Status int
	// Answer is the start of the answer's body, valid UTF-8, at most 200
	// bytes; empty unless the topic sets delivery.error_body.
	Answer string
	// Location is the target of a redirect (3xx), which is not followed;
	// empty unless the topic sets delivery.error_body.
	Location string
	// Wait is the delay asked for by a Retry-After header in seconds, zero
	// when absent or given as a date.
	Wait time.Duration
}

// RetryAfter returns Wait; the engine waits at least that long (within the
// topic's backoff cap) before the next attempt.
func (e *StatusError) RetryAfter() time.Duration { return e.Wait }

// StatusCode returns Status, so that an endpoint breaker can tell an
// endpoint that refused a request (4xx) from one that is failing.
func (e *StatusError) StatusCode() int { return e.Status }

// Error implements error.
func (e *StatusError) Error() string {
	switch {
	case e.Location != "":
		return "status " + strconv.Itoa(e.Status) + ": redirect to " + e.Location + " not followed"
	case e.Status >= 300 && e.Status < 400 && e.Answer == "":
		return "status " + strconv.Itoa(e.Status) + ": redirect not followed"
	}
	if e.Answer == "" {
		return "status " + strconv.Itoa(e.Status)
	}
	return "status " + strconv.Itoa(e.Status) + ": " + e.Answer
}

// ConditionError is the error of an attempt whose answer did not satisfy
// the topic's delivery.success: the condition was false, or it failed
// while evaluated. Its message is "condition false: <condition> (status
// <code>)" or "condition error: <reason> (status <code>)".
type ConditionError struct {
	// Status is the answer's HTTP status code.
	Status int
	// Condition is the topic's delivery.success.
	Condition string
	// Reason says why evaluation failed; empty when the condition was
	// false. Unless the topic sets delivery.error_body it says only which
	// limit stopped the evaluation, or that the reason is withheld, since
	// CEL's reasons may quote the answer.
	Reason string
}

// StatusCode returns Status, so that an endpoint breaker counts the answer
// by its status, not by the topic's condition.
func (e *ConditionError) StatusCode() int { return e.Status }

// Error implements error.
func (e *ConditionError) Error() string {
	if e.Reason == "" {
		return "condition false: " + e.Condition + " (status " + strconv.Itoa(e.Status) + ")"
	}
	return "condition error: " + e.Reason + " (status " + strconv.Itoa(e.Status) + ")"
}

// Deliver posts a job to the topic's URL and reports the outcome: nil for a
// 2xx answer (or, when delivery.success is set, an answer that satisfies it)
// within delivery.timeout, else an error that says briefly why, such as
// "status 503: <answer>" (a *StatusError), "timeout after 10s" or
// "condition false: <condition> (status 200)", or a *core.NoRetryError
// holding a *StopError when the failed answer carried NoRetryHeader. A job
// with its own URL goes there (see targetURL). When ctx is done first it
// returns at once with an error wrapping ctx's. Each call is one attempt;
// the receiver sees at-least-once delivery and can tell attempts apart by
// the Delayq-Attempt header.
func (d *Deliverer) Deliver(ctx context.Context, p *core.DeliverParams) error {
	if p == nil || p.Topic == nil || p.Job == nil {
		return core.Invalid("", "webhook: deliver: no params (topic and job are required)")
	}
	job := p.Job
	err := d.deliver(ctx, p.Topic, job)
	if err != nil {
		d.log.LogAttrs(ctx, slog.LevelDebug, "webhook: attempt failed",
			slog.String("topic", job.Topic), slog.String("id", job.ID),
			slog.Int("attempt", job.Attempt), slog.String("err", err.Error()))
	}
	return err
}

func (d *Deliverer) deliver(ctx context.Context, topic *core.Topic, job *core.Job) error {
	timeout := cmp.Or(topic.Delivery.Timeout, core.WebhookTimeoutDefault)
	cond := topic.Delivery.Success
	var prog cel.Program
	if cond != "" {
		var err error
		if prog, err = d.conds.compile(cond); err != nil {
			return d.staleCondition(ctx, topic, err)
		}
	}

	target, err := targetURL(topic, job)
	if err != nil {
		return err
	}
	payload := encodePayload(job)
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, cmp.Or(topic.Delivery.Method, http.MethodPost), target, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("invalid url: %s", urlMessage(err))
	}
	for name, value := range topic.Delivery.Headers {
		req.Header.Set(name, value) // none of those set below: core.Topic.Validate
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.userAgent)
	req.Header.Set("Delayq-Id", job.ID)
	req.Header.Set("Delayq-Attempt", strconv.Itoa(job.Attempt))
	req.Header.Set("Delayq-Run-At", job.RunAt.UTC().Format(wire.TimeLayout))
	req.Header.Set("traceparent", cmp.Or(job.TraceParent, wire.TraceParentFor(job.ID)))
	if code, ok := PreviousStatus(job); ok {
		req.Header.Set(PreviousStatusHeader, strconv.Itoa(code))
	}
	if secret := topic.Delivery.Secret; secret != "" {
		secrets := []string{secret}
		if prev := topic.Delivery.PreviousSecret; prev != "" {
			secrets = append(secrets, prev)
		}
		signRequest(req.Header, secrets, job.ID, d.clock.Now(), payload)
	}

	show := topic.Delivery.ErrorBody
	resp, err := d.client.Do(req)
	if err != nil {
		return d.transportError(ctx, actx, timeout, "request failed", err, show)
	}
	defer func() {
		// Drain what is left, within the attempt's timeout, so the
		// connection goes back to the pool.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		_ = resp.Body.Close()
	}()

	success := resp.StatusCode >= 200 && resp.StatusCode < 300
	if prog == nil && success {
		return nil
	}
	if prog == nil {
		if err := stopped(resp); err != nil {
			return err
		}
	}
	if prog == nil && !show {
		// Nothing of the answer goes into the error: not read.
		return &StatusError{Status: resp.StatusCode, Wait: retryAfter(resp.Header)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, d.maxAnswer))
	if err != nil {
		return d.transportError(ctx, actx, timeout, fmt.Sprintf("reading answer (status %d)", resp.StatusCode), err, show)
	}
	if prog == nil {
		se := &StatusError{Status: resp.StatusCode, Answer: snippet(body), Wait: retryAfter(resp.Header)}
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			se.Location = snippet([]byte(resp.Header.Get("Location")))
		}
		return se
	}
	a := &answer{Status: resp.StatusCode, Headers: firstValues(resp.Header)}
	if json.Valid(body) {
		_ = json.Unmarshal(body, &a.Body)
	}
	ok, err := eval(actx, prog, a)
	var ce *ConditionError
	switch {
	case err != nil && actx.Err() != nil:
		return d.transportError(ctx, actx, timeout, "evaluating condition", err, show)
	case err != nil && !show && !errors.Is(err, errConditionLimit):
		// CEL's reasons may quote the answer (a key, a value that does
		// not parse); a limit says nothing of it.
		ce = &ConditionError{Status: resp.StatusCode, Condition: cond, Reason: reasonWithheld}
	case err != nil:
		ce = &ConditionError{Status: resp.StatusCode, Condition: cond, Reason: err.Error()}
	case !ok:
		ce = &ConditionError{Status: resp.StatusCode, Condition: cond}
	default:
		return nil
	}
	if err := stopped(resp); err != nil {
		return err
	}
	return ce
}

// PreviousStatusHeader carries, from the second attempt of a job on, the
// HTTP status that answered its previous attempt; see PreviousStatus.
const PreviousStatusHeader = "Delayq-Previous-Status"

// PreviousStatus returns the HTTP status that answered the previous attempt
// of job, read from its last_error as this package writes it: "status
// <code>..." (a *StatusError), "...(status <code>)" (a *ConditionError or
// *StopError) or "reading answer (status <code>)..." (an answer cut
// short). It reports false on a first attempt (Attempt 1, also after a
// requeue) and when the previous attempt got no answer: a timeout, a
// failed connection, an expired lease, a shutdown. A last_error that a
// pull consumer's nack wrote in one of these forms reads as a status too.
func PreviousStatus(job *core.Job) (int, bool) {
	if job.Attempt <= 1 {
		return 0, false
	}
	e := job.LastError
	var digits string
	switch {
	case strings.HasPrefix(e, "status "):
		digits = e[len("status "):]
		if i := strings.IndexByte(digits, ':'); i >= 0 {
			digits = digits[:i]
		}
	case strings.HasPrefix(e, "reading answer (status "):
		digits, _, _ = strings.Cut(e[len("reading answer (status "):], ")")
	case strings.HasSuffix(e, ")"):
		i := strings.LastIndex(e, "(status ")
		if i < 0 {
			return 0, false
		}
		digits = e[i+len("(status ") : len(e)-1]
	}
	if len(digits) != 3 || !wire.IsDigits(digits) {
		return 0, false
	}
	code, _ := strconv.Atoi(digits)
	if code < 100 || code > 599 {
		return 0, false
	}
	return code, true
}

// NoRetryHeader is the answer header by which a receiver stops the retries
// of a job: on an answer that fails the attempt (a status that is not 2xx,
// or with delivery.success, any answer), the job goes dead at once, its
// last_error saying why. Its value is the receiver's reason, for people.
const NoRetryHeader = "Delayq-No-Retry"

// StopError is the error of a failed attempt whose answer carried
// NoRetryHeader: the receiver asked for no more attempts. Deliver returns
// it inside a *core.NoRetryError, so that the engine buries the job at
// once. Its message is "receiver stopped retries: <reason> (status
// <code>)", or without the reason when the header was empty.
type StopError struct {
	// Status is the answer's HTTP status code.
	Status int
	// Reason is the header's value, valid UTF-8 without control
	// characters, whitespace runs folded, at most 200 bytes. It is kept
	// whether or not the topic sets delivery.error_body: the receiver
	// wrote it for delayq to show.
	Reason string
}

// StatusCode returns Status, so that an endpoint breaker counts the answer
// by its status.
func (e *StopError) StatusCode() int { return e.Status }

// Error implements error.
func (e *StopError) Error() string {
	if e.Reason == "" {
		return "receiver stopped retries (status " + strconv.Itoa(e.Status) + ")"
	}
	return "receiver stopped retries: " + e.Reason + " (status " + strconv.Itoa(e.Status) + ")"
}

// stopped returns a *core.NoRetryError holding a *StopError when a failed
// answer carries NoRetryHeader, else nil.
func stopped(resp *http.Response) error {
	vals, ok := resp.Header[NoRetryHeader]
	if !ok {
		return nil
	}
	reason := ""
	if len(vals) > 0 {
		reason = snippet([]byte(strings.Map(controlToSpace, strings.ToValidUTF8(vals[0], "\uFFFD"))))
	}
	return &core.NoRetryError{Err: &StopError{Status: resp.StatusCode, Reason: reason}}
}

// controlToSpace maps control characters to a space, which snippet folds
// with the whitespace around it.
func controlToSpace(r rune) rune {
	if unicode.IsControl(r) {
		return ' '
	}
	return r
}

// targetURL returns where a delivery of job goes: its own URL when it has
// one, else the topic's. A job's own URL on a topic that no longer allows
// them (delivery.allow_job_url turned off after the push) fails the
// attempt, as a URL stored before it was checked that is no URL does:
// sending the job to the topic's URL instead would deliver it where its
// producer did not ask. The error wraps core.ErrInvalidArgument, which
// endpoint breakers do not count; the attempt is retried by the backoff,
// so turning allow_job_url back on in time lets the job through.
func targetURL(topic *core.Topic, job *core.Job) (string, error) {
	if job.URL == "" {
		return topic.Delivery.URL, nil
	}
	if !topic.Delivery.AllowJobURL {
		return "", core.Invalid("url", "not sent: the job has its own url, which topic %q no longer allows (delivery.allow_job_url is off)", topic.Name)
	}
	if err := validateURL("url", job.URL); err != nil {
		return "", fmt.Errorf("not sent: %w", err)
	}
	return job.URL, nil
}

// staleCondition is the error of a delivery whose topic holds a
// delivery.success that does not compile, such as one stored before
// conditions were CEL. It wraps core.ErrInvalidArgument, which endpoint
// breakers do not count, and is logged at warn level once per topic and
// condition.
func (d *Deliverer) staleCondition(ctx context.Context, topic *core.Topic, err error) error {
	if prev, loaded := d.stale.Swap(topic.Name, topic.Delivery.Success); !loaded || prev != topic.Delivery.Success {
		d.log.LogAttrs(ctx, slog.LevelWarn, "webhook: topic's delivery.success does not compile; its deliveries fail until the topic is set again with a CEL condition",
			slog.String("topic", topic.Name), slog.String("success", topic.Delivery.Success), slog.String("err", err.Error()))
	}
	return core.Invalid("delivery.success", "delivery.success does not compile as CEL (%s): set the topic again with a valid condition", err)
}

// transportError describes an attempt that got no complete answer: the
// caller's ctx ended (returned wrapped, so errors.Is finds it), the
// attempt's timeout ran out, or the connection failed. Unless show, what
// net/http quotes of a malformed answer is cut out.
func (d *Deliverer) transportError(ctx, actx context.Context, timeout time.Duration, what string, err error, show bool) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("delivery interrupted: %w", context.Cause(ctx))
	case errors.Is(actx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("timeout after %s", timeout)
	}
	msg := urlMessage(err)
	if !show {
		msg = withholdAnswer(msg)
	}
	return fmt.Errorf("%s: %s", what, msg)
}

// reasonWithheld replaces, unless the topic sets delivery.error_body, the
// reason a condition failed to evaluate.
const reasonWithheld = "evaluation failed; set delivery.error_body to see why"

// withholdAnswer cuts from a net/http error message what it quotes of the
// answer: the rest of a "malformed ..." phrase after its first ": " or
// quote (malformed HTTP response "<first line>", malformed MIME header
// line: <line>), and anything from a quote on.
func withholdAnswer(msg string) string {
	const note = " (answer withheld; set delivery.error_body to see it)"
	cut := strings.IndexByte(msg, '"')
	if i := strings.Index(msg, "malformed"); i >= 0 {
		if j := strings.Index(msg[i:], ": "); j >= 0 && (cut < 0 || i+j < cut) {
			cut = i + j
		}
	}
	if cut < 0 {
		return msg
	}
	return strings.TrimRight(msg[:cut], " :") + note
}

// encodePayload writes {"id","topic","body","attempt","run_at"} with the body
// byte for byte as stored, which encoding/json would compact and escape.
func encodePayload(job *core.Job) []byte {
	body := []byte(job.Body)
	if len(body) == 0 {
		body = []byte("null")
	}
	id, _ := json.Marshal(job.ID)
	topic, _ := json.Marshal(job.Topic)
	var b bytes.Buffer
	b.Grow(len(body) + len(id) + len(topic) + 96)
	b.WriteString(`{"id":`)
	b.Write(id)
	b.WriteString(`,"topic":`)
	b.Write(topic)
	b.WriteString(`,"body":`)
	b.Write(body)
	b.WriteString(`,"attempt":`)
	b.WriteString(strconv.Itoa(job.Attempt))
	b.WriteString(`,"run_at":"`)
	b.WriteString(job.RunAt.UTC().Format(runAtLayout))
	b.WriteString(`"}`)
	return b.Bytes()
}

// runAtLayout is RFC 3339 with milliseconds.
const runAtLayout = "2006-01-02T15:04:05.000Z07:00"

// snippet returns the start of an answer for an error message: at most
// errorSnippetLen bytes, whitespace runs folded to one space, valid UTF-8.
func snippet(body []byte) string {
	if len(body) > 4*errorSnippetLen {
		body = body[:4*errorSnippetLen]
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "\uFFFD")), " ")
	if len(s) <= errorSnippetLen {
		return s
	}
	cut := errorSnippetLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// firstValues maps each header's canonical name to its first value.
func firstValues(h http.Header) map[string]string {
	m := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			m[http.CanonicalHeaderKey(k)] = v[0]
		}
	}
	return m
}

// retryAfter reads a Retry-After header given in seconds.
func retryAfter(h http.Header) time.Duration {
	s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || s <= 0 {
		return 0
	}
	return time.Duration(min(s, 7*24*3600)) * time.Second
}
