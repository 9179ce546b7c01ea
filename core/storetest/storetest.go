package storetest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
)

// Harness opens stores of one backend for the suite.
type Harness struct {
	// Open returns a store over the namespace ns, a fresh empty namespace the
	// first time; opening ns again gives a second instance over the same data
	// (another delayq instance sharing the backend). The suite makes ns
	// unique per subtest, from [A-Za-z0-9_-] and at most 64 characters, and
	// closes every store it opens (with t.Cleanup), so Open need not.
	Open func(t *testing.T, ns string) core.Store
	// Durable is true when data survives closing every store of ns and
	// opening it again; the restart subtest runs only then.
	Durable bool
	// OpenRetention, when set, opens a store as Open does but with finished
	// jobs (done, cancelled) kept for retention, a few seconds, rather than
	// the backend's default; the FinishedRetention subtest runs only then.
	// It gets a namespace of its own, which Open never sees.
	OpenRetention func(t *testing.T, ns string, retention time.Duration) core.Store
	// OpenClock, when set, opens a store as Open does but on clock, a fake
	// clock the subtest advances: the subtests of the rate per key
	// (ClaimJobsParams.KeyRate), whose tokens come back with time, run
	// only then. It gets a namespace of its own, which Open never sees.
	OpenClock func(t *testing.T, ns string, clock core.Clock) core.Store
	// ListInStreamOrder is true when ListJobs lists in the order the jobs
	// got to where they are rather than by time (the NATS store): the
	// suite then checks what it lists and its paging, not the order.
	ListInStreamOrder bool
	// CountsLag is how long after a claim the store's counts may still
	// count its jobs ready (a NATS cluster, whose due messages go when the
	// consumer's acknowledgements are applied through the stream's Raft
	// group): the suite reads counts again until they match, for that
	// long at most. Zero: counts match as soon as the claim returns.
	CountsLag time.Duration
	// FinishedPerShard is true when the record of finished jobs keeps its
	// order per shard only (the Redis store over several shards): the
	// suite then checks each job's entries in order, not the whole.
	FinishedPerShard bool
	// FinishedSuperseded is true when an entry of the record of finished
	// jobs goes once its job moves on, requeued or its id reused (the NATS
	// store, whose record is the jobs' own messages): the suite then reads
	// such entries only while they are the job's last.
	FinishedSuperseded bool
}

// Tolerances of the suite.
const (
	// clockSlack is how far a time the store stamps (created_at,
	// lease_expires_at) may lie outside the interval the suite measured
	// around the call: clock granularity and storage precision.
	clockSlack = 50 * time.Millisecond
	// earlySlack is how much before its run_at a job may be reserved:
	// run_at has ms precision.
	earlySlack = time.Millisecond
	// maxLateness is how late after its run_at the store must reserve a
	// job for a waiting claim in the precision subtest; the claim's answer
	// may come up to maxReturnLateness after it, which adds the test
	// process's own scheduling on a loaded machine (a CI run saw a job
	// reserved 48 ms late answered 109 ms late).
	maxLateness       = 100 * time.Millisecond
	maxReturnLateness = 4 * maxLateness
	// waitSlack is how much earlier than its Wait an empty claim may come
	// back.
	waitSlack = 50 * time.Millisecond
	// idleTopic is a topic that never has jobs; claims on it let real time
	// pass.
	idleTopic = "storetest-idle"
)

type subtest struct {
	name string
	fn   func(t *testing.T, b *testBundle)
}

