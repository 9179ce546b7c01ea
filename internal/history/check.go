package history

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Allowances are what a deployment's documentation allows beyond the plain
// contract. The zero value allows nothing.
type Allowances struct {
	// AsyncWriteWindow is, on the local store, how long before a kill -9 a
	// claim, ack, nack or touch answered (or left unanswered by the kill)
	// may be lost: the store writes them without waiting for their fsync
	// and a background fsync runs at least every second (docs/backends.md,
	// "What survives a failure"), so a lost ack or nack delivers the job
	// again and a lost claim leaves it ready with its attempt uncounted.
	// Zero where every answered write is kept (Redis, whose server the
	// runs do not kill).
	AsyncWriteWindow time.Duration
	// MasterFailover is set on Redis under Sentinel with
	// --redis-wait-replicas: a kill -9 of the master may lose the claims
	// and settles (ack, nack, touch) not answered 2xx. One answered 2xx
	// had a replica's confirmation, as had every write before it
	// (docs/backends.md, "Waiting for replicas"). Unset where the backend's
	// failover loses nothing answered (NATS R3) or no backend is killed.
	MasterFailover bool
	// ClockTolerance is allowed in every comparison of times: answers carry
	// milliseconds (docs/api.md, "Wire forms"), and the clients, delayq and
	// its backend read one machine's clock.
	ClockTolerance time.Duration
	// PauseBound is how long after a pause's answer a claim that begins may
	// still take jobs of the topic: none on the local and Redis stores
	// ("every claim after the answer sees it", docs/api.md, pause).
	PauseBound time.Duration
	// DelayOnInstanceClock allows a delay (a push's, a nack's) and a
	// requeue's "now" to be counted on the clock of the instance that took
	// the call, as moved by the history's clock faults (FaultClock): on
	// Redis, due times and leases are judged on the server's clock, but
	// the engine turns a delay into a run_at on its own (docs/reliability.md,
	// "Histories checked against a model").
	DelayOnInstanceClock bool
	// TimesOnInstanceClock allows every time of a job, those its
	// instances answer and those they judge (due times, lease expiries),
	// to be off by the offset of a clock fault while the job lived: on
	// NATS each instance reads its own clock for them (docs/backends.md,
	// "Clocks"), so an instance X ahead may deliver X early and end
	// another's lease X early.
	TimesOnInstanceClock bool
}

// LocalAllowances are the local (Pebble) store's allowances with its
// default --sync 1s.
func LocalAllowances() Allowances {
	return Allowances{AsyncWriteWindow: time.Second, ClockTolerance: 5 * time.Millisecond}
}

// NATSAllowances are the NATS store's on a cluster with R3 streams: every
// write is answered once a majority stored it, a pause reaches the other
// instances through a watch (within milliseconds, docs/api.md, pause; the
// runs saw up to 0.3 s after a node's failover, hence 500 ms), and each
// instance reads times on its own clock.
func NATSAllowances() Allowances {
	return Allowances{ClockTolerance: 5 * time.Millisecond, PauseBound: 500 * time.Millisecond, DelayOnInstanceClock: true, TimesOnInstanceClock: true}
}

// RedisAllowances are the Redis store's, with the Redis server kept up.
func RedisAllowances() Allowances {
	return Allowances{ClockTolerance: 5 * time.Millisecond, DelayOnInstanceClock: true}
}

// SentinelAllowances are the Redis store's on a Sentinel-managed master
// with --redis-wait-replicas 1, whose kill -9 loses what its replicas had
// not confirmed, none of it answered 2xx.
func SentinelAllowances() Allowances {
	a := RedisAllowances()
	a.MasterFailover = true
	return a
}

// AnomalyKind names what an anomaly broke.
type AnomalyKind string

