package httptransport_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/keyring"
)

const (
	ringK1 = "k1 AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n"
	ringK2 = "k2 AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=\n"
	marker = "MARKER-77aa"
)

func parseRing(t *testing.T, text string) *keyring.Ring {
	t.Helper()
	r, err := keyring.Parse([]byte(text))
	require.NoError(t, err)
	return r
}

func withRing(r *keyring.Ring) func(*setupConfig) { return func(c *setupConfig) { c.ring = r } }

// exportLines answers GET path as NDJSON lines.
func exportLines(t *testing.T, b *testBundle, path string) [][]byte {
	t.Helper()
	res := b.do(t, http.MethodGet, path, nil)
	requireStatus(t, res, http.StatusOK)
	return bytes.Split(bytes.TrimSpace(res.body), []byte("\n"))
}

// TestExportSealed: with encryption at rest an export holds the bodies
// sealed, in clear only when asked, and an import into a service with the
// key opens them; one without encryption refuses them.
func TestExportSealed(t *testing.T) {
	t.Parallel()
	ring := parseRing(t, ringK1)
	b := setup(t, withRing(ring))
	requireStatus(t, b.do(t, http.MethodPut, "/v1/schedules/nightly", `{"cron":"0 3 * * *","topic":"t","job":{"body":"`+marker+`"}}`), http.StatusOK)
	id := b.push(t, `{"topic":"t","body":{"email":"`+marker+`"},"delay":"1h"}`)

	sealed := exportLines(t, b, "/v1/export")
	require.Len(t, sealed, 2, "the schedule, then the job")
	require.NotContains(t, string(bytes.Join(sealed, nil)), marker)
	var line struct{ Body json.RawMessage }
	require.NoError(t, json.Unmarshal(sealed[1], &line))
	key, ok := keyring.BodyKey(line.Body)
	require.True(t, ok, "%s", line.Body)
	require.Equal(t, "k1", key)
	plain := exportLines(t, b, "/v1/export?plaintext=true")
	require.Contains(t, string(plain[0]), marker)
	require.Contains(t, string(plain[1]), marker)

	other := setup(t, withRing(ring))
	res := other.do(t, http.MethodPost, "/v1/import", bytes.Join(sealed, []byte("\n")))
	requireStatus(t, res, http.StatusOK)
	require.EqualValues(t, 2, res.object(t)["imported"], "%s", res.body)
	require.Equal(t, map[string]any{"email": marker}, other.getJob(t, id)["body"])
	sc := other.do(t, http.MethodGet, "/v1/schedules/nightly", nil)
	requireStatus(t, sc, http.StatusOK)
	require.Equal(t, marker, sc.object(t)["job"].(map[string]any)["body"])

	off := setup(t)
	res = off.do(t, http.MethodPost, "/v1/import", bytes.Join(sealed, []byte("\n")))
	requireStatus(t, res, http.StatusOK)
	require.EqualValues(t, 2, res.object(t)["failed"], "%s", res.body)
	require.Contains(t, string(res.body), `sealed with key \"k1\" and encryption at rest is off`)
}

// TestRekeyPages: POST /v1/rekey by pages seals every job with the
// current key, and says when the pass is over.
func TestRekeyPages(t *testing.T) {
	t.Parallel()
	b := setup(t, withRing(parseRing(t, ringK2+ringK1)))
	old := keyring.New(b.store, keyring.Config{Ring: parseRing(t, ringK1)})
	var ids []string
	for range 5 {
		j := storetest.NewJob("t", time.Now().Add(time.Hour)) // ahead of the fake clock, which starts at the real time
		j.Body = json.RawMessage(`"` + marker + `"`)
		storetest.Put(t, t.Context(), old, j)
		ids = append(ids, j.ID)
	}
	var rekeyed, pages int
	req := map[string]any{"limit": 2}
	for {
		res := b.do(t, http.MethodPost, "/v1/rekey", req)
		requireStatus(t, res, http.StatusOK)
		var page struct {
			Scanned, Rekeyed int
			NextAfter        string `json:"next_after"`
		}
		require.NoError(t, json.Unmarshal(res.body, &page))
		require.LessOrEqual(t, page.Scanned, 2)
		rekeyed += page.Rekeyed
		pages++
		if page.NextAfter == "" {
			break
		}
		req["after"] = page.NextAfter
	}
	require.Equal(t, 5, rekeyed)
	require.GreaterOrEqual(t, pages, 3)
	for _, id := range ids {
		raw, err := b.store.GetJob(t.Context(), id)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(raw.Body), `"dqenc1:k2:`), "%s", raw.Body)
		require.Equal(t, core.StateScheduled, raw.State, "run_at is ahead of the fake clock")
		require.Zero(t, raw.Attempt)
		require.Equal(t, marker, b.getJob(t, id)["body"])
	}
	res := b.do(t, http.MethodPost, "/v1/rekey", map[string]any{"after": "not-a-cursor"})
	requireError(t, res, http.StatusBadRequest, "invalid_argument", "after")
}
