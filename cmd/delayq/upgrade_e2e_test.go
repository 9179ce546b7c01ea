package main

import (
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// previousBin is the variable naming the binary of the release before this
// tree, which TestE2EUpgrade upgrades from (`task upgrade-check` builds it
// from a git revision and sets it).
const previousBin = "DELAYQ_PREVIOUS_BIN"

// TestE2EUpgrade upgrades a deployment from the previous release to this
// tree and back, on every backend:
//
//   - redis, redis-cluster, nats-cluster: three instances of the previous
//     release under load are restarted one at a time on this tree, with the
//     load on for 20 s after each restart (60 s, 40 of them with both
//     versions serving one backend), losing no job answered 2xx and
//     delivering none twice (TestE2ERollingRestart's checks); then one
//     instance goes back to the previous release (the downgrade);
//   - local: the previous release writes jobs in each state, a topic's
//     configuration and a schedule into a data directory, this tree reads
//     them all, then the previous release starts on it again.
//
// A downgrade either works (the previous release serves, and a job pushed
// through it is delivered) or is refused: the previous release exits
// non-zero, saying in its log that it does not know the data's format.
//
// It needs the previous release's binary in DELAYQ_PREVIOUS_BIN, so it runs
// at a release and with every change of stored format (`task
// upgrade-check`), not in CI, whose checkout may lack the revision.
func TestE2EUpgrade(t *testing.T) {
	prev := os.Getenv(previousBin)
	if prev == "" {
		t.Skipf("%s is not set: `task upgrade-check` builds the previous release and runs this test", previousBin)
	}
	t.Parallel()
	onSharedBackends(t, func(t *testing.T, args ...string) {
		srvs := rollingRestart(t, rollout{from: prev, to: binary(t), hold: 20 * time.Second, env: "DELAYQ_UPGRADE_REPORT"}, args...)
		putTopicDowngrade(t, srvs[0])
		require.Equal(t, 0, srvs[0].signal(syscall.SIGTERM, 30*time.Second))
		downgrade(t, prev, args...)
	})
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		args := []string{"--backend", "local", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-listen", "off"}
		old := startServerBin(t, prev, args...)
		api := newCaller(t, old.HTTPURL)
		api.callJSON(http.MethodPut, "/v1/topics/e2e.upgrade", map[string]any{"max_attempts": 2}, http.StatusOK, nil)
		api.callJSON(http.MethodPut, "/v1/schedules/e2e-upgrade", map[string]any{
			"cron": "@every 1h", "topic": "e2e.upgrade.slots", "job": map[string]any{"body": "slot"},
		}, http.StatusOK, nil)
		// Each job in a topic of its own, so that a claim takes it.
		for _, id := range []string{"later", "due", "held", "dead", "done"} {
			job := map[string]any{"id": id, "topic": "e2e.upgrade." + id, "body": id, "max_attempts": 2, "ttr": "1h"}
			if id == "later" {
				job["delay"] = "1h"
			}
			api.callJSON(http.MethodPost, "/v1/jobs", job, http.StatusCreated, nil)
		}
		claimOne := func(id string) delivery {
			ds := api.claim("e2e.upgrade."+id, 1, 5*time.Second)
			require.Len(t, ds, 1, "a claim of %q", id)
			return ds[0]
		}
		// held stays reserved, with a lease of an hour; dead fails both
		// its attempts.
		claimOne("held")
		for _, errText := range []string{"first", "second"} {
			d := claimOne("dead")
			api.callJSON(http.MethodPost, "/v1/jobs/dead/nack", map[string]any{"lease": d.Lease, "delay": "0s", "error": errText}, http.StatusNoContent, nil)
		}
		d := claimOne("done")
		api.callJSON(http.MethodPost, "/v1/jobs/done/ack", map[string]any{"lease": d.Lease}, http.StatusNoContent, nil)

		states := map[string]string{"later": "scheduled", "due": "ready", "held": "reserved", "dead": "dead", "done": "done"}
		checkStates := func(api *apiCaller) {
			for id, want := range states {
				var job struct{ State string }
				api.callJSON(http.MethodGet, "/v1/jobs/"+id, nil, http.StatusOK, &job)
				require.Equal(t, want, job.State, "job %q", id)
			}
			var topic struct {
				MaxAttempts int `json:"max_attempts"`
			}
			api.callJSON(http.MethodGet, "/v1/topics/e2e.upgrade", nil, http.StatusOK, &topic)
			require.Equal(t, 2, topic.MaxAttempts)
			api.callJSON(http.MethodGet, "/v1/schedules/e2e-upgrade", nil, http.StatusOK, nil)
		}
		checkStates(api)
		require.Equal(t, 0, old.signal(syscall.SIGTERM, 30*time.Second))

		cur := startServerBin(t, binary(t), args...)
		checkStates(newCaller(t, cur.HTTPURL))
		putTopicDowngrade(t, cur)
		require.Equal(t, 0, cur.signal(syscall.SIGTERM, 30*time.Second))
		downgrade(t, prev, args...)
	})
}