// The anomalies Check reports.
const (
	// AnomalyLost: a job answered 2xx was never delivered, and no cancel
	// took it.
	AnomalyLost AnomalyKind = "lost"
	// AnomalyAfterCancel: a delivery began after a cancel's 204.
	AnomalyAfterCancel AnomalyKind = "delivered after cancel"
	// AnomalyEarly: a delivery before the job's run_at or its retry's.
	AnomalyEarly AnomalyKind = "delivered before run_at"
	// AnomalyPaused: a claim begun after a pause's answer took a job of the
	// topic.
	AnomalyPaused AnomalyKind = "claimed while paused"
	// AnomalyAttempt: a delivery's attempt did not count up by one, or
	// went past max_attempts.
	AnomalyAttempt AnomalyKind = "attempt"
	// AnomalyRunAt: a push answered a run_at other than its invocation
	// (or answer) plus its delay.
	AnomalyRunAt AnomalyKind = "run_at off its delay"
	// AnomalyNotLinearizable: no order of the job's operations gives its
	// answers in the model (leases, states, attempts, dead jobs).
	AnomalyNotLinearizable AnomalyKind = "not linearizable"
)

// Anomaly is one violation of the contract found in a history.
type Anomaly struct {
	Kind   AnomalyKind
	ID     string
	Detail string
}

// String says what the anomaly is, of which job, and its detail.
func (a Anomaly) String() string { return fmt.Sprintf("%s: job %s: %s", a.Kind, a.ID, a.Detail) }

// Report is what Check found.
type Report struct {
	// Ops counts the operations checked, Indeterminate those without an
	// answer, Jobs the jobs (histories checked by the model), Deliveries
	// the jobs claims answered.
	Ops, Indeterminate, Jobs, Deliveries int
	// Faults counts the faults by kind.
	Faults map[FaultKind]int
	// Unknown counts the jobs whose model check ran out of time.
	Unknown   int
	Anomalies []Anomaly
}

// Summary is a one-line account of the report.
func (r *Report) Summary() string {
	return fmt.Sprintf("%d operations (%d indeterminate), %d jobs, %d deliveries, faults %v, %d anomalies, %d unknown",
		r.Ops, r.Indeterminate, r.Jobs, r.Deliveries, r.Faults, len(r.Anomalies), r.Unknown)
}

// jobEvent is an operation of a job: the op, and for a claim which of its
// deliveries.
type jobEvent struct {
	op *Op
	d  *Delivery
}

// checker holds what the checks of one history share.
type checker struct {
	a     Allowances
	ops   []Op
	kills map[int][]time.Time // kill -9 times per instance
	// failovers are the kill -9 times of the backend's master or leader.
	failovers []time.Time
	clocks    map[int][]clockSpan // clock offsets per instance
	end       time.Time
	jobs      map[string][]jobEvent
	topic     map[string]string
	// phantoms are, per topic, the claims that got no answer, in the
	// order of their invocations.
	phantoms map[string][]*Op
	report   Report
}

// Check checks a history against the model of the contract, with the
// deployment's allowances.
func Check(h *History, a Allowances) Report {
	c := &checker{a: a, ops: h.Ops(), kills: map[int][]time.Time{}, clocks: map[int][]clockSpan{}, jobs: map[string][]jobEvent{}, topic: map[string]string{}, phantoms: map[string][]*Op{}}
	c.report.Ops, c.report.Indeterminate, c.report.Faults = h.Counts()
	faults := h.Faults()
	for _, f := range faults {
		switch f.Kind {
		case FaultKill:
			c.kills[f.Instance] = append(c.kills[f.Instance], f.At)
		case FaultBackendKill:
			c.failovers = append(c.failovers, f.At)
		}
		c.end = maxTime(c.end, f.At)
	}
	for i := range c.ops {
		c.end = maxTime(c.end, maxTime(c.ops[i].Call, c.ops[i].Return))
	}
	c.end = c.end.Add(time.Second)
	// A clock offset lasts until the instance's next clock fault.
	for i, f := range faults {
		if f.Kind != FaultClock || f.Offset == 0 {
			continue
		}
		span := clockSpan{from: f.At, to: c.end, offset: f.Offset}
		for _, g := range faults[i+1:] {
			if g.Kind == FaultClock && g.Instance == f.Instance {
				span.to = g.At
				break
			}
		}
		c.clocks[f.Instance] = append(c.clocks[f.Instance], span)
	}
	// A subscriber's slot freed by a lease's expiry frees when its
	// instance's clock reaches it: earlier, on a clock ahead.
	moved := false
	for i := range c.ops {
		op := &c.ops[i]
		if !op.CallFromLease {
			continue
		}
		ahead := time.Duration(0)
		for _, s := range c.clocks[op.Instance] {
			if s.offset > 0 && s.from.Before(op.Call) && s.to.After(op.Call.Add(-s.offset)) {
				ahead = max(ahead, s.offset)
			}
		}
		if ahead > 0 {
			op.Call, moved = op.Call.Add(-ahead), true
		}
	}
	if moved {
		slices.SortStableFunc(c.ops, func(a, b Op) int { return a.Call.Compare(b.Call) })
	}
	for i := range c.ops {
		op := &c.ops[i]
		if op.Kind == OpClaim && op.Indeterminate() {
			c.phantoms[op.Topic] = append(c.phantoms[op.Topic], op)
		}
		if op.ID != "" {
			c.jobs[op.ID] = append(c.jobs[op.ID], jobEvent{op: op})
			if op.Topic != "" && c.topic[op.ID] == "" {
				c.topic[op.ID] = op.Topic
			}
		}
		for j := range op.Jobs {
			d := &op.Jobs[j]
			c.jobs[d.ID] = append(c.jobs[d.ID], jobEvent{op: op, d: d})
			if c.topic[d.ID] == "" {
				c.topic[d.ID] = op.Topic
			}
			c.report.Deliveries++
		}
	}
	c.report.Jobs = len(c.jobs)
	ids := make([]string, 0, len(c.jobs))
	for id := range c.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.checkJob(id)
	}
	c.checkPauses()
	return c.report
}

