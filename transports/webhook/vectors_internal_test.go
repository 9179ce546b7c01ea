package webhook

import (
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite clients/testdata/webhook-signatures.json from the signer")

// signatureVectors is the file of signed requests every client's receiver
// helper verifies (clients/SCENARIOS.md): made by signRequest, so that a
// change of the signer that the clients would not verify fails here.
const signatureVectors = "../../clients/testdata/webhook-signatures.json"

// signatureVector is one signed request: the topic's secrets, what was
// signed, and the headers the signer set.
type signatureVector struct {
	Name      string            `json:"name"`
	Secrets   []string          `json:"secrets"`
	ID        string            `json:"id"`
	Timestamp int64             `json:"timestamp"`
	Body      string            `json:"body"`
	Headers   map[string]string `json:"headers"`
}

// TestSignatureVectors checks the shared vectors against signRequest
// (-update-vectors rewrites them).
func TestSignatureVectors(t *testing.T) {
	t.Parallel()
	at := time.Unix(1795000000, 0)
	body := `{"id":"job-1","topic":"orders.close","body":{"order":42,"note":"é"},"attempt":1,"run_at":"2026-11-19T08:26:40.000Z"}`
	cases := []signatureVector{
		{Name: "one secret", Secrets: []string{"s3cret"}},
		{Name: "rotation: new and previous secret", Secrets: []string{"new-secret", "old-secret"}},
		{Name: "whsec_ secret", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		{Name: "rotation: whsec_ secret and a previous plain one", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "old-secret"}},
	}
	for i := range cases {
		c := &cases[i]
		c.ID, c.Timestamp, c.Body = "job-1", at.Unix(), body
		h := http.Header{}
		signRequest(h, c.Secrets, c.ID, at, []byte(body))
		c.Headers = map[string]string{}
		for k := range h {
			c.Headers[k] = h.Get(k)
		}
	}
	got, err := json.MarshalIndent(map[string]any{
		"about":   "Requests signed by delayq (transports/webhook signRequest), which every client's webhook receiver helper must verify, with any one of secrets, at timestamp. Made by go test ./transports/webhook -run TestSignatureVectors -update-vectors.",
		"vectors": cases,
	}, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	if *updateVectors {
		require.NoError(t, os.MkdirAll(filepath.Dir(signatureVectors), 0o755))
		require.NoError(t, os.WriteFile(signatureVectors, got, 0o644))
	}
	want, err := os.ReadFile(signatureVectors)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "the signer changed: rerun with -update-vectors and check every client's receiver")
}
