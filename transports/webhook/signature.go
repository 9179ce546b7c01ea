package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/transports/wire"
)

// SignatureHeader is the header that carries a delivery's signature when the
// topic has a secret.
const SignatureHeader = "Delayq-Signature"

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
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
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
	want := mac(secret, ts, body)
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

func mac(secret, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
