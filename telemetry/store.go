package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
)

// countsTimeout bounds the ListTopicStates a scrape makes.
const countsTimeout = 5 * time.Second

// Store is a core.Store decorator that traces pushes and claims and records
// intake, lateness, attempts and jobs by state. Create it with NewStore and
// put it outermost, around the breaker, so it sees what callers see. It
// remembers no job: the end of an attempt is labelled with the topic the
// settling call returns (core.SettleResult), so any instance labels it.
type Store struct {
	next   core.Store
	cfg    Config
	tracer trace.Tracer // nil when tracing is off
	in     *instruments
	jobs   metric.Int64ObservableGauge
	paused metric.Int64ObservableGauge
	rated  metric.Int64ObservableGauge
	sched  metric.Int64ObservableGauge
	lag    metric.Float64ObservableGauge
	reg    metric.Registration

	mu       sync.Mutex
	topics   []core.TopicState // the last listing
	listedAt time.Time         // when topics was read
	types    map[string]string // delivery type of configured topics (ObserveTopics)
	sets     map[attrKey]metric.MeasurementOption
	// limited holds when a claim of a topic last got fewer tokens of its
	// rate limit than it wanted, until one gets all it wants.
	limited map[string]time.Time
	// schedules is how many schedules the last listing found (the
	// engine lists them every refresh); -1 before the first.
	schedules int64
	// lags are the topics' lags as last read (observeLag), at lagsAt.
	lags   map[string]time.Duration
	lagsAt time.Time
}

// lagTopicsMax bounds the topics whose lag a scrape reads, two one-job
// listings each: those with the most due or scheduled jobs first.
const lagTopicsMax = 256

// limitedFor is how long after a claim held back by a topic's rate limit
// its ready jobs count as waiting on it: claims come at least every few
// seconds while jobs are ready.
const limitedFor = 10 * time.Second

// attrKey names a combination of metric attributes: queue, transport and,
// when not empty, outcome.
type attrKey struct{ topic, transport, outcome string }

// attrSetsMax bounds the attribute sets Store.attrs keeps; past it the
// cache starts again, so that producers naming ever new topics cannot grow
// it without end.
const attrSetsMax = 4096

// attrs returns the measurement option of a combination of attributes,
// built once: building and sorting a set per job was 7 % of delayq's CPU
// in a burst of acknowledgements (docs/benchmarks.md).
func (s *Store) attrs(topic, transport, outcome string) metric.MeasurementOption {
	k := attrKey{topic, transport, outcome}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.sets[k]; ok {
		return o
	}
	kv := []attribute.KeyValue{attrQueue.String(topic), attrTransport.String(transport)}
	if outcome != "" {
		kv = append(kv, attrOutcome.String(outcome))
	}
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	if len(s.sets) >= attrSetsMax || s.sets == nil {
		s.sets = make(map[attrKey]metric.MeasurementOption)
	}
	s.sets[k] = o
	return o
}

var (
	_ core.Store        = (*Store)(nil)
	_ core.JobExporter  = (*Store)(nil)
	_ core.JobImporter  = (*Store)(nil)
	_ core.Checkpointer = (*Store)(nil)
	_ core.SlotObserver = (*Store)(nil)
)