func (c *checker) add(kind AnomalyKind, id, format string, args ...any) {
	c.report.Anomalies = append(c.report.Anomalies, Anomaly{Kind: kind, ID: id, Detail: fmt.Sprintf(format, args...)})
}

// bound is the latest moment an operation may have taken effect: its
// answer, or for one without, its Until, else the next kill of its
// instance (a killed process applies nothing more), else the end of the
// history.
func (c *checker) bound(op *Op) time.Time {
	if !op.Return.IsZero() {
		return op.Return
	}
	if !op.Until.IsZero() {
		return op.Until
	}
	for _, k := range c.kills[op.Instance] {
		if !k.Before(op.Call) {
			return k
		}
	}
	return c.end
}

// fragile reports whether a kill -9 may have lost op's write.
func (c *checker) fragile(op *Op) bool {
	return !c.lostBy(op).IsZero()
}

// lostBy returns the first kill -9 that may have lost op's write, or the
// zero time: on the local store, a kill of its instance with op's async
// write answered within AsyncWriteWindow before it, or unanswered at it;
// with MasterFailover, a kill of the master with op not answered 2xx.
func (c *checker) lostBy(op *Op) time.Time {
	if c.a.AsyncWriteWindow > 0 {
		for _, k := range c.kills[op.Instance] {
			if k.Before(op.Call) {
				continue
			}
			if op.Return.IsZero() || !op.Return.Before(k.Add(-c.a.AsyncWriteWindow)) {
				return k
			}
			break
		}
	}
	if c.a.MasterFailover {
		for _, k := range c.failovers {
			if k.Before(op.Call) {
				continue
			}
			if !op.OK() {
				return k
			}
			break
		}
	}
	return time.Time{}
}

// lostBetween reports whether op's write may have been lost by a kill
// before t.
func (c *checker) lostBetween(op *Op, t time.Time) bool {
	k := c.lostBy(op)
	return !k.IsZero() && k.Before(t)
}

// clockSpan is a time during which an instance's clock was off by offset.
type clockSpan struct {
	from, to time.Time
	offset   time.Duration
}

// offsets returns the least and the most offset of op's instance's clock
// from the real time while op may have taken effect (0 included), when
// the allowances count a delay on the instance's clock; else 0, 0.
func (c *checker) offsets(op *Op) (lo, hi time.Duration) {
	if !c.a.DelayOnInstanceClock {
		return 0, 0
	}
	end := c.bound(op)
	for _, s := range c.clocks[op.Instance] {
		if s.from.Before(end) && s.to.After(op.Call) {
			lo, hi = min(lo, s.offset), max(hi, s.offset)
		}
	}
	return lo, hi
}

