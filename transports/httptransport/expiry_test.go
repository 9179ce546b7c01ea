package httptransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJobExpiry: expires_at and expires_in are taken at push and in a
// batch, shown by GET and by the topic's default; bad ones are 400s that
// store nothing; a pull claim of an expired job gets nothing and the job
// is dead with last_error "expired".
func TestJobExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	at := now.Add(time.Hour)
	id := b.push(t, fmt.Sprintf(`{"topic":"t","expires_at":%q}`, at.Format(time.RFC3339Nano)))
	require.Equal(t, rfc3339ms(at), b.getJob(t, id)["expires_at"])
	id = b.push(t, `{"topic":"t","delay":"10m","expires_in":"5m"}`)
	require.Equal(t, rfc3339ms(now.Add(15*time.Minute)), b.getJob(t, id)["expires_at"])
	id = b.push(t, `{"topic":"t"}`)
	require.NotContains(t, b.getJob(t, id), "expires_at", "a job without expiry")

	for _, c := range []struct{ body, field, says string }{
		{fmt.Sprintf(`{"topic":"t","expires_at":%q}`, now.Add(-time.Second).Format(time.RFC3339)), "expires_at", "is in the past"},
		{fmt.Sprintf(`{"topic":"t","delay":"1h","expires_at":%q}`, now.Add(time.Minute).Format(time.RFC3339)), "expires_at", "must be after run_at"},
		{`{"topic":"t","expires_in":"5m","expires_at":"2030-01-01T00:00:00Z"}`, "expires_in", "exclusive"},
		{`{"topic":"t","expires_in":"0s"}`, "expires_in", "positive"},
		{`{"topic":"t","expires_in":"soon"}`, "expires_in", ""},
	} {
		e := requireError(t, b.do(t, http.MethodPost, "/v1/jobs", c.body), http.StatusBadRequest, "invalid_argument", c.field)
		require.Contains(t, e["error"].(map[string]any)["message"], c.says, c.body)
		res := b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[`+c.body+`]}`)
		requireStatus(t, res, http.StatusOK)
		var batch struct{ Results []map[string]any }
		require.NoError(t, json.Unmarshal(res.body, &batch))
		require.Equal(t, c.field, batch.Results[0]["error"].(map[string]any)["field"], c.body)
	}
	st, err := b.store.GetTopicState(t.Context(), "t")
	require.NoError(t, err)
	require.Equal(t, int64(3), st.Counts.Scheduled+st.Counts.Ready, "bad pushes stored nothing")

	// The topic's default, and a pull claim that meets an expired job.
	res := b.do(t, http.MethodPut, "/v1/topics/short", `{"expires_in":"1m"}`)
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, "1m0s", res.object(t)["expires_in"])
	requireError(t, b.do(t, http.MethodPut, "/v1/topics/short", `{"expires_in":"-1s"}`), http.StatusBadRequest, "invalid_argument", "expires_in")
	id = b.push(t, `{"topic":"short"}`)
	require.Equal(t, rfc3339ms(now.Add(time.Minute)), b.getJob(t, id)["expires_at"])
	b.clock.Advance(time.Minute)
	require.Empty(t, b.claim(t, "short", 10))
	dead := b.getJob(t, id)
	require.Equal(t, "dead", dead["state"])
	require.Equal(t, "expired", dead["last_error"])
}
