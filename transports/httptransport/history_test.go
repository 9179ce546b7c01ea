package httptransport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJobHistoryOverHTTP: GET /v1/jobs/{id} shows the job's attempts,
// oldest first, each with its times, via, consumer, outcome and error; the
// attempt in progress has no ended_at and an empty outcome. Its trail
// tells the push and each delivery with its outcome.
func TestJobHistoryOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.push(t, `{"topic":"hist","ttr":"10s","max_attempts":3}`)
	require.NotContains(t, b.getJob(t, id), "history", "a job never delivered has none")

	start := b.clock.Now()
	d := b.claim(t, "hist", 1)
	require.Len(t, d, 1)
	require.NotContains(t, d[0], "history", "a delivery does not carry the history")
	consumer := func(k int) string {
		t.Helper()
		h := b.getJob(t, id)["history"].([]any)
		c, _ := h[k].(map[string]any)["consumer"].(string)
		require.True(t, strings.HasPrefix(c, "127.0.0.1:"), "the pull consumer's address: %q", c)
		return c
	}
	first := consumer(0)
	require.Equal(t, []any{map[string]any{"attempt": float64(1), "started_at": rfc3339ms(start), "via": "pull", "consumer": first, "outcome": ""}},
		b.getJob(t, id)["history"])

	b.clock.Advance(2 * time.Second)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/nack", map[string]any{"lease": d[0]["lease"], "error": "boom"}),
		http.StatusNoContent)
	retried := b.clock.Now()
	b.clock.Advance(time.Hour)
	d = b.claim(t, "hist", 1)
	require.Len(t, d, 1)
	second := b.clock.Now()
	b.clock.Advance(time.Second)
	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/"+id+"/ack", map[string]any{"lease": d[0]["lease"]}), http.StatusNoContent)
	other := consumer(1)

	got := b.getJob(t, id)
	require.Equal(t, []any{
		map[string]any{"attempt": float64(1), "started_at": rfc3339ms(start), "ended_at": rfc3339ms(retried),
			"via": "pull", "consumer": first, "outcome": "retried", "error": "boom"},
		map[string]any{"attempt": float64(2), "started_at": rfc3339ms(second), "ended_at": rfc3339ms(second.Add(time.Second)),
			"via": "pull", "consumer": other, "outcome": "acked"},
	}, got["history"])
	require.Equal(t, []any{
		map[string]any{"at": rfc3339ms(start), "event": "created", "via": "http"},
		map[string]any{"at": rfc3339ms(start), "event": "delivered", "via": "pull", "consumer": first, "attempt": float64(1),
			"outcome": "retried", "ended_at": rfc3339ms(retried), "error": "boom"},
		map[string]any{"at": rfc3339ms(second), "event": "delivered", "via": "pull", "consumer": other, "attempt": float64(2),
			"outcome": "acked", "ended_at": rfc3339ms(second.Add(time.Second))},
	}, got["trail"])
}

// TestImportHistory: an import line's history is kept; one that names an
// unknown outcome or via, or misses started_at, fails alone.
func TestImportHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const line = `{"id":"h-%s","topic":"imp","key":"","body":null,"run_at":"2026-01-01T00:00:00.000Z","ttr":"30s","max_attempts":5,` +
		`"priority":0,"attempt":1,"state":"ready","created_at":"2026-01-01T00:00:00.000Z","last_error":"x","history":[%s]}`
	good := `{"attempt":1,"started_at":"2026-01-01T00:00:01.000Z","ended_at":"2026-01-01T00:00:02.500Z","via":"webhook","outcome":"retried","error":"x"}`
	body := fmtLines(line, "ok", good) +
		fmtLines(line, "outcome", `{"attempt":1,"started_at":"2026-01-01T00:00:01.000Z","via":"pull","outcome":"exploded"}`) +
		fmtLines(line, "via", `{"attempt":1,"started_at":"2026-01-01T00:00:01.000Z","via":"carrier-pigeon","outcome":"acked"}`) +
		fmtLines(line, "start", `{"attempt":1,"via":"pull","outcome":"acked"}`) +
		fmtLines(line, "field", `{"attempt":1,"started_at":"2026-01-01T00:00:01.000Z","via":"pull","outcome":"acked","extra":1}`)
	a := b.importBody(t, body)
	require.Equal(t, 1, a.Imported, "%+v", a)
	require.Equal(t, 4, a.Failed)
	for _, e := range a.Errors {
		require.Equal(t, "invalid_argument", e.Error.Code, "line %d", e.Line)
	}
	require.Equal(t, []any{map[string]any{"attempt": float64(1), "started_at": "2026-01-01T00:00:01.000Z", "ended_at": "2026-01-01T00:00:02.500Z",
		"via": "webhook", "outcome": "retried", "error": "x"}}, b.getJob(t, "h-ok")["history"])
}

func fmtLines(format, id, attempt string) string {
	return fmt.Sprintf(format, id, attempt) + "\n"
}