// tolerance is what the comparisons of times of a job's events allow: the
// clock tolerance, and with TimesOnInstanceClock the largest offset of a
// clock fault of any instance while the job lived.
func (c *checker) tolerance(evs []jobEvent) time.Duration {
	tol := c.a.ClockTolerance
	if !c.a.TimesOnInstanceClock || len(evs) == 0 {
		return tol
	}
	from, to := evs[0].op.Call, evs[0].op.Call
	for _, e := range evs {
		from, to = minTime(from, e.op.Call), maxTime(to, c.bound(e.op))
		if e.d != nil {
			to = maxTime(to, e.d.LeaseExpiresAt)
		}
	}
	most := time.Duration(0)
	for _, spans := range c.clocks {
		for _, s := range spans {
			if s.from.Before(to) && s.to.After(from) {
				most = max(most, s.offset, -s.offset)
			}
		}
	}
	return tol + most
}

func (c *checker) checkJob(id string) {
	evs := c.jobs[id]
	c.checkModel(id, evs)
	c.checkLost(id, evs)
	c.checkRunAtAnswers(id, evs)
	c.checkDeliveries(id, evs)
}

// checkRunAtAnswers: a put with a delay (none: due now) answers a run_at
// between its invocation and its answer plus the delay (docs/api.md,
// "delay"), on the clock of its instance where the allowances say so.
func (c *checker) checkRunAtAnswers(id string, evs []jobEvent) {
	tol := c.tolerance(evs)
	for _, e := range evs {
		op := e.op
		if e.d != nil || !isPut(op) || !op.OK() || !op.RunAt.IsZero() || op.AnswerRunAt.IsZero() {
			continue
		}
		lo, hi := c.offsets(op)
		earliest, latest := op.Call.Add(op.Delay+lo-tol), op.Return.Add(op.Delay+hi+tol)
		if op.AnswerRunAt.Before(earliest) || op.AnswerRunAt.After(latest) {
			c.add(AnomalyRunAt, id, "%s with delay %s invoked at %s, answered %d at %s with run_at %s",
				op.Kind, op.Delay, op.Call.Format(time.StampMilli), op.Status, op.Return.Format(time.StampMilli), op.AnswerRunAt.Format(time.StampMilli))
		}
	}
}

// isPut reports whether op creates or replaces a job.
func isPut(op *Op) bool { return op.Kind == OpPush || op.Kind == OpReplace }

// checkLost: the last version of a job answered 2xx is delivered (or read
// dead since), or cancelled, or replaced by a push whose answer never
// came.
func (c *checker) checkLost(id string, evs []jobEvent) {
	var last *Op
	for _, e := range evs {
		if e.d == nil && isPut(e.op) && e.op.OK() {
			last = e.op
		}
	}
	// A job not due before the history ends need not have come.
	if last == nil || c.dueAt(last).After(c.end) {
		return
	}
	for _, e := range evs {
		op := e.op
		switch {
		case e.d != nil && op.Return.After(last.Call):
			return
		case e.d == nil && op.Kind == OpCancel && (op.Status == 204 || op.Indeterminate()) && c.bound(op).After(last.Call):
			return
		case e.d == nil && isPut(op) && op.Indeterminate() && op.Call.After(last.Call):
			return
		// Read dead since: delivered on its last attempt to a claim whose
		// answer never came (the model checks that one may have taken
		// it), or to a subscriber whose connection ended before it was
		// sent, which released it.
		case e.d == nil && op.Kind == OpGet && op.OK() && op.State == "dead" && op.Call.After(last.Return):
			return
		}
	}
	c.add(AnomalyLost, id, "%s answered %d at %s, never delivered nor cancelled", last.Kind, last.Status, last.Return.Format(time.StampMilli))
}