// subtests lists the suite, each a named subtest of Run.
var subtests = []subtest{
	{"PutGetRoundTrip", testPutGetRoundTrip},
	{"States", testStates},
	{"UnknownJob", testUnknownJob},
	{"OrderByRunAt", testOrderByRunAt},
	{"Priority", testPriority},
	{"PriorityKept", testPriorityKept},
	{"JobURLKept", testJobURLKept},
	{"ExpiresAtKept", testExpiresAtKept},
	{"ExpireJob", testExpireJob},
	{"Precision", testPrecision},
	{"ClaimMaxAndEmptyWait", testClaimMaxAndEmptyWait},
	{"ClaimWokenByPut", testClaimWokenByPut},
	{"ClaimContextDone", testClaimContextDone},
	{"TakeNow", testTakeNow},
	{"TakeNotify", testTakeNotify},
	{"TakeInFlight", testTakeInFlight},
	{"TakeResume", testTakeResume},
	{"TakeClose", testTakeClose},
	{"Cancel", testCancel},
	{"CancelRace", testCancelRace},
	{"CancelRunning", testCancelRunning},
	{"CreateConflict", testCreateConflict},
	{"CreateIfAbsent", testCreateIfAbsent},
	{"Replace", testReplace},
	{"ReadDuringPut", testReadDuringPut},
	{"Batch", testBatch},
	{"LeaseExpiryRedelivery", testLeaseExpiryRedelivery},
	{"LeaseLostAfterExpiry", testLeaseLostAfterExpiry},
	{"WrongLease", testWrongLease},
	{"TouchExtendsLease", testTouchExtendsLease},
	{"Retry", testRetry},
	{"RetryUnsent", testRetryUnsent},
	{"BuryAndDeadList", testBuryAndDeadList},
	{"DeadSince", testDeadSince},
	{"SettleResult", testSettleResult},
	{"AckBatch", testAckBatch},
	{"LeaseExpiryLastAttempt", testLeaseExpiryLastAttempt},
	{"Requeue", testRequeue},
	{"RewriteBody", testRewriteBody},
	{"History", testHistory},
	{"HistoryLeaseExpired", testHistoryLeaseExpired},
	{"HistoryBuryRequeue", testHistoryBuryRequeue},
	{"HistoryCap", testHistoryCap},
	{"HistoryReplace", testHistoryReplace},
	{"HistoryBytes", testHistoryBytes},
	{"ClaimOrigin", testClaimOrigin},
	{"Changes", testChanges},
	{"Counts", testCounts},
	{"FinishedCounts", testFinishedCounts},
	{"FinishedRetention", testFinishedRetention},
	{"JobRetention", testJobRetention},
	{"FinishedRecord", testFinishedRecord},
	{"FinishedConcurrent", testFinishedConcurrent},
	{"Then", testThen},
	{"Topics", testTopics},
	{"TopicIsolation", testTopicIsolation},
	{"FindByKey", testFindByKey},
	{"KeyOutlivesFinished", testKeyOutlivesFinished},
	{"ListJobs", testListJobs},
	{"ListManyJobs", testListManyJobs},
	{"ListWhileLeaving", testListWhileLeaving},
	{"CreateRace", testCreateRace},
	{"Records", testRecords},
	{"RecordsRace", testRecordsRace},
	{"RecordsRestart", testRecordsRestart},
	{"Pause", testPause},
	{"RateLimit", testRateLimit},
	{"InFlightMax", testInFlightMax},
	{"KeyConcurrencyOrder", testKeyConcurrencyOrder},
	{"KeyConcurrencyBound", testKeyConcurrencyBound},
	{"KeyConcurrencySlots", testKeyConcurrencySlots},
	{"KeyConcurrencyChanged", testKeyConcurrencyChanged},
	{"KeyConcurrencyHeldBack", testKeyConcurrencyHeldBack},
	{"KeyConcurrencyRestart", testKeyConcurrencyRestart},
	{"KeyConcurrencyRefused", testKeyConcurrencyRefused},
	{"FairOrder", testFairOrder},
	{"FairUnkeyed", testFairUnkeyed},
	{"FairKeyConcurrency", testFairKeyConcurrency},
	{"FairToggled", testFairToggled},
	{"FairChanged", testFairChanged},
	{"FairRefused", testFairRefused},
	{"PerKeyRateKeys", testPerKeyRateKeys},
	{"PerKeyRateUnkeyed", testPerKeyRateUnkeyed},
	{"PerKeyRateBurst", testPerKeyRateBurst},
	{"PerKeyRateKeyConcurrency", testPerKeyRateKeyConcurrency},
	{"PerKeyRateFair", testPerKeyRateFair},
	{"PerKeyRateChanged", testPerKeyRateChanged},
	{"PerKeyRateParked", testPerKeyRateParked},
	{"PerKeyRateRestart", testPerKeyRateRestart},
	{"PerKeyRateRefused", testPerKeyRateRefused},
	{"PauseTwoInstances", testPauseTwoInstances},
	{"TwoInstances", testTwoInstances},
	{"TwoInstancesWakeUp", testTwoInstancesWakeUp},
	{"Restart", testRestart},
	{"ManyJobs", testManyJobs},
	{"Close", testClose},
}