// downgradeTopic is the topic whose configuration this tree writes before
// a downgrade and the previous release must read after it.
const downgradeTopic = "e2e.downgrade"

// putTopicDowngrade configures downgradeTopic through srv, an instance of
// this tree, with 4 attempts, and pushes the job "before-downgrade" to it,
// due in an hour: what the previous release must read after a downgrade.
func putTopicDowngrade(t *testing.T, srv *serverProc) {
	t.Helper()
	api := newCaller(t, srv.HTTPURL)
	api.callJSON(http.MethodPut, "/v1/topics/"+downgradeTopic, map[string]any{"max_attempts": 4}, http.StatusOK, nil)
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"id": "before-downgrade", "topic": downgradeTopic, "body": 0, "delay": "1h", "expires_in": "1h"}, http.StatusCreated, nil)
}

// downgrade starts the previous release prev on a backend this tree ran
// on, and requires either that it works (it reads the configuration of
// downgradeTopic and the job this tree wrote, and a job pushed through it
// is claimed and acknowledged) or that it refuses to start with a message about the
// data's format.
func downgrade(t *testing.T, prev string, args ...string) {
	t.Helper()
	srv, err := tryStartServerBin(t, prev, args...)
	if err != nil {
		require.ErrorContains(t, err, "exited before it was ready")
		require.Regexp(t, `(?i)format|layout|version`, err.Error(), "a refusal names the data's format")
		t.Logf("downgrade refused, as allowed: %v", err)
		return
	}
	api := newCaller(t, srv.HTTPURL)
	var cfg struct {
		MaxAttempts int `json:"max_attempts"`
	}
	api.callJSON(http.MethodGet, "/v1/topics/"+downgradeTopic, nil, http.StatusOK, &cfg)
	require.Equal(t, 4, cfg.MaxAttempts, "the configuration this tree wrote, read by the previous release")
	var before struct{ State string }
	api.callJSON(http.MethodGet, "/v1/jobs/before-downgrade", nil, http.StatusOK, &before)
	require.Equal(t, "scheduled", before.State, "the job this tree wrote, read by the previous release")
	var job struct {
		MaxAttempts int `json:"max_attempts"`
	}
	api.callJSON(http.MethodPost, "/v1/jobs", map[string]any{"id": "after-downgrade", "topic": downgradeTopic, "body": 1}, http.StatusCreated, nil)
	api.callJSON(http.MethodGet, "/v1/jobs/after-downgrade", nil, http.StatusOK, &job)
	require.Equal(t, 4, job.MaxAttempts, "the job takes the topic's configuration")
	ds := api.claim(downgradeTopic, 1, 5*time.Second)
	require.Len(t, ds, 1)
	require.Equal(t, "after-downgrade", ds[0].ID)
	api.callJSON(http.MethodPost, "/v1/jobs/after-downgrade/ack", map[string]any{"lease": ds[0].Lease}, http.StatusNoContent, nil)
	t.Log("downgrade works: the previous release serves the data this tree wrote")
}