// checkDeliveries checks each delivery against cancels, due times and the
// delivery before it.
func (c *checker) checkDeliveries(id string, evs []jobEvent) {
	tol := c.tolerance(evs)
	var prev *jobEvent
	for i := range evs {
		e := &evs[i]
		if e.d == nil {
			continue
		}
		claim := e.op
		// Its own run_at, as answered.
		if claim.Return.Before(e.d.RunAt.Add(-tol)) {
			c.add(AnomalyEarly, id, "claim answered at %s attempt %d with run_at %s", claim.Return.Format(time.StampMilli), e.d.Attempt, e.d.RunAt.Format(time.StampMilli))
		}
		// The due time set by the last push, nack or requeue that took
		// effect before the claim: the earliest of those that may have
		// been last.
		sets := func(op *Op) bool {
			return isPut(op) || op.Kind == OpNack || op.Kind == OpRequeue
		}
		lasts := c.lastBefore(evs, sets, claim.Call)
		check := len(lasts) > 0
		var at time.Time
		var due *Op
		for _, op := range lasts {
			if !op.OK() || c.lostBetween(op, claim.Call) {
				check = false // an effect unknown, or taken back by a kill
				break
			}
			if due == nil || c.dueAt(op).Before(at) {
				due, at = op, c.dueAt(op)
			}
		}
		// A put, nack or requeue concurrent with the claim may have taken
		// effect before it.
		for j := range evs {
			op := evs[j].op
			if evs[j].d == nil && sets(op) && (op.OK() || op.Indeterminate()) &&
				op.Call.Before(claim.Return) && !c.bound(op).Before(claim.Call) {
				check = false
				break
			}
		}
		if check && claim.Return.Before(at.Add(-tol)) {
			c.add(AnomalyEarly, id, "delivered attempt %d by a claim answered at %s, due at %s by the %s answered %d at %s:\n%s",
				e.d.Attempt, claim.Return.Format(time.StampMilli), at.Format(time.StampMilli), due.Kind, due.Status, due.Return.Format(time.StampMilli), describeAround(evs, claim.Call))
		}
		// Cancels answered 204 before the claim began, and no push since:
		// a push that may have come after the cancel invoked last came
		// after every one.
		var cancel *Op
		for j := range evs {
			x := evs[j].op
			if evs[j].d == nil && x.Kind == OpCancel && x.Status == 204 && x.Return.Before(claim.Call) && (cancel == nil || x.Call.After(cancel.Call)) {
				cancel = x
			}
		}
		if cancel != nil {
			repushed := false
			for k := range evs {
				p := evs[k].op
				if evs[k].d == nil && isPut(p) && (p.OK() || p.Indeterminate()) && p.Call.Before(claim.Return) && c.bound(p).After(cancel.Call) {
					repushed = true
					break
				}
			}
			if !repushed {
				c.add(AnomalyAfterCancel, id, "cancel answered 204 at %s, delivered attempt %d by a claim begun at %s",
					cancel.Return.Format(time.StampMilli), e.d.Attempt, claim.Call.Format(time.StampMilli))
			}
		}
		// The attempt counts up from the delivery before, unless a put or
		// requeue may have reset it or a kill may have lost that claim.
		if prev != nil && !prev.op.Return.After(claim.Call) && e.d.Attempt <= prev.d.Attempt && !c.lostBetween(prev.op, claim.Return) {
			reset := false
			for j := range evs {
				op := evs[j].op
				if evs[j].d == nil && (isPut(op) || op.Kind == OpRequeue) && (op.OK() || op.Indeterminate()) &&
					op.Call.Before(claim.Return) && c.bound(op).After(prev.op.Call) {
					reset = true
					break
				}
			}
			if !reset {
				c.add(AnomalyAttempt, id, "delivered attempt %d at %s after attempt %d at %s, nothing reset it:\n%s",
					e.d.Attempt, claim.Return.Format(time.StampMilli), prev.d.Attempt, prev.op.Return.Format(time.StampMilli), describeAround(evs, claim.Call))
			}
		}
		if most := c.maxAttempts(evs, claim); most > 0 && e.d.Attempt > most {
			c.add(AnomalyAttempt, id, "delivered attempt %d of max_attempts %d at %s:\n%s", e.d.Attempt, most, claim.Return.Format(time.StampMilli), describeAround(evs, claim.Call))
		}
		prev = e
	}
}