// Run runs the conformance suite against the backend that h opens. Every
// subtest calls t.Parallel and works in a namespace of its own.
func Run(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.Open, "storetest: Harness.Open is nil")
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			st.fn(t, setup(t, h))
		})
	}
	t.Run("ExportImport", func(t *testing.T) {
		t.Parallel()
		runExportImport(t, h)
	})
}

// NewJob returns a complete, valid job of topic due at runAt, as the engine
// hands jobs to a store: a new id, run_at in UTC at ms precision, a TTR of
// 30s, 5 attempts, a small JSON body, state scheduled and the change its
// push makes (created, over HTTP).
func NewJob(topic string, runAt time.Time) *core.Job {
	return &core.Job{
		ID:          core.NewID(),
		Topic:       topic,
		Body:        json.RawMessage(`{"n":1}`),
		RunAt:       core.StoreTime(runAt),
		TTR:         30 * time.Second,
		MaxAttempts: 5,
		State:       core.StateScheduled,
		Changes:     []core.Change{{Kind: core.ChangeCreated, Via: core.OriginHTTP}},
	}
}

// DueJob returns NewJob(topic, now): a job due at once.
func DueJob(topic string) *core.Job { return NewJob(topic, time.Now()) }

// testBundle is what one subtest works with.
type testBundle struct {
	h     Harness
	ns    string
	store core.Store
	ctx   context.Context
}

func setup(t *testing.T, h Harness) *testBundle {
	b := &testBundle{h: h, ns: namespace(t), ctx: t.Context()}
	b.store = b.open(t)
	return b
}

// open opens a store over the subtest's namespace, closed at cleanup.
func (b *testBundle) open(t *testing.T) core.Store {
	t.Helper()
	s := b.h.Open(t, b.ns)
	require.NotNil(t, s, "Harness.Open returned nil")
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// namespace returns a unique namespace for t: its name's last element, cut
// to 48 characters of [A-Za-z0-9_-], and 12 random characters.
func namespace(t *testing.T) string {
	name := t.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	clean := []byte{}
	for i := 0; i < len(name) && len(clean) < 48; i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			clean = append(clean, c)
		}
	}
	return string(clean) + "-" + strings.ToLower(rand.Text()[:12])
}

// put stores jobs on the bundle's store, requiring each to succeed.
func (b *testBundle) put(t *testing.T, jobs ...*core.Job) {
	t.Helper()
	Put(t, b.ctx, b.store, jobs...)
}

// Put stores jobs on s, requiring each to be created; the stores' own
// tests and benchmarks use it too.
func Put(t testing.TB, ctx context.Context, s core.Store, jobs ...*core.Job) {
	t.Helper()
	res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: jobs})
	require.NoError(t, err)
	require.Len(t, res, len(jobs))
	for i, r := range res {
		require.NoError(t, r.Err, "job %d (%s)", i, jobs[i].ID)
		require.False(t, r.Replaced, "job %d (%s) was created, not replaced", i, jobs[i].ID)
	}
}

// putResults stores jobs and returns the per-job results.
func (b *testBundle) putResults(t *testing.T, replace bool, jobs ...*core.Job) []core.PutResult {
	t.Helper()
	res, err := b.store.PutJobs(b.ctx, &core.PutJobsParams{Jobs: jobs, Replace: replace})
	require.NoError(t, err)
	require.Len(t, res, len(jobs))
	return res
}

// get returns the job id, requiring it to exist.
func (b *testBundle) get(t *testing.T, id string) *core.Job {
	t.Helper()
	j, err := b.store.GetJob(b.ctx, id)
	require.NoError(t, err, "get %s", id)
	require.NotNil(t, j)
	require.Equal(t, id, j.ID)
	return j
}

