package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/redisstore/redistest"
	"github.com/delayq/delayq/core"
)

// TestRestartLosesNothing kills redis-server with SIGKILL while jobs are
// ready, scheduled and reserved, starts it again on the same data
// directory, and requires every job to be delivered afterwards: the
// scheduled ones when due, the reserved ones once their lease expired. It
// runs for AOF with appendfsync always and everysec: either way every write
// Redis acknowledged was already written to the file (always: and fsynced),
// so a killed process loses nothing; a power cut is another matter (see
// docs/backends.md). The store stays open through the restart: it
// reconnects, resubscribes and looks at every shard again.
func TestRestartLosesNothing(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	for _, fsync := range []string{"always", "everysec"} {
		t.Run("aof="+fsync, func(t *testing.T) {
			t.Parallel()
			srv, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: fsync})
			require.NoError(t, err)
			t.Cleanup(srv.Kill)
			prefix := uniquePrefix(t.Name())
			s1 := openStore(t, srv.URL(), prefix)
			ctx := t.Context()

			const topic = "restart"
			var all []*core.Job
			for i := range 600 { // ready
				all = append(all, job(topic, time.Duration(i-1000)*time.Millisecond))
			}
			for i := range 900 { // scheduled over the 1.5 s after the restart
				all = append(all, job(topic, time.Second+time.Duration(i)*time.Millisecond))
			}
			var reserved []*core.Job
			for range 300 {
				j := job(topic+".reserved", -time.Second)
				j.TTR = time.Second
				reserved = append(reserved, j)
			}
			for i := 0; i < len(all); i += 500 {
				put(t, s1, all[i:i+500]...)
			}
			put(t, s1, reserved...)
			var leased []*core.Job
			for len(leased) < len(reserved) {
				got := claim(t, s1, topic+".reserved", 100, 2*time.Second)
				require.NotEmpty(t, got)
				leased = append(leased, got...)
			}

			// A claim waiting through the restart is woken by a job put
			// after it, through the other instance.
			type result struct {
				jobs []*core.Job
				err  error
			}
			waiting := make(chan result, 1)
			go func() {
				jobs, err := s1.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic + ".wake", Max: 1, Wait: 20 * time.Second})
				waiting <- result{jobs, err}
			}()
			require.Eventually(t, func() bool { return s1.claimWaiting(topic + ".wake") }, 5*time.Second, time.Millisecond)

			srv.Kill()
			require.ErrorIs(t, s1.Ping(ctx), core.ErrUnavailable, "ping while Redis is down")
			_, err = s1.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{job(topic, 0)}})
			require.ErrorIs(t, err, core.ErrUnavailable, "put while Redis is down")
			require.NoError(t, srv.Start())
			s2 := openStore(t, srv.URL(), prefix) // a second instance, opened after the restart
			wake := job(topic+".wake", 0)
			put(t, s2, wake)
			r := <-waiting
			require.NoError(t, r.err)
			require.Len(t, r.jobs, 1, "the claim waiting through the restart")
			require.Equal(t, wake.ID, r.jobs[0].ID)

			want := map[string]bool{}
			for _, j := range append(all, reserved...) {
				want[j.ID] = true
			}
			var (
				mu  sync.Mutex
				got = map[string]*core.Job{}
				wg  sync.WaitGroup
			)
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for _, s := range []*Store{s1, s2} {
				for _, tp := range []string{topic, topic + ".reserved"} {
					wg.Go(func() {
						for cctx.Err() == nil {
							jobs, err := s.ClaimJobs(cctx, &core.ClaimJobsParams{Topic: tp, Max: 50, Wait: time.Second})
							if err != nil {
								continue // Redis may still be loading or reconnecting
							}
							mu.Lock()
							for _, j := range jobs {
								// The first delivery after the restart is the
								// one judged: under load an ack may come after
								// the job's 1 s ttr, and the job be delivered
								// once more.
								if got[j.ID] == nil {
									got[j.ID] = j
								}
							}
							if len(got) == len(want) {
								cancel()
							}
							mu.Unlock()
							for _, j := range jobs {
								_, _ = s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})
							}
						}
					})
				}
			}
			wg.Wait()
			var missing []string
			for id := range want {
				if got[id] == nil {
					missing = append(missing, id)
				}
			}
			require.Empty(t, missing, "jobs lost over the restart")
			require.Len(t, got, len(want))
			for _, j := range reserved {
				require.Equal(t, 2, got[j.ID].Attempt, "reserved job %s redelivered once its lease expired", j.ID)
			}
			for _, j := range leased {
				require.ErrorIs(t, settleErr(s2.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})), core.ErrLeaseLost)
			}
		})
	}
}