// maxAttempts is the most max_attempts the job may have had at the claim:
// that of a put that may have been the last to take effect before the
// claim began, or of a put concurrent with it; 0 when unknown.
func (c *checker) maxAttempts(evs []jobEvent, claim *Op) int {
	most := 0
	for _, op := range c.lastBefore(evs, isPut, claim.Call) {
		most = max(most, op.MaxAttempts)
	}
	if most == 0 {
		return 0
	}
	for _, e := range evs {
		op := e.op
		if e.d == nil && isPut(op) && (op.OK() || op.Indeterminate()) && op.Call.Before(claim.Return) && !c.bound(op).Before(claim.Call) {
			most = max(most, op.MaxAttempts)
		}
	}
	return most
}

// lastBefore returns the operations of the job that match and may have
// been the last of them to take effect before t: answered 2xx, or without
// an answer that says, before t, and not surely followed by another
// answered 2xx (invoked after its answer, answered before t).
func (c *checker) lastBefore(evs []jobEvent, match func(*Op) bool, t time.Time) []*Op {
	var cands []*Op
	for _, e := range evs {
		op := e.op
		if e.d != nil || !match(op) || !(op.OK() || op.Indeterminate()) || !c.bound(op).Before(t) {
			continue
		}
		cands = append(cands, op)
	}
	// p is superseded by an answered one invoked after p's bound: by the
	// one of them invoked last, unless that is p, then by the one before.
	var latest, second *Op
	for _, q := range cands {
		switch {
		case !q.OK():
		case latest == nil || q.Call.After(latest.Call):
			latest, second = q, latest
		case second == nil || q.Call.After(second.Call):
			second = q
		}
	}
	var out []*Op
	for _, p := range cands {
		q := latest
		if q == p {
			q = second
		}
		if q == nil || !q.Call.After(c.bound(p)) {
			out = append(out, p)
		}
	}
	return out
}

// dueAt is the earliest moment a push, nack or requeue made its job due:
// a push's answered run_at, else its run_at or delay; a nack's delay (or a
// requeue's now) from its invocation, on its instance's clock where the
// allowances say so.
func (c *checker) dueAt(op *Op) time.Time {
	lo, _ := c.offsets(op)
	switch {
	case op.Kind == OpNack:
		return op.Call.Add(op.Delay + lo)
	case op.Kind == OpRequeue:
		return op.Call.Add(lo)
	case !op.AnswerRunAt.IsZero():
		return op.AnswerRunAt
	case !op.RunAt.IsZero():
		return op.RunAt
	}
	return op.Call.Add(op.Delay + lo)
}

// checkPauses: no claim begun after a pause's answer (and its bound) took
// a job of the topic, unless a resume may have come between.
func (c *checker) checkPauses() {
	// Per topic, the pauses by answer with the latest invocation among
	// them so far, and the resumes by invocation with the latest bound so
	// far: a claim is checked against the latest pause answered before
	// it, since a resume that ends a later pause ends every earlier one.
	type pause struct {
		op     *Op
		latest *Op // of the pauses answered by op's answer, the one invoked last
	}
	type resume struct {
		call, latest time.Time // invoked; the latest bound so far
	}
	pauses, resumes := map[string][]pause{}, map[string][]resume{}
	for i := range c.ops {
		switch op := &c.ops[i]; {
		case op.Kind == OpPause && op.OK():
			pauses[op.Topic] = append(pauses[op.Topic], pause{op: op})
		case op.Kind == OpResume && (op.OK() || op.Indeterminate()):
			rs := resumes[op.Topic]
			latest := c.bound(op)
			if len(rs) > 0 {
				latest = maxTime(latest, rs[len(rs)-1].latest)
			}
			resumes[op.Topic] = append(rs, resume{call: op.Call, latest: latest})
		}
	}
	for _, ps := range pauses {
		slices.SortFunc(ps, func(a, b pause) int { return a.op.Return.Compare(b.op.Return) })
		for i := range ps {
			ps[i].latest = ps[i].op
			if i > 0 && ps[i-1].latest.Call.After(ps[i].op.Call) {
				ps[i].latest = ps[i-1].latest
			}
		}
	}
	for i := range c.ops {
		claim := &c.ops[i]
		if claim.Kind != OpClaim || len(claim.Jobs) == 0 {
			continue
		}
		ps := pauses[claim.Topic]
		n, _ := slices.BinarySearchFunc(ps, claim.Call, func(p pause, t time.Time) int {
			if p.op.Return.Add(c.a.PauseBound).Before(t) {
				return -1
			}
			return 1
		})
		if n == 0 {
			continue
		}
		p := ps[n-1].latest
		rs := resumes[claim.Topic]
		m, _ := slices.BinarySearchFunc(rs, claim.Return, func(r resume, t time.Time) int {
			if r.call.Before(t) {
				return -1
			}
			return 1
		})
		if m > 0 && rs[m-1].latest.After(p.Call) {
			continue
		}
		c.add(AnomalyPaused, claim.Jobs[0].ID, "topic %s paused by an answer at %s, a claim begun at %s took %d jobs",
			p.Topic, p.Return.Format(time.StampMilli), claim.Call.Format(time.StampMilli), len(claim.Jobs))
	}
}