// requireState requires job id to be in state want.
func (b *testBundle) requireState(t *testing.T, id string, want core.State) *core.Job {
	t.Helper()
	j := b.get(t, id)
	require.Equal(t, want, j.State, "state of %s", id)
	return j
}

// claim claims from topic on the bundle's store.
func (b *testBundle) claim(t *testing.T, topic string, max int, wait time.Duration) []*core.Job {
	t.Helper()
	return Claim(t, b.ctx, b.store, topic, max, wait)
}

// Claim claims up to max jobs of topic on s, waiting up to wait, and checks
// what every claimed job carries; the stores' own tests use it too.
func Claim(t testing.TB, ctx context.Context, s core.Store, topic string, max int, wait time.Duration) []*core.Job {
	t.Helper()
	jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic, Max: max, Wait: wait})
	require.NoError(t, err)
	require.LessOrEqual(t, len(jobs), max, "claim returned more than Max")
	for _, j := range jobs {
		requireClaimed(t, j, topic)
	}
	return jobs
}

// claimOne claims exactly one job of topic, waiting up to wait.
func (b *testBundle) claimOne(t *testing.T, topic string, wait time.Duration) *core.Job {
	t.Helper()
	jobs := b.claim(t, topic, 1, wait)
	require.Len(t, jobs, 1, "claim on %s", topic)
	return jobs[0]
}

// claimUntil claims from topic, max at a time and each claim waiting up to
// wait, until n jobs came or a claim came back empty. It returns the jobs in
// the order claimed.
func claimUntil(t *testing.T, ctx context.Context, s core.Store, topic string, n, max int, wait time.Duration) []*core.Job {
	t.Helper()
	var got []*core.Job
	for len(got) < n {
		jobs := Claim(t, ctx, s, topic, max, wait)
		if len(jobs) == 0 {
			break
		}
		got = append(got, jobs...)
	}
	return got
}

// requireClaimed checks what every claimed job carries.
func requireClaimed(t testing.TB, j *core.Job, topic string) {
	t.Helper()
	require.NotNil(t, j)
	require.Equal(t, topic, j.Topic, "claimed job %s of another topic", j.ID)
	require.Equal(t, core.StateReserved, j.State, "claimed job %s", j.ID)
	require.GreaterOrEqual(t, j.Attempt, 1, "claimed job %s", j.ID)
	require.NotEmpty(t, j.Lease, "claimed job %s has no lease", j.ID)
	require.False(t, j.LeaseExpiresAt.IsZero(), "claimed job %s has no lease expiry", j.ID)
}

// pass lets d of real time go by, waiting in claims on a topic that never
// has jobs.
func (b *testBundle) pass(t *testing.T, d time.Duration) {
	t.Helper()
	start := time.Now()
	for left := d; left > 0; left = d - time.Since(start) {
		require.Empty(t, b.claim(t, idleTopic, 1, left))
	}
}

// passUntil lets real time go by until at.
func (b *testBundle) passUntil(t *testing.T, at time.Time) {
	t.Helper()
	b.pass(t, time.Until(at))
}

// topicOf returns the state of topic name (GetTopicState).
func (b *testBundle) topicOf(t *testing.T, name string) core.TopicState {
	t.Helper()
	tp, err := b.store.GetTopicState(b.ctx, name)
	require.NoError(t, err, "get topic state %s", name)
	require.Equal(t, name, tp.Name)
	return tp
}

// requireCounts requires topic's counts, from GetTopicState and from
// ListTopicStates, to be want.
func (b *testBundle) requireCounts(t *testing.T, topic string, want core.Counts) {
	t.Helper()
	// Counts have no notification to wait on: read them again.
	for end := time.Now().Add(b.h.CountsLag); b.topicOf(t, topic).Counts != want && time.Now().Before(end); {
		time.Sleep(b.h.CountsLag / 50)
	}
	require.Equal(t, want, b.topicOf(t, topic).Counts, "counts of %s from GetTopicState", topic)
	topics, err := b.store.ListTopicStates(b.ctx)
	require.NoError(t, err)
	for _, tp := range topics {
		if tp.Name == topic {
			require.Equal(t, want, tp.Counts, "counts of %s from ListTopicStates", topic)
			return
		}
	}
	if want != (core.Counts{}) {
		require.Failf(t, "topic not listed", "ListTopicStates has no %s", topic)
	}
}

