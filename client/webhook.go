package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Webhook headers delayq sends with each delivery of a topic with a
// secret (docs/api.md, "Webhook deliveries").
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>", one
	// v1 per secret.
	SignatureHeader = "Delayq-Signature"
	// NoRetryHeader, on an answer that fails the attempt, makes the job
	// dead at once; its value is the reason.
	NoRetryHeader = "Delayq-No-Retry"
	// StandardIDHeader, StandardTimestampHeader and
	// StandardSignatureHeader are those of Standard Webhooks.
	StandardIDHeader        = "Webhook-Id"
	StandardTimestampHeader = "Webhook-Timestamp"
	StandardSignatureHeader = "Webhook-Signature"
)

// ErrSignature is matched (errors.Is) by every verification failure of
// WebhookReceiver.Verify: no signature, a malformed one, none that
// matches a secret, a signing time beyond the tolerance.
var ErrSignature = errors.New("webhook signature not verified")

// WebhookToleranceDefault is how far a request's signing time may be
// from now when WebhookReceiver.Tolerance is zero.
const WebhookToleranceDefault = 5 * time.Minute

// webhookBodyMax bounds the body a WebhookReceiver reads: a job's body
// (at most --max-body, 1 MiB by default) and its envelope.
const webhookBodyMax = 16 << 20

// WebhookReceiver is an http.Handler for a topic's delivery.url: it
// verifies each request's signature over its raw body, decodes the
// delivery and runs HandlerFunc, the same kind of handler a subscription
// runs. Nil acks (200); an error fails the attempt (500), retried by the
// topic's backoff, or after the delay of RetryIn (503 with Retry-After in
// seconds); an error made by StopRetries answers 422 with
// Delayq-No-Retry, so that the job goes dead at once. A request that does
// not verify is answered 401 and its handler not run.
type WebhookReceiver struct {
	// Secrets are the topic's secrets: a request signed by any of them
	// passes, so that a receiver given the new secret before a rotation's
	// end, or still knowing only the old one, goes on working. Required.
	Secrets []string
	// Tolerance bounds how far a request's signing time may be from now,
	// against replays.
	//
	// Defaults to WebhookToleranceDefault (5m).
	Tolerance time.Duration
	// HandlerFunc handles each verified delivery. Required.
	HandlerFunc HandlerFunc
	// NowFunc is the clock of the tolerance; nil is time.Now.
	NowFunc func() time.Time
}

var _ http.Handler = (*WebhookReceiver)(nil)

// ServeHTTP verifies, decodes and handles one delivery (see
// WebhookReceiver).
func (wr *WebhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, webhookBodyMax+1))
	switch {
	case err != nil:
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	case len(body) > webhookBodyMax:
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := wr.Verify(r.Header, body); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var d Delivery
	if err := json.Unmarshal(body, &d); err != nil {
		http.Error(w, "not a delivery: "+err.Error(), http.StatusBadRequest)
		return
	}
	if wr.HandlerFunc == nil {
		http.Error(w, "client.WebhookReceiver: no HandlerFunc", http.StatusInternalServerError)
		return
	}
	err = wr.HandlerFunc(r.Context(), &d)
	if err == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	if sr, ok := errors.AsType[*StopRetriesError](err); ok {
		w.Header().Set(NoRetryHeader, headerText(sr.Reason))
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	if re, ok := errors.AsType[*RetryError](err); ok && re.Delay > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((re.Delay+time.Second-1)/time.Second), 10))
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// Verify checks the signature of a request with header and raw body: its
// Delayq-Signature, or, when it has none, its Standard Webhooks headers,
// must be signed by one of Secrets at a time within Tolerance of now.
// Errors match ErrSignature.
func (wr *WebhookReceiver) Verify(header http.Header, body []byte) error {
	if len(wr.Secrets) == 0 {
		return fmt.Errorf("%w: the receiver has no secret", ErrSignature)
	}
	var (
		ts  string
		err error
	)
	if sig := header.Get(SignatureHeader); sig != "" {
		ts, err = verifyDelayq(wr.Secrets, sig, body)
	} else {
		ts, err = verifyStandard(wr.Secrets, header, body)
	}
	if err != nil {
		return err
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: the timestamp is not unix seconds", ErrSignature)
	}
	now := time.Now
	if wr.NowFunc != nil {
		now = wr.NowFunc
	}
	tolerance := wr.Tolerance
	if tolerance <= 0 {
		tolerance = WebhookToleranceDefault
	}
	if age := now().Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed %s from now, more than %s", ErrSignature, age.Truncate(time.Second), tolerance)
	}
	return nil
}

// verifyDelayq checks a Delayq-Signature header and returns its t.
func verifyDelayq(secrets []string, header string, body []byte) (string, error) {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if s, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, s)
			}
		}
	}
	if ts == "" || len(sigs) == 0 {
		return "", fmt.Errorf("%w: %s needs t and v1", ErrSignature, SignatureHeader)
	}
	for _, secret := range secrets {
		if anyEqual(sigs, hmacSHA256([]byte(secret), ts+"."+string(body))) {
			return ts, nil
		}
	}
	return "", fmt.Errorf("%w: no signature of %s matches a secret", ErrSignature, SignatureHeader)
}

// verifyStandard checks the Standard Webhooks headers and returns the
// timestamp.
func verifyStandard(secrets []string, header http.Header, body []byte) (string, error) {
	id, ts, sig := header.Get(StandardIDHeader), header.Get(StandardTimestampHeader), header.Get(StandardSignatureHeader)
	if id == "" || ts == "" || sig == "" {
		return "", fmt.Errorf("%w: neither %s nor the Standard Webhooks headers", ErrSignature, SignatureHeader)
	}
	var sigs [][]byte
	for part := range strings.FieldsSeq(sig) {
		if v, ok := strings.CutPrefix(part, "v1,"); ok {
			if s, err := base64.StdEncoding.DecodeString(v); err == nil {
				sigs = append(sigs, s)
			}
		}
	}
	for _, secret := range secrets {
		if anyEqual(sigs, hmacSHA256(standardKey(secret), id+"."+ts+"."+string(body))) {
			return ts, nil
		}
	}
	return "", fmt.Errorf("%w: no signature of %s matches a secret", ErrSignature, StandardSignatureHeader)
}

// standardKey is the Standard Webhooks key of a topic's secret: the
// decoded bytes of a "whsec_<base64>" secret, any other secret's own
// bytes.
func standardKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if key, err := base64.StdEncoding.DecodeString(rest); err == nil {
			return key
		}
	}
	return []byte(secret)
}

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// anyEqual reports whether one of sigs is want, in constant time each.
func anyEqual(sigs [][]byte, want []byte) bool {
	ok := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			ok = true
		}
	}
	return ok
}

// StopRetriesError is what a webhook HandlerFunc returns, made by
// StopRetries, for a delivery that no retry can help: the receiver
// answers with Delayq-No-Retry and the job goes dead at once.
type StopRetriesError struct {
	// Reason is why; delayq shows it in the job's last_error.
	Reason string
}

// StopRetries returns an error that stops the retries of a webhook
// delivery, for reason.
func StopRetries(reason string) error { return &StopRetriesError{Reason: reason} }

func (e *StopRetriesError) Error() string { return "no retry: " + e.Reason }

// headerText makes s fit a header value: control characters become
// spaces, and it is cut to 200 bytes, as delayq keeps it.
func headerText(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c == 0x7f {
			b[i] = ' '
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(b), ""))
}