// checkModel checks the job's operations for linearizability against the
// model.
func (c *checker) checkModel(id string, evs []jobEvent) {
	tol := int64(c.tolerance(evs))
	skewed := tol > int64(c.a.ClockTolerance)
	var pops []porcupine.Operation
	first := evs[0].op.Call
	add := func(client int, op *Op, in *mInput) {
		in.Call, in.Ret, in.Tolerance, in.Skewed = op.Call.UnixNano(), c.bound(op).UnixNano(), tol, skewed
		in.Status = op.Status
		pops = append(pops, porcupine.Operation{ClientId: client, Input: in, Call: in.Call, Return: in.Ret})
	}
	for _, e := range evs {
		op := e.op
		first = minTime(first, op.Call)
		if e.d != nil {
			in := &mInput{Kind: mClaimed, Attempt: e.d.Attempt, Lease: e.d.Lease, Exp: e.d.LeaseExpiresAt.UnixNano(), Fragile: c.fragile(op),
				Durable: c.a.MasterFailover && op.OK()}
			in.Descr = fmt.Sprintf("claimed attempt %d lease %.8s exp %s", e.d.Attempt, e.d.Lease, e.d.LeaseExpiresAt.Format("15:04:05.000"))
			add(op.Client, op, in)
			continue
		}
		in := &mInput{Lease: op.Lease, Attempt: op.Attempt, State: op.State, Max: op.MaxAttempts, TTR: int64(op.TTR)}
		switch op.Kind {
		case OpPush:
			in.Kind = mCreate
			if op.Replace {
				in.Kind = mReplace
			}
			in.Durable = op.OK()
		case OpReplace:
			in.Kind, in.Durable = mReplace, op.OK()
		case OpCancel:
			in.Kind, in.Durable = mCancel, op.OK()
		case OpRequeue:
			in.Kind, in.Durable = mRequeue, op.OK()
		case OpGet:
			in.Kind = mGet
		case OpAck:
			in.Kind = mAck
		case OpNack:
			in.Kind = mNack
		case OpTouch:
			in.Kind = mTouch
			in.Exp = op.LeaseExpiresAt.UnixNano()
		default:
			continue
		}
		if isWrite(in.Kind) && op.Indeterminate() {
			// Answered only after its fsync: one without an answer may
			// have been applied, seen by claims, and lost by a kill
			// before its fsync (a long run found pushes so lost).
			in.Fragile = c.fragile(op)
		}
		if in.Kind == mAck || in.Kind == mNack || in.Kind == mTouch {
			in.Fragile = c.fragile(op)
			// A settle answered after a replica confirmed it.
			in.Durable = c.a.MasterFailover && op.OK()
		}
		in.Descr = describe(op)
		add(op.Client, op, in)
	}
	// Kills of a store that loses its last async writes, and of a
	// master whose replicas may not have them.
	var crashes []time.Time
	if c.a.AsyncWriteWindow > 0 {
		for _, ks := range c.kills {
			crashes = append(crashes, ks...)
		}
	}
	if c.a.MasterFailover {
		crashes = append(crashes, c.failovers...)
	}
	for _, k := range crashes {
		if k.After(first) {
			n := k.UnixNano()
			pops = append(pops, porcupine.Operation{ClientId: -1, Input: &mInput{Kind: mCrash, Call: n, Ret: n, Descr: "kill -9"}, Call: n, Return: n})
		}
	}
	// Claims of the topic that got no answer may have taken the job. Each
	// may also have taken nothing, and adding one that took nothing to
	// an order of the others leaves it an order (its step keeps the state
	// the next operation's expansions would reach anyway), so a job whose
	// operations fit the model without them needs no more; the others are
	// checked again with them. A long history has thousands, and most
	// jobs need none.
	if c.linearizable(pops) == porcupine.Ok {
		return
	}
	for i, op := range c.phantoms[c.topic[id]] {
		if c.bound(op).After(first) {
			in := &mInput{Kind: mPhantom, Fragile: c.fragile(op), Descr: "claim without answer, " + op.Call.Format("15:04:05.000")}
			add(op.Client, op, in)
			if op.ReleasedAtClose {
				// Its release is a step of its own, by the server, at any
				// moment up to the claim's bound.
				add(-2-i, op, &mInput{Kind: mRelease, Fragile: in.Fragile, Descr: "release of that claim, " + op.Call.Format("15:04:05.000")})
			}
		}
	}
	switch c.linearizable(pops) {
	case porcupine.Ok:
	case porcupine.Unknown:
		c.report.Unknown++
	default:
		c.add(AnomalyNotLinearizable, id, "no order of its operations fits the model:\n%s", describeAll(evs))
	}
}

