package httptransport_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTopicRetention: a topic's retention is shown, goes with the jobs
// pushed from then on (GET and export show it, import keeps it), and a
// finished job is found until it ends, not after; bad ones are 400s.
func TestTopicRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPut, "/v1/topics/t", `{"retention":"2m"}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "2m0s", res.object(t)["retention"])
	for _, bad := range []string{`"1500ms"`, `"0.5s"`, `"367d"`, `"8800h"`, `"-1s"`, `"soon"`} {
		requireError(t, b.do(t, http.MethodPut, "/v1/topics/t", `{"retention":`+bad+`}`), http.StatusBadRequest, "invalid_argument", "retention")
	}
	res = b.do(t, http.MethodGet, "/v1/topics/t", nil)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "2m0s", res.object(t)["retention"], "a refused change changes nothing")

	other := b.push(t, `{"topic":"other"}`)
	require.NotContains(t, b.getJob(t, other), "retention", "the server's")
	leases := b.claimLeases(t, "", "kept")
	require.Equal(t, "2m0s", b.getJob(t, "kept")["retention"])
	_, lines := b.exportLines(t)
	require.Equal(t, "2m0s", lines["kept"]["retention"])
	dst := setup(t)
	raw, _ := b.exportLines(t)
	require.Equal(t, 2, dst.importBody(t, string(raw), "Content-Type: application/x-ndjson").Imported)
	require.Equal(t, "2m0s", dst.getJob(t, "kept")["retention"], "import keeps it")

	requireStatus(t, b.do(t, http.MethodPost, "/v1/jobs/kept/ack", `{"lease":"`+leases["kept"]+`"}`), http.StatusNoContent)
	b.clock.Advance(2*time.Minute - time.Millisecond)
	require.Equal(t, "done", b.getJob(t, "kept")["state"])
	b.clock.Advance(time.Millisecond)
	requireError(t, b.do(t, http.MethodGet, "/v1/jobs/kept", nil), http.StatusNotFound, "not_found", "")
}