// NewStore returns store decorated with the traces and metrics of cfg's
// providers. Errors: an instrument the meter provider refused.
func NewStore(store core.Store, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	m := cfg.MeterProvider.Meter(scope)
	in, err := newInstruments(m)
	if err != nil {
		return nil, err
	}
	s := &Store{next: store, cfg: cfg, tracer: cfg.tracer(), in: in, types: map[string]string{}, limited: map[string]time.Time{}, schedules: -1}
	s.jobs, err = m.Int64ObservableGauge(metricJobs, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs by topic and state (scheduled, ready, reserved, done, dead, cancelled), as the store counts them, done and cancelled ones within the retention period; at most CountsTTL old."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: jobs gauge: %w", err)
	}
	s.paused, err = m.Int64ObservableGauge(metricPaused, metric.WithUnit("{topic}"),
		metric.WithDescription("1 while a topic's deliveries are paused, 0 for a listed topic that is not; at most CountsTTL old."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: paused gauge: %w", err)
	}
	s.rated, err = m.Int64ObservableGauge(metricRateLimited, metric.WithUnit("{job}"),
		metric.WithDescription("Ready jobs of a topic that wait on its rate limit: its ready jobs while this instance's last claims got fewer tokens than they wanted (within 10s), else 0; at most CountsTTL old."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: rate limited gauge: %w", err)
	}
	s.sched, err = m.Int64ObservableGauge(metricSchedules, metric.WithUnit("{schedule}"),
		metric.WithDescription("Recurring schedules, paused ones included, as this instance's engine last listed them."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: schedules gauge: %w", err)
	}
	s.lag, err = m.Float64ObservableGauge(metricLag, metric.WithUnit("s"),
		metric.WithDescription("How long a topic's oldest due job has waited for its delivery (0 without one): how far behind its deliveries are; at most CountsTTL old."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: lag gauge: %w", err)
	}
	if s.reg, err = m.RegisterCallback(s.observeJobs, s.jobs, s.paused, s.rated, s.sched, s.lag); err != nil {
		return nil, fmt.Errorf("telemetry: jobs callback: %w", err)
	}
	return s, nil
}

// PutJobs implements core.Store: it starts a producer span per distinct
// parent, stores the jobs with the push span's traceparent, and counts each
// job's outcome.
func (s *Store) PutJobs(ctx context.Context, params *core.PutJobsParams) ([]core.PutResult, error) {
	if params == nil || len(params.Jobs) == 0 {
		return s.next.PutJobs(ctx, params)
	}
	transport := core.TransportFrom(ctx)
	p, pushes := params, []*pushSpan(nil)
	if s.tracer != nil {
		p, pushes = s.startPush(ctx, params, transport)
	}
	res, err := s.next.PutJobs(ctx, p)
	s.countIntake(ctx, params.Jobs, res, err, transport)
	for _, ps := range pushes {
		ps.end(res, err)
	}
	return res, err
}

// pushSpan is the span of the jobs of one PutJobs with one parent.
type pushSpan struct {
	span  trace.Span
	tp    string // the span's traceparent
	idx   []int  // indexes of its jobs
	topic string // "" when the jobs have several
	id    string // the first job's id
}

// startPush starts the push spans and returns params with jobs that carry
// their push span's traceparent.
func (s *Store) startPush(ctx context.Context, params *core.PutJobsParams, transport string) (*core.PutJobsParams, []*pushSpan) {
	inCtx := trace.SpanContextFromContext(ctx).IsValid()
	byParent := map[string]*pushSpan{}
	var spans []*pushSpan
	jobs := make([]*core.Job, len(params.Jobs))
	for i, j := range params.Jobs {
		key := j.TraceParent
		if inCtx {
			key = ""
		}
		ps := byParent[key]
		if ps == nil {
			pctx := ctx
			if !inCtx {
				pctx = withTraceParent(ctx, j.TraceParent)
			}
			ps = &pushSpan{topic: j.Topic, id: j.ID}
			_, ps.span = s.tracer.Start(pctx, "push "+j.Topic,
				trace.WithSpanKind(trace.SpanKindProducer),
				trace.WithAttributes(systemDelayq, attrMessagingOperation.String("send"), attrMessagingOpName.String("push"),
					attrDestination.String(j.Topic), attrTransportSpan.String(transport)))
			ps.tp = formatTraceParent(ps.span.SpanContext())
			byParent[key] = ps
			spans = append(spans, ps)
		}
		if ps.topic != j.Topic && ps.topic != "" {
			ps.topic = ""
			ps.span.SetName("push")
		}
		ps.idx = append(ps.idx, i)
		jobs[i] = j
		if ps.tp != "" && ps.tp != j.TraceParent {
			c := *j
			c.TraceParent = ps.tp
			jobs[i] = &c
		}
	}
	out := *params
	out.Jobs = jobs
	return &out, spans
}

// end ends a push span with the outcome of its jobs.
func (ps *pushSpan) end(res []core.PutResult, err error) {
	if len(ps.idx) == 1 {
		ps.span.SetAttributes(attrMessageID.String(ps.id), attrOutcomeSpan.String(intakeOutcome(res, ps.idx[0], err)))
	} else {
		ps.span.SetAttributes(attrBatchCount.Int(len(ps.idx)))
	}
	if err != nil {
		ps.span.RecordError(err)
		ps.span.SetStatus(codes.Error, "store failed")
	}
	ps.span.End()
}

// intakeOutcome is the outcome of job i of a PutJobs.
func intakeOutcome(res []core.PutResult, i int, err error) string {
	switch {
	case errors.Is(err, breaker.ErrOpen):
		return outcomeBreakerOpen
	case errors.Is(err, core.ErrUnavailable):
		return outcomeUnavailable
	case err != nil || i >= len(res):
		return outcomeError
	case res[i].Err == nil && res[i].Replaced:
		return outcomeReplaced
	case res[i].Err == nil:
		return outcomeAccepted
	case errors.Is(res[i].Err, core.ErrConflict):
		return outcomeConflict
	}
	return outcomeError
}

// countIntake adds the outcome of every job of a PutJobs, one Add per topic
// and outcome.
func (s *Store) countIntake(ctx context.Context, jobs []*core.Job, res []core.PutResult, err error, transport string) {
	type key struct{ topic, outcome string }
	if len(jobs) == 1 {
		s.in.intake.Add(ctx, 1, s.attrs(jobs[0].Topic, transport, intakeOutcome(res, 0, err)))
		return
	}
	n := map[key]int64{}
	for i, j := range jobs {
		n[key{j.Topic, intakeOutcome(res, i, err)}]++
	}
	for k, c := range n {
		s.in.intake.Add(ctx, c, s.attrs(k.topic, transport, k.outcome))
	}
}

// ClaimJobs implements core.Store: for each job claimed it records the
// lateness (now minus run_at, but for a redelivery after a lost lease,
// which counts as an expired attempt of this claim's transport instead) and
// a claim span from run_at to now, whose context the job then carries.
func (s *Store) ClaimJobs(ctx context.Context, params *core.ClaimJobsParams) ([]*core.Job, error) {
	jobs, err := s.next.ClaimJobs(ctx, params)
	if len(jobs) == 0 {
		return jobs, err
	}
	now := s.cfg.Clock.Now()
	transport := transportOf(core.TransportFrom(ctx), s.deliveryType(params.Topic))
	attrs := s.attrs(params.Topic, transport, "")
	for _, j := range jobs {
		if j.Redelivered() {
			s.in.attempts.Add(ctx, 1, s.attrs(params.Topic, transport, outcomeExpired))
			s.claimSpan(ctx, j, now, 0, transport)
			continue
		}
		late := max(now.Sub(j.RunAt), 0)
		s.in.lateness.Record(ctx, late.Seconds(), attrs)
		s.claimSpan(ctx, j, now, late, transport)
	}
	return jobs, err
}

// claimSpan records the span of a job's claim, from when it became due to
// now, and makes the job carry its context.
func (s *Store) claimSpan(ctx context.Context, j *core.Job, now time.Time, late time.Duration, transport string) {
	if s.tracer == nil || j.TraceParent == "" {
		return
	}
	pctx := withTraceParent(context.Background(), j.TraceParent)
	if !trace.SpanContextFromContext(pctx).IsValid() {
		return
	}
	start := j.RunAt
	if start.Before(j.CreatedAt) {
		start = j.CreatedAt
	}
	if start.After(now) {
		start = now
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start),
		trace.WithAttributes(systemDelayq, attrMessagingOperation.String("receive"), attrMessagingOpName.String("claim"),
			attrDestination.String(j.Topic), attrMessageID.String(j.ID), attrAttempt.Int(j.Attempt),
			attrTransportSpan.String(transport), attrRunAt.String(j.RunAt.UTC().Format(time.RFC3339Nano)),
			attrLateness.Float64(float64(late)/float64(time.Millisecond))),
	}
	if link := trace.LinkFromContext(ctx); link.SpanContext.IsValid() {
		opts = append(opts, trace.WithLinks(link))
	}
	_, span := s.tracer.Start(pctx, "claim "+j.Topic, opts...)
	if j.Redelivered() {
		span.SetAttributes(attrOutcomeSpan.String("redelivery after lease expiry"))
	}
	span.End(trace.WithTimestamp(now))
	j.TraceParent = formatTraceParent(span.SpanContext())
}

// AckJob implements core.Store and counts an ok attempt.
func (s *Store) AckJob(ctx context.Context, params *core.AckJobParams) (core.SettleResult, error) {
	res, err := s.next.AckJob(ctx, params)
	s.settled(ctx, res, err, outcomeOK)
	return res, err
}

// AckJobs implements core.Store and counts an ok attempt for each ack
// that settled.
func (s *Store) AckJobs(ctx context.Context, params *core.AckJobsParams) ([]core.AckResult, error) {
	res, err := s.next.AckJobs(ctx, params)
	for _, r := range res {
		s.settled(ctx, r.Settled, r.Err, outcomeOK)
	}
	return res, err
}

// RetryJob implements core.Store and counts a failed attempt, or a
// released one when it never reached its destination (params.Unsent).
func (s *Store) RetryJob(ctx context.Context, params *core.RetryJobParams) (core.SettleResult, error) {
	res, err := s.next.RetryJob(ctx, params)
	outcome := outcomeFailed
	if params != nil && params.Unsent {
		outcome = outcomeReleased
	}
	s.settled(ctx, res, err, outcome)
	return res, err
}

// BuryJob implements core.Store and counts a dead attempt and a dead job.
func (s *Store) BuryJob(ctx context.Context, params *core.BuryJobParams) (core.SettleResult, error) {
	res, err := s.next.BuryJob(ctx, params)
	s.settled(ctx, res, err, outcomeDead)
	return res, err
}

// settled counts the end of an attempt, labelled with the settled job's
// topic, as the store returned it, and the transport the call came through
// (for a call that names none, the topic's delivery type, as for its claim).
func (s *Store) settled(ctx context.Context, res core.SettleResult, err error, outcome string) {
	if err != nil {
		return
	}
	transport := transportOf(core.TransportFrom(ctx), s.deliveryType(res.Topic))
	s.in.attempts.Add(ctx, 1, s.attrs(res.Topic, transport, outcome))
	if outcome == outcomeDead {
		s.in.dead.Add(ctx, 1, s.attrs(res.Topic, transport, ""))
	}
}

// TouchJob implements core.Store.
func (s *Store) TouchJob(ctx context.Context, params *core.TouchJobParams) (*core.Job, error) {
	return s.next.TouchJob(ctx, params)
}

// GetJob implements core.Store.
func (s *Store) GetJob(ctx context.Context, id string) (*core.Job, error) {
	return s.next.GetJob(ctx, id)
}

// ExpireJob implements core.Store.
func (s *Store) ExpireJob(ctx context.Context, id string) error { return s.next.ExpireJob(ctx, id) }

// CancelJob implements core.Store.
func (s *Store) CancelJob(ctx context.Context, params *core.CancelJobParams) error {
	return s.next.CancelJob(ctx, params)
}

// RequeueJob implements core.Store.
func (s *Store) RequeueJob(ctx context.Context, id string) error { return s.next.RequeueJob(ctx, id) }

// ListDeadJobs implements core.Store.
func (s *Store) ListDeadJobs(ctx context.Context, params *core.ListDeadJobsParams) ([]*core.Job, error) {
	return s.next.ListDeadJobs(ctx, params)
}

// ListFinished implements core.Store.
func (s *Store) ListFinished(ctx context.Context, params *core.ListFinishedParams) (core.FinishedPage, error) {
	return s.next.ListFinished(ctx, params)
}

// FindJobs implements core.Store.
func (s *Store) FindJobs(ctx context.Context, params *core.FindJobsParams) ([]*core.Job, error) {
	return s.next.FindJobs(ctx, params)
}

// ListJobs implements core.Store.
func (s *Store) ListJobs(ctx context.Context, params *core.ListJobsParams) (core.JobPage, error) {
	return s.next.ListJobs(ctx, params)
}

// GetTopicState implements core.Store.
func (s *Store) GetTopicState(ctx context.Context, name string) (core.TopicState, error) {
	return s.next.GetTopicState(ctx, name)
}

// TakeRate implements core.Store; it notes the topics whose claims the
// limit holds back, for delayq_rate_limited_jobs.
func (s *Store) TakeRate(ctx context.Context, params *core.TakeRateParams) (core.TakeRateResult, error) {
	res, err := s.next.TakeRate(ctx, params)
	if err == nil && params.Want > 0 {
		s.mu.Lock()
		if res.Granted < params.Want {
			s.limited[params.Topic] = s.cfg.Clock.Now()
		} else {
			delete(s.limited, params.Topic)
		}
		s.mu.Unlock()
	}
	return res, err
}

// SetTopicPaused implements core.Store; the next scrape lists topics
// again.
func (s *Store) SetTopicPaused(ctx context.Context, name string, paused bool) error {
	err := s.next.SetTopicPaused(ctx, name, paused)
	if err == nil {
		s.mu.Lock()
		s.listedAt = time.Time{}
		s.mu.Unlock()
	}
	return err
}

// ListTopicStates implements core.Store; the counts listed serve
// delayq_jobs for CountsTTL.
func (s *Store) ListTopicStates(ctx context.Context) ([]core.TopicState, error) {
	list, err := s.next.ListTopicStates(ctx)
	if err == nil {
		s.remember(list)
	}
	return list, err
}

// ObserveTopics implements core.TopicObserver: the configurations the
// engine applies give the delivery types that label metrics, and their
// topics are reported by delayq_jobs, with jobs or none. When they changed
// (a topic configured, dropped or given another delivery), the next scrape
// lists topics again.
func (s *Store) ObserveTopics(topics map[string]*core.Topic) {
	types := make(map[string]string, len(topics))
	for name, t := range topics {
		types[name] = t.WithDefaults().Delivery.Type
	}
	s.mu.Lock()
	if !maps.Equal(types, s.types) {
		s.types, s.listedAt = types, time.Time{}
	}
	s.mu.Unlock()
}

// GetRecord implements core.Store.
func (s *Store) GetRecord(ctx context.Context, kind, name string) (*core.Record, error) {
	return s.next.GetRecord(ctx, kind, name)
}

// PutRecord implements core.Store.
func (s *Store) PutRecord(ctx context.Context, params *core.PutRecordParams) (uint64, error) {
	return s.next.PutRecord(ctx, params)
}

// DeleteRecord implements core.Store.
func (s *Store) DeleteRecord(ctx context.Context, params *core.DeleteRecordParams) error {
	return s.next.DeleteRecord(ctx, params)
}

// ListRecords implements core.Store; it notes how many schedules there
// are, for delayq_schedules (the engine lists them every refresh).
func (s *Store) ListRecords(ctx context.Context, kind string) ([]*core.Record, error) {
	list, err := s.next.ListRecords(ctx, kind)
	if err == nil && kind == core.KindSchedule {
		s.mu.Lock()
		s.schedules = int64(len(list))
		s.mu.Unlock()
	}
	return list, err
}

// ObserveSlot implements core.SlotObserver: it counts the slots fired,
// those missed and passed over, and those blocked by a job holding the
// slot's id.
func (s *Store) ObserveSlot(ctx context.Context, params *core.FireScheduleParams, created bool) {
	attrs := metric.WithAttributes(attrSchedule.String(params.Name))
	if created {
		s.in.slotsFired.Add(ctx, 1, attrs)
	}
	if params.Missed > 0 {
		s.in.slotsMissed.Add(ctx, int64(params.Missed), attrs)
	}
	if params.Blocked && !created {
		s.in.slotsBlocked.Add(ctx, 1, attrs)
	}
}

// Unwrap returns the store it decorates.
func (s *Store) Unwrap() core.Store { return s.next }

// ExportJobs implements core.JobExporter: it passes the export on,
// unrecorded. Errors: core.ErrUnsupported when the store lacks the
// capability, fn's error, those of the store.
func (s *Store) ExportJobs(ctx context.Context, fn func(*core.Job) error) error {
	x, ok := s.next.(core.JobExporter)
	if !ok {
		return core.ErrUnsupported
	}
	return x.ExportJobs(ctx, fn)
}

// ImportJobs implements core.JobImporter: it passes the jobs on as they
// are, traceparents included, unrecorded (an import is not intake). Errors:
// core.ErrUnsupported when the store lacks the capability, those of the
// store.
func (s *Store) ImportJobs(ctx context.Context, jobs []*core.Job) ([]bool, error) {
	im, ok := s.next.(core.JobImporter)
	if !ok {
		return nil, core.ErrUnsupported
	}
	return im.ImportJobs(ctx, jobs)
}

// Checkpoint implements core.Checkpointer: it passes the checkpoint on,
// unrecorded. Errors: core.ErrUnsupported when the store lacks the
// capability, those of the store.
func (s *Store) Checkpoint(ctx context.Context, dir string) error {
	c, ok := s.next.(core.Checkpointer)
	if !ok {
		return core.ErrUnsupported
	}
	return c.Checkpoint(ctx, dir)
}

// Ping implements core.Store.
func (s *Store) Ping(ctx context.Context) error { return s.next.Ping(ctx) }

// Close implements core.Store: it stops reporting delayq_jobs and closes
// the store.
func (s *Store) Close() error {
	if s.reg != nil {
		_ = s.reg.Unregister()
	}
	return s.next.Close()
}

// remember keeps a topic listing for delayq_jobs.
func (s *Store) remember(list []core.TopicState) {
	s.mu.Lock()
	s.topics, s.listedAt = slices.Clone(list), s.cfg.Clock.Now()
	s.mu.Unlock()
}

// deliveryType returns the delivery type of a configured topic, "" when
// unknown.
func (s *Store) deliveryType(topic string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.types[topic]
}

// observeJobs reports delayq_jobs, delayq_topic_paused,
// delayq_rate_limited_jobs and delayq_topic_lag_seconds from a listing at most CountsTTL old,
// listing topics when the last one is older; nothing when that fails.
func (s *Store) observeJobs(_ context.Context, o metric.Observer) error {
	s.mu.Lock()
	now := s.cfg.Clock.Now()
	topics, fresh := s.topics, now.Sub(s.listedAt) < s.cfg.CountsTTL
	configured := slices.Collect(maps.Keys(s.types))
	limited := make(map[string]bool, len(s.limited))
	for name, at := range s.limited {
		if now.Sub(at) < limitedFor {
			limited[name] = true
		} else {
			delete(s.limited, name)
		}
	}
	schedules := s.schedules
	s.mu.Unlock()
	if schedules >= 0 {
		o.ObserveInt64(s.sched, schedules)
	}
	if !fresh {
		ctx, cancel := context.WithTimeout(context.Background(), countsTimeout)
		list, err := s.next.ListTopicStates(ctx)
		cancel()
		if err != nil {
			s.cfg.Logger.Debug("telemetry: counting jobs by state failed", "err", err)
			return nil
		}
		s.remember(list)
		topics = list
	}
	listed := make(map[string]bool, len(topics))
	for _, t := range topics {
		listed[t.Name] = true
	}
	topics = slices.Clip(topics)      // the listing kept is shared: append to a copy
	for _, name := range configured { // configured topics without jobs count 0
		if !listed[name] {
			topics = append(topics, core.TopicState{Name: name})
		}
	}
	for _, t := range topics {
		paused := int64(0)
		if t.Paused {
			paused = 1
		}
		o.ObserveInt64(s.paused, paused, metric.WithAttributeSet(attribute.NewSet(attrQueue.String(t.Name))))
		waiting := int64(0)
		if limited[t.Name] {
			waiting = t.Counts.Ready
		}
		o.ObserveInt64(s.rated, waiting, metric.WithAttributeSet(attribute.NewSet(attrQueue.String(t.Name))))
		for _, c := range []struct {
			state core.State
			n     int64
		}{
			{core.StateScheduled, t.Counts.Scheduled},
			{core.StateReady, t.Counts.Ready},
			{core.StateReserved, t.Counts.Reserved},
			{core.StateDone, t.Counts.Done},
			{core.StateDead, t.Counts.Dead},
			{core.StateCancelled, t.Counts.Cancelled},
		} {
			o.ObserveInt64(s.jobs, c.n, metric.WithAttributeSet(attribute.NewSet(attrQueue.String(t.Name), attrState.String(string(c.state)))))
		}
	}
	for name, lag := range s.topicLags(topics, now) {
		o.ObserveFloat64(s.lag, lag.Seconds(), metric.WithAttributeSet(attribute.NewSet(attrQueue.String(name))))
	}
	return nil
}

// topicLags returns the lag of each of topics, read again when the last
// reading is CountsTTL old: those with due or scheduled jobs (up to
// lagTopicsMax) by topicLag, the others 0. A topic whose read fails keeps
// its last lag.
func (s *Store) topicLags(topics []core.TopicState, now time.Time) map[string]time.Duration {
	s.mu.Lock()
	last, fresh := s.lags, now.Sub(s.lagsAt) < s.cfg.CountsTTL
	s.mu.Unlock()
	if fresh {
		return last
	}
	byJobs := slices.Clone(topics)
	slices.SortFunc(byJobs, func(a, b core.TopicState) int {
		return cmp.Compare(b.Counts.Ready+b.Counts.Scheduled, a.Counts.Ready+a.Counts.Scheduled)
	})
	ctx, cancel := context.WithTimeout(context.Background(), countsTimeout)
	defer cancel()
	lags := make(map[string]time.Duration, len(topics))
	for i, t := range byJobs {
		lag := time.Duration(0)
		if i < lagTopicsMax && t.Counts.Ready+t.Counts.Scheduled > 0 {
			var err error
			if lag, err = s.topicLag(ctx, t.Name, now); err != nil {
				s.cfg.Logger.Debug("telemetry: reading a topic's lag failed", "queue", t.Name, "err", err)
				lag = last[t.Name]
			}
		}
		lags[t.Name] = lag
	}
	s.mu.Lock()
	s.lags, s.lagsAt = lags, now
	s.mu.Unlock()
	return lags
}

// topicLag returns how long topic's oldest due job has been due at now:
// the first of its ready jobs in ListJobs' order (by run_at; on NATS, the
// first in stream order), or of its scheduled ones when its run_at passed
// (a schedule the NATS server fires late lists as scheduled until it
// fires); 0 when neither is due.
func (s *Store) topicLag(ctx context.Context, topic string, now time.Time) (time.Duration, error) {
	var lag time.Duration
	for _, state := range []core.State{core.StateReady, core.StateScheduled} {
		page, err := s.next.ListJobs(ctx, &core.ListJobsParams{Topic: topic, State: state, Limit: 1})
		if err != nil {
			return 0, err
		}
		if len(page.Jobs) > 0 {
			lag = max(lag, now.Sub(page.Jobs[0].RunAt))
		}
	}
	return lag, nil
}
