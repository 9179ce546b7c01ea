package httptransport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// TestDerivedIDsRefused: a client may not choose the id of a schedule's
// slot, a dead-letter notice or another topic's unique key, whether by
// push, replace or batch: 400 on field id, and nothing is stored. (With
// one, a push token blocked the slots of another topic's schedule.)
func TestDerivedIDsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	slot := b.clock.Now().Add(time.Hour)
	for _, id := range []string{core.ScheduleID("nightly", slot), core.NoticeID("job-1", slot), core.KeyID("other", "k")} {
		body := fmt.Sprintf(`{"topic": "mine", "id": %q, "delay": "1h"}`, id)
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs", body), http.StatusBadRequest, "invalid_argument", "id")
		requireError(t, b.do(t, http.MethodPut, "/v1/jobs/"+id, body), http.StatusBadRequest, "invalid_argument", "id")
		res := b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs": [`+body+`, {"topic": "mine"}]}`)
		requireStatus(t, res, http.StatusOK)
		results := res.object(t)["results"].([]any)
		e, _ := results[0].(map[string]any)["error"].(map[string]any)
		require.Equal(t, "invalid_argument", e["code"], "%s", res.body)
		require.Equal(t, "id", e["field"])
		require.NotContains(t, results[1], "error", "the other job of the batch is taken")
		requireError(t, b.do(t, http.MethodGet, "/v1/jobs/"+id, nil), http.StatusNotFound, "not_found", "")
	}
}

// TestImportDerivedIDs: an import takes a job with an id of a derived form
// only from an admin for every topic (a restricted admin once imported
// another topic's unique-key id into its own topic, holding that key), and
// a k- id only when it is the job's own topic and key's, for every token;
// both are failed lines with a reason, not skips.
func TestImportDerivedIDs(t *testing.T) {
	t.Parallel()
	tokens := adminTokens(t)
	b := setup(t, func(c *setupConfig) { c.tokens = tokens })
	now := rfc3339ms(b.clock.Now())
	line := func(id, topic, key string) string {
		return fmt.Sprintf(`{"id":%q,"topic":%q,"key":%q,"run_at":%q,"state":"scheduled","ttr":"30s","max_attempts":3}`, id, topic, key, now)
	}
	slotID := core.ScheduleID("nightly", b.clock.Now())
	foreign := core.KeyID("mail", "m-1")
	restricted := b.importBody(t, strings.Join([]string{
		line(foreign, "orders.a", "m-1"),                       // another topic's key
		line(core.KeyID("orders.a", "o-1"), "orders.a", "o-1"), // its own key's: still not this token's
		line(slotID, "orders.a", ""),
		line("plain-1", "orders.a", ""),
	}, "\n"), bearer(ordersAdmin)...)
	require.Equal(t, 1, restricted.Imported, "%+v", restricted)
	require.Equal(t, 0, restricted.Skipped)
	require.Equal(t, 3, restricted.Failed)
	for i, e := range restricted.Errors {
		require.Equal(t, i+1, e.Line)
		require.Equal(t, "permission_denied", e.Error.Code)
		require.NotContains(t, e.Error.Message, "mail", "the message names no other topic")
	}

	// A key's id that is not the job's own is refused to every token.
	all := b.importBody(t, strings.Join([]string{
		line(foreign, "orders.a", "m-1"),
		line(foreign, "mail", "m-2"),
		line(core.KeyID("mail", "m-1"), "mail", "m-1"),
		line(slotID, "reports", ""),
	}, "\n"), bearer(adminSecret)...)
	require.Equal(t, 2, all.Imported)
	require.Equal(t, 2, all.Failed)
	for i, e := range all.Errors {
		require.Equal(t, i+1, e.Line)
		require.Equal(t, "invalid_argument", e.Error.Code)
		require.Equal(t, "id", e.Error.Field)
	}
	get := func(id string) string {
		res := b.do(t, http.MethodGet, "/v1/jobs/"+id, nil, bearer(adminSecret)...)
		requireStatus(t, res, http.StatusOK)
		return res.object(t)["topic"].(string)
	}
	require.Equal(t, "mail", get(foreign), "the key's job is its own topic's")
	require.Equal(t, "reports", get(slotID), "an admin for every topic restores slots' jobs")
}