// isWrite reports whether k is a write answered after its fsync.
func isWrite(k mKind) bool { return k == mCreate || k == mReplace || k == mCancel || k == mRequeue }

// linearizable checks one job's operations against the model.
func (c *checker) linearizable(pops []porcupine.Operation) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(jobModel, pops, 10*time.Second)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// describe is an operation in a line.
func describe(op *Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "c%d@%d %s", op.Client, op.Instance, op.Kind)
	if op.Lease != "" {
		fmt.Fprintf(&b, " lease %.8s", op.Lease)
	}
	if op.Kind == OpNack || (isPut(op) && op.Delay > 0) {
		fmt.Fprintf(&b, " delay %s", op.Delay)
	}
	if isPut(op) {
		fmt.Fprintf(&b, " max %d", op.MaxAttempts)
	}
	if op.Return.IsZero() {
		fmt.Fprintf(&b, " [%s, no answer]", op.Call.Format("15:04:05.000"))
		return b.String()
	}
	fmt.Fprintf(&b, " [%s, %s] %d", op.Call.Format("15:04:05.000"), op.Return.Format("15:04:05.000"), op.Status)
	if op.Kind == OpGet && op.Status == 200 {
		fmt.Fprintf(&b, " %s attempt %d", op.State, op.Attempt)
	}
	if op.Kind == OpTouch && op.OK() {
		fmt.Fprintf(&b, " exp %s", op.LeaseExpiresAt.Format("15:04:05.000"))
	}
	return b.String()
}

// describeAround lists a job's operations invoked within 3 s before t and
// 1 s after.
func describeAround(evs []jobEvent, t time.Time) string {
	var near []jobEvent
	for _, e := range evs {
		if e.op.Call.After(t.Add(-3*time.Second)) && e.op.Call.Before(t.Add(time.Second)) {
			near = append(near, e)
		}
	}
	return describeAll(near)
}

// describeAll lists a job's operations, at most 40.
func describeAll(evs []jobEvent) string {
	var lines []string
	for _, e := range evs {
		if e.d != nil {
			lines = append(lines, fmt.Sprintf("  c%d@%d claim [%s, %s] attempt %d lease %.8s exp %s", e.op.Client, e.op.Instance,
				e.op.Call.Format("15:04:05.000"), e.op.Return.Format("15:04:05.000"), e.d.Attempt, e.d.Lease, e.d.LeaseExpiresAt.Format("15:04:05.000")))
			continue
		}
		lines = append(lines, "  "+describe(e.op))
	}
	if len(lines) > 40 {
		lines = append(lines[:20], append([]string{"  ..."}, lines[len(lines)-20:]...)...)
	}
	return strings.Join(lines, "\n")
}