// TestTwoInstancesHeavy puts 5 000 jobs through two stores on one Redis
// (standalone and cluster), half due at once and half due over the next
// second so that both stores wait for due times, and claims them with 4 claims per
// store: every job is delivered exactly once while its lease holds.
func TestTwoInstancesHeavy(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"standalone", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			url := standaloneURL(t)
			if kind == "cluster" {
				url = clusterURL(t)
			}
			prefix := uniquePrefix(t.Name())
			stores := []*Store{openStore(t, url, prefix), openStore(t, url, prefix)}
			const (
				topic = "heavy"
				n     = 5000
			)
			var jobs []*core.Job
			for i := range n {
				delay := -time.Second
				if i%2 == 1 {
					delay = time.Duration(i%1000) * time.Millisecond
				}
				jobs = append(jobs, job(topic, delay))
			}
			var pw sync.WaitGroup
			for si, s := range stores {
				pw.Go(func() {
					for i := si * 100; i < n; i += 200 {
						put(t, s, jobs[i:i+100]...)
					}
				})
			}
			pw.Wait()

			var (
				mu      sync.Mutex
				claimed = map[string]int{}
				leases  = map[string]*core.Job{}
				dup     []string
				wg      sync.WaitGroup
			)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			for si, s := range stores {
				for range 4 {
					wg.Go(func() {
						for ctx.Err() == nil {
							got, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic, Max: 10, Wait: 2 * time.Second})
							if err != nil {
								t.Errorf("store %d: %v", si, err)
								return
							}
							mu.Lock()
							for _, j := range got {
								claimed[j.ID]++
								if claimed[j.ID] > 1 {
									dup = append(dup, fmt.Sprintf("%s by store %d (attempt %d)", j.ID, si, j.Attempt))
								}
								leases[j.ID] = j
							}
							if len(claimed) == n {
								cancel()
							}
							mu.Unlock()
							if len(got) == 0 {
								return
							}
						}
					})
				}
			}
			wg.Wait()
			require.Empty(t, dup, "jobs delivered twice while their lease held")
			require.Len(t, claimed, n)
			for _, j := range jobs {
				require.Equal(t, 1, claimed[j.ID], "job %s", j.ID)
			}
			tp, err := stores[1].GetTopicState(t.Context(), topic)
			require.NoError(t, err)
			require.Equal(t, core.Counts{Reserved: n}, tp.Counts)
			for i, j := range jobs {
				l := leases[j.ID]
				require.NoError(t, settleErr(stores[i%2].AckJob(t.Context(), &core.AckJobParams{ID: l.ID, Lease: l.Lease})))
			}
			for _, s := range stores {
				require.Empty(t, claim(t, s, topic, 10, 200*time.Millisecond))
			}
		})
	}
}

// claimWaiting reports whether a claim of topic has read every shard and
// found nothing due: it waits for a wake-up or a due time without calling
// Redis.
func (s *Store) claimWaiting(topic string) bool {
	now := s.serverNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.topics[topic]
	if ts == nil || len(ts.sem) > 0 {
		return false
	}
	for _, at := range ts.due {
		if at <= now {
			return false
		}
	}
	return true
}

// TestAppendOnly reads whether a real redis-server keeps an append-only
// file: not without one, yes with one, and again not once it is turned off
// at run time.
func TestAppendOnly(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	for fsync, want := range map[string]bool{"": false, "everysec": true} {
		srv, err := redistest.StartServer(redistest.Options{Dir: t.TempDir(), AppendFsync: fsync})
		require.NoError(t, err)
		t.Cleanup(srv.Kill)
		c := newClient(t, srv.URL())
		on, err := AppendOnly(t.Context(), c)
		require.NoError(t, err)
		require.Equal(t, want, on, "appendfsync %q", fsync)
		if on {
			require.NoError(t, c.ConfigSet(t.Context(), "appendonly", "no").Err())
			on, err = AppendOnly(t.Context(), c)
			require.NoError(t, err)
			require.False(t, on)
		}
	}
}
