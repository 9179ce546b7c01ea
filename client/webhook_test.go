package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/client"
)

// signatureVector is one request signed by delayq, from the file every
// client's receiver verifies (made by transports/webhook's
// TestSignatureVectors).
type signatureVector struct {
	Name      string            `json:"name"`
	Secrets   []string          `json:"secrets"`
	Timestamp int64             `json:"timestamp"`
	Body      string            `json:"body"`
	Headers   map[string]string `json:"headers"`
}

func loadVectors(t *testing.T) []signatureVector {
	t.Helper()
	b, err := os.ReadFile("../clients/testdata/webhook-signatures.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Vectors []signatureVector }
	if err := json.Unmarshal(b, &f); err != nil || len(f.Vectors) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	return f.Vectors
}

// wantSignatureError fails t unless err matches client.ErrSignature.
func wantSignatureError(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, client.ErrSignature) {
		t.Errorf("%s: got %v, want ErrSignature", what, err)
	}
}

// only keeps the headers of h whose names start with one of prefixes.
func only(h map[string]string, prefixes ...string) http.Header {
	out := http.Header{}
	for k, v := range h {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out.Set(k, v)
			}
		}
	}
	return out
}

// TestWebhookVerifyVectors: every signed request verifies with each of
// its secrets alone (a receiver on either side of a rotation), by either
// header, and fails with a wrong secret, a changed body or a signing time
// beyond the tolerance.
func TestWebhookVerifyVectors(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t) {
		at := time.Unix(v.Timestamp, 0)
		for _, headers := range []http.Header{only(v.Headers, "Delayq-"), only(v.Headers, "Webhook-")} {
			for _, secret := range v.Secrets {
				wr := &client.WebhookReceiver{Secrets: []string{secret}, NowFunc: func() time.Time { return at.Add(time.Minute) }}
				if err := wr.Verify(headers, []byte(v.Body)); err != nil {
					t.Errorf("%s, %v: %v", v.Name, headers, err)
				}
				wantSignatureError(t, wr.Verify(headers, []byte(v.Body+" ")), "changed body")
				late := &client.WebhookReceiver{Secrets: []string{secret}, NowFunc: func() time.Time { return at.Add(6 * time.Minute) }}
				wantSignatureError(t, late.Verify(headers, []byte(v.Body)), "stale")
			}
			wrong := &client.WebhookReceiver{Secrets: []string{"not-the-secret"}, NowFunc: func() time.Time { return at }}
			wantSignatureError(t, wrong.Verify(headers, []byte(v.Body)), "wrong secret")
		}
	}
	wantSignatureError(t, (&client.WebhookReceiver{Secrets: []string{"s"}}).Verify(http.Header{}, nil), "no signature")
}

// TestWebhookReceiverAnswers: the handler's result makes the answer
// delayq reads: 200, 500, 503 with Retry-After, 422 with Delayq-No-Retry,
// and 401 without running the handler when the signature fails.
func TestWebhookReceiverAnswers(t *testing.T) {
	t.Parallel()
	v := loadVectors(t)[0]
	at := time.Unix(v.Timestamp, 0)
	cases := []struct {
		name    string
		err     error
		secret  string
		status  int
		header  string
		value   string
		handled bool
	}{
		{"ack", nil, v.Secrets[0], http.StatusOK, "", "", true},
		{"fail", errors.New("boom"), v.Secrets[0], http.StatusInternalServerError, "", "", true},
		{"retry in", client.RetryIn(1500*time.Millisecond, errors.New("busy")), v.Secrets[0], http.StatusServiceUnavailable, "Retry-After", "2", true},
		{"stop retries", client.StopRetries("order\ngone"), v.Secrets[0], http.StatusUnprocessableEntity, client.NoRetryHeader, "order gone", true},
		{"bad signature", nil, "other", http.StatusUnauthorized, "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got *client.Delivery
			wr := &client.WebhookReceiver{
				Secrets: []string{c.secret},
				NowFunc: func() time.Time { return at },
				HandlerFunc: func(_ context.Context, d *client.Delivery) error {
					got = d
					return c.err
				},
			}
			req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(v.Body))
			for k, val := range v.Headers {
				req.Header.Set(k, val)
			}
			rec := httptest.NewRecorder()
			wr.ServeHTTP(rec, req)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body)
			}
			if c.header != "" && rec.Header().Get(c.header) != c.value {
				t.Errorf("%s: %q, want %q", c.header, rec.Header().Get(c.header), c.value)
			}
			switch {
			case !c.handled && got != nil:
				t.Fatal("the handler ran for a request that did not verify")
			case !c.handled:
			case got == nil:
				t.Fatal("the handler did not run")
			case got.ID != "job-1" || got.Topic != "orders.close" || got.Attempt != 1 || string(got.Body) != `{"order":42,"note":"é"}`:
				t.Errorf("delivery %+v", got)
			}
		})
	}
}
