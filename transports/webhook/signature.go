package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/transports/wire"
)

// SignatureHeader is the header that carries a delivery's signature when the
// topic has a secret.
const SignatureHeader = "Delayq-Signature"

// Headers of Standard Webhooks (https://www.standardwebhooks.com), sent
// beside SignatureHeader when the topic has a secret.
const (
	// StandardIDHeader carries the job id, the same on every attempt, so
	// that receivers deduplicate by it.
	StandardIDHeader = "Webhook-Id"
	// StandardTimestampHeader carries the signing time in Unix seconds.
	StandardTimestampHeader = "Webhook-Timestamp"
	// StandardSignatureHeader carries "v1,<base64 signature>", one for each
	// secret, separated by spaces.
	StandardSignatureHeader = "Webhook-Signature"
)

// StandardSecretPrefix marks a secret in the Standard Webhooks form:
// "whsec_" followed by the key in standard base64.
const StandardSecretPrefix = "whsec_"

// Bounds of a Standard Webhooks key given as a whsec_ secret, as the
// specification recommends.
const (
	// StandardKeyMin is the fewest bytes a whsec_ secret's key may have.
	StandardKeyMin = 24
	// StandardKeyMax is the most bytes a whsec_ secret's key may have.
	StandardKeyMax = 64
)

// StandardKey returns the HMAC key that signs the Standard Webhooks header
// for a topic's secret: for a secret "whsec_<base64>", the decoded bytes
// (which must be StandardKeyMin to StandardKeyMax long), so that the
// official libraries take the secret as it is (NewWebhook("whsec_...")); for
// any other secret, its bytes as given, which those libraries take as
// "whsec_" + base64(secret), or raw (NewWebhookRaw). Delayq-Signature is
// keyed by the secret's bytes as given in both cases.
//
// Errors: a whsec_ secret whose rest is not standard base64 or decodes to
// a key of the wrong length.
func StandardKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, StandardSecretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.New("a secret that starts with " + StandardSecretPrefix + " must go on in standard base64 (with padding)")
	}
	if len(key) < StandardKeyMin || len(key) > StandardKeyMax {
		return nil, fmt.Errorf("a %s secret must decode to %d to %d bytes, not %d", StandardSecretPrefix, StandardKeyMin, StandardKeyMax, len(key))
	}
	return key, nil
}

// signRequest sets the signature headers of a delivery of job id: one
// Delayq-Signature with a v1 per secret, and the Standard Webhooks headers
// with a v1 per secret whose StandardKey is valid (a whsec_ secret stored
// before such secrets were checked may not be; it signs only
// Delayq-Signature).
func signRequest(h http.Header, secrets []string, id string, t time.Time, body []byte) {
	ts := strconv.FormatInt(t.Unix(), 10)
	var ours, std strings.Builder
	ours.WriteString("t=" + ts)
	for _, s := range secrets {
		ours.WriteString(",v1=" + hex.EncodeToString(mac([]byte(s), ts, body)))
		key, err := StandardKey(s)
		if err != nil {
			continue
		}
		if std.Len() > 0 {
			std.WriteByte(' ')
		}
		std.WriteString("v1," + base64.StdEncoding.EncodeToString(mac(key, id+"."+ts, body)))
	}
	h.Set(SignatureHeader, ours.String())
	if std.Len() > 0 {
		h.Set(StandardIDHeader, id)
		h.Set(StandardTimestampHeader, ts)
		h.Set(StandardSignatureHeader, std.String())
	}
}

// maxSignatureHeaderLen bounds the header Verify parses.
const maxSignatureHeaderLen = 4096

// Errors returned by Verify; each is wrapped with the detail.
var (
	// ErrSignatureMalformed is returned when the header is missing, too long
	// or not of the form t=<unix seconds>,v1=<hex>, or the secret is empty.
	ErrSignatureMalformed = errors.New("webhook: malformed signature")
	// ErrSignatureMismatch is returned when no v1 signature matches the body.
	ErrSignatureMismatch = errors.New("webhook: signature mismatch")
	// ErrSignatureExpired is returned when the signature's time is further
	// from now than the tolerance.
	ErrSignatureExpired = errors.New("webhook: signature outside tolerance")
)

// Sign returns the Delayq-Signature header value for body signed with secret
// at time t: "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>".
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac([]byte(secret), ts, body))
}

// Verify checks a Delayq-Signature header value against the raw request body:
// one of its v1 signatures must be the HMAC of body under secret, and its
// time t must be within tolerance of now (a tolerance of 0 or less skips
// that check, which lets replayed deliveries through). Elements other than
// t and v1 are ignored, and several v1 elements may be given.
//
// Errors: ErrSignatureMalformed, ErrSignatureMismatch, ErrSignatureExpired,
// each wrapped with detail.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if secret == "" {
		return fmt.Errorf("%w: empty secret", ErrSignatureMalformed)
	}
	ts, sigs, err := parseSignature(header)
	if err != nil {
		return err
	}
	want := mac([]byte(secret), ts, body)
	matched := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			matched = true
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}
	if tolerance > 0 {
		sec, _ := strconv.ParseInt(ts, 10, 64) // checked by parseSignature
		age := now.Sub(time.Unix(sec, 0))
		if age > tolerance || age < -tolerance {
			return fmt.Errorf("%w: signed at %s, %s from now", ErrSignatureExpired,
				time.Unix(sec, 0).UTC().Format(time.RFC3339), age.Truncate(time.Second))
		}
	}
	return nil
}

// parseSignature splits a header value into its timestamp, as written, and
// its decoded v1 signatures.
func parseSignature(header string) (string, [][]byte, error) {
	if header == "" {
		return "", nil, fmt.Errorf("%w: empty header", ErrSignatureMalformed)
	}
	if len(header) > maxSignatureHeaderLen {
		return "", nil, fmt.Errorf("%w: header longer than %d bytes", ErrSignatureMalformed, maxSignatureHeaderLen)
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return "", nil, fmt.Errorf("%w: element without '='", ErrSignatureMalformed)
		}
		switch k {
		case "t":
			if ts != "" {
				return "", nil, fmt.Errorf("%w: more than one t", ErrSignatureMalformed)
			}
			if !wire.IsDigits(v) || len(v) > 18 {
				return "", nil, fmt.Errorf("%w: t is not unix seconds", ErrSignatureMalformed)
			}
			ts = v
		case "v1":
			if len(v) != 2*sha256.Size {
				return "", nil, fmt.Errorf("%w: v1 is not %d hex digits", ErrSignatureMalformed, 2*sha256.Size)
			}
			s, err := hex.DecodeString(v)
			if err != nil {
				return "", nil, fmt.Errorf("%w: v1 is not hex", ErrSignatureMalformed)
			}
			sigs = append(sigs, s)
		}
	}
	if ts == "" {
		return "", nil, fmt.Errorf("%w: no t", ErrSignatureMalformed)
	}
	if len(sigs) == 0 {
		return "", nil, fmt.Errorf("%w: no v1", ErrSignatureMalformed)
	}
	return ts, sigs, nil
}

// mac is HMAC-SHA256 under key of prefix, '.' and body.
func mac(key []byte, prefix string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(prefix))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