// engine returns an engine started on the bundle's store, stopped at the
// test's end.
func (b *testBundle) engine(t *testing.T) *core.Engine {
	t.Helper()
	e, err := core.NewEngine(core.EngineConfig{Store: b.store})
	require.NoError(t, err)
	require.NoError(t, e.Start(b.ctx))
	t.Cleanup(func() { _ = e.Stop(context.WithoutCancel(b.ctx)) })
	return e
}

// requireBetween requires got to lie within [lo, hi], give or take slack.
func requireBetween(t *testing.T, got, lo, hi time.Time, slack time.Duration, what string) {
	t.Helper()
	require.False(t, got.Before(lo.Add(-slack)), "%s %s is before %s", what, got, lo)
	require.False(t, got.After(hi.Add(slack)), "%s %s is after %s", what, got, hi)
}

// requireSameJob requires got to carry what was put as want: id, topic,
// key, body byte for byte, run_at to the ms, ttr, max_attempts,
// traceparent, retry delays, priority, url, expires_at and then.
func requireSameJob(t *testing.T, want, got *core.Job) {
	t.Helper()
	require.Equal(t, want.ID, got.ID)
	require.Equal(t, want.Topic, got.Topic, "topic of %s", want.ID)
	require.Equal(t, want.Key, got.Key, "key of %s", want.ID)
	require.Equal(t, string(want.Body), string(got.Body), "body of %s", want.ID)
	require.True(t, want.RunAt.Equal(got.RunAt), "run_at of %s: want %s, got %s", want.ID, want.RunAt, got.RunAt)
	require.Equal(t, want.TTR, got.TTR, "ttr of %s", want.ID)
	require.Equal(t, want.MaxAttempts, got.MaxAttempts, "max_attempts of %s", want.ID)
	require.Equal(t, want.TraceParent, got.TraceParent, "traceparent of %s", want.ID)
	require.Equal(t, want.RetryDelays, got.RetryDelays, "retry_delays of %s", want.ID)
	require.Equal(t, want.Priority, got.Priority, "priority of %s", want.ID)
	require.Equal(t, want.URL, got.URL, "url of %s", want.ID)
	require.True(t, want.ExpiresAt.Equal(got.ExpiresAt), "expires_at of %s: want %s, got %s", want.ID, want.ExpiresAt, got.ExpiresAt)
	if want.Then == nil {
		require.Nil(t, got.Then, "then of %s", want.ID)
	} else {
		requireSameThen(t, want.Then, got.Then, want.ID)
	}
}

// ids returns the ids of jobs in order.
func ids(jobs []*core.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// idsOf returns the ids of jobs as a set.
func idsOf(jobs []*core.Job) map[string]bool {
	out := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		out[j.ID] = true
	}
	return out
}

// claimResult is what a claim run in another goroutine answered.
type claimResult struct {
	jobs []*core.Job
	err  error
	at   time.Time // when it returned
}

// claimAsync starts a claim in another goroutine and returns where its
// answer will come.
func claimAsync(ctx context.Context, s core.Store, topic string, max int, wait time.Duration) <-chan claimResult {
	ch := make(chan claimResult, 1)
	go func() {
		jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: topic, Max: max, Wait: wait})
		ch <- claimResult{jobs: jobs, err: err, at: time.Now()}
	}()
	return ch
}

// errs collects errors from goroutines, which must not call require.
type errs struct {
	mu  sync.Mutex
	all []error
}

func (e *errs) add(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, err)
}

func (e *errs) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return errors.Join(e.all...)
}

// settleErr drops the result of a settling call (AckJob, RetryJob,
// BuryJob), for checks of its error alone.
func settleErr(_ core.SettleResult, err error) error { return err }
