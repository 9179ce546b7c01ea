package storetest

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/core"
)

// DrainParams configure Drain.
type DrainParams struct {
	// Topic is the topic claimed from.
	Topic string
	// N is how many jobs to claim.
	N int
	// Claimers is how many claims wait at once, each of up to Max jobs and
	// for up to Wait.
	Claimers, Max int
	Wait          time.Duration
	// KeyConcurrency, Fair and KeyRate are each claim's
	// ClaimJobsParams.KeyConcurrency, Fair and KeyRate.
	KeyConcurrency int
	Fair           bool
	KeyRate        core.Rate
	// Ackers is how many goroutines acknowledge the claimed jobs, off the
	// claim loops, as core's dispatcher does. Defaults to 64.
	Ackers int
	// Seen, when set, gets each claim's jobs and the moment the claim
	// returned; calls do not overlap.
	Seen func(at time.Time, jobs []*core.Job)
}

// DrainResult is what Drain did.
type DrainResult struct {
	// Claimed counts the jobs claimed; LastClaim is when the N-th was.
	Claimed   int
	LastClaim time.Time
	// LastAck is when the last acknowledgement ended.
	LastAck time.Time
}

// Drain claims and acknowledges N due jobs of a topic, as a pool of
// consumers would, for the stores' benchmarks of bursts and lateness. It
// returns once N were claimed and acknowledged, or when ctx ends.
func Drain(ctx context.Context, s core.Store, p DrainParams) DrainResult {
	if p.Ackers == 0 {
		p.Ackers = 64
	}
	var (
		mu     sync.Mutex
		res    DrainResult
		claims sync.WaitGroup
		ackers sync.WaitGroup
		toAck  = make(chan *core.Job, p.N)
	)
	for range p.Ackers {
		ackers.Go(func() {
			for j := range toAck {
				_, _ = s.AckJob(context.WithoutCancel(ctx), &core.AckJobParams{ID: j.ID, Lease: j.Lease})
			}
		})
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range p.Claimers {
		claims.Go(func() {
			for cctx.Err() == nil {
				// An instance and a consumer's address, as an engine's pull
				// claims name them: the attempts keep both.
				got, err := s.ClaimJobs(cctx, &core.ClaimJobsParams{Topic: p.Topic, Max: p.Max, Wait: p.Wait, KeyConcurrency: p.KeyConcurrency,
					Fair: p.Fair, KeyRate: p.KeyRate, Via: core.ViaPull, Instance: "delayq-0", Consumer: "10.0.3.7:51234"})
				at := time.Now()
				if err != nil {
					return
				}
				mu.Lock()
				if p.Seen != nil && len(got) > 0 {
					p.Seen(at, got)
				}
				res.Claimed += len(got)
				if res.Claimed >= p.N && res.LastClaim.IsZero() {
					res.LastClaim = at
					cancel()
				}
				mu.Unlock()
				for _, j := range got {
					toAck <- j
				}
			}
		})
	}
	claims.Wait()
	close(toAck)
	ackers.Wait()
	res.LastAck = time.Now()
	return res
}

// IntakeJobs is how many jobs Intake puts when asked for about n: whole
// batches, as many for each caller, at least one each.
func IntakeJobs(callers, batch, n int) int { return max(n/batch/callers, 1) * batch * callers }

// Intake puts jobs due in an hour from callers goroutines, batch jobs per
// PutJobs call, about n jobs in all (IntakeJobs), for the stores' intake
// benchmarks; it returns the jobs stored per second and fails tb on an
// error.
func Intake(tb testing.TB, s core.Store, callers, batch, n int) float64 {
	ctx := context.Background()
	per := IntakeJobs(callers, batch, n) / batch / callers
	start := time.Now()
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range callers {
		wg.Go(func() {
			for range per {
				jobs := make([]*core.Job, batch)
				for i := range jobs {
					jobs[i] = NewJob("bench", time.Now().Add(time.Hour))
					jobs[i].Key = BenchKey(int(seq.Add(1)))
				}
				res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: jobs})
				if err == nil {
					err = res[0].Err
				}
				if err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(IntakeJobs(callers, batch, n)) / time.Since(start).Seconds()
}

// BenchKey is the business key of the i-th job of a benchmark: "order-<i>"
// with DELAYQ_BENCH_KEYS set (a key per job, as order-closing jobs carry),
// else none.
func BenchKey(i int) string {
	if os.Getenv("DELAYQ_BENCH_KEYS") == "" {
		return ""
	}
	return "order-" + strconv.Itoa(i)
}

// EnvInt is the positive integer in the environment variable name, or
// def: the benchmarks' knobs (rates, durations, counts).
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
