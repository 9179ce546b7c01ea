package core

import (
	"cmp"
	"container/heap"
	"context"
	"math"
	"sync"
	"time"
)

// Rate limits a topic's deliveries, by every instance and every way
// together (pull, WebSocket, webhook, NATS): a token bucket of Burst
// tokens that fills with Limit tokens every Period; each delivery takes
// one. Jobs over the limit wait, ready, for the next tokens; none is
// dropped. A zero Limit means no limit. With PerKey, each business key of
// the topic has a bucket of its own instead (ClaimJobsParams.KeyRate).
type Rate struct {
	// Limit is how many deliveries a Period allows.
	Limit int `json:"limit,omitempty"`
	// Period is the time Limit counts over. Defaults to 1s.
	Period time.Duration `json:"period,omitempty"`
	// Burst is how many deliveries may go at once after a quiet time.
	// Defaults to Limit.
	Burst int `json:"burst,omitempty"`
	// PerKey gives each business key (Job.Key) of the topic its own
	// bucket of Limit, Period and Burst, rather than the topic one: one
	// customer's endpoint at Limit a Period. Jobs without a key share one
	// bucket of their own. It needs a Limit; a store that cannot honour it
	// refuses the topic (TopicChecker).
	PerKey bool `json:"per_key,omitempty"`
}

// Rate limits.
const (
	// RateLimitMax bounds Rate.Limit and Rate.Burst.
	RateLimitMax = 1_000_000
	// RatePeriodMax bounds Rate.Period.
	RatePeriodMax = 24 * time.Hour
)

// WithDefaults returns r with Period and Burst filled when it limits.
func (r Rate) WithDefaults() Rate {
	if r.Limit == 0 {
		return Rate{}
	}
	r.Period = cmp.Or(r.Period, time.Second)
	r.Burst = cmp.Or(r.Burst, r.Limit)
	return r
}

// Validate checks the rate's ranges.
func (r *Rate) Validate() error {
	switch {
	case r.Limit < 0 || r.Limit > RateLimitMax:
		return Invalid("rate.limit", "rate.limit must be between 1 and %d (0 or absent: no limit)", RateLimitMax)
	case r.Limit == 0 && (r.Period != 0 || r.Burst != 0 || r.PerKey):
		return Invalid("rate.limit", "rate.limit is required with rate.period, rate.burst or rate.per_key")
	case r.Period < 0 || (r.Period != 0 && r.Period < time.Millisecond) || r.Period > RatePeriodMax:
		return Invalid("rate.period", "rate.period must be between 1ms and %s", RatePeriodMax)
	case r.Burst < 0 || r.Burst > RateLimitMax:
		return Invalid("rate.burst", "rate.burst must be between 1 and %d", RateLimitMax)
	}
	return nil
}

// TakeRateParams are the arguments of Store.TakeRate.
type TakeRateParams struct {
	Topic string
	// Rate is the topic's limit, defaults filled, Limit at least 1.
	Rate Rate
	// Want is how many tokens to take, at most what the bucket holds; a
	// negative Want gives -Want tokens back (a claim that took fewer jobs
	// than tokens), never past Burst.
	Want int
}

// TakeRateResult is what Store.TakeRate did.
type TakeRateResult struct {
	// Granted is how many tokens were taken, 0 to Want.
	Granted int
	// Next is how long until the bucket holds a token again, when it is
	// empty after the take; 0 when it is not.
	Next time.Duration
}

// Bucket is a token bucket as stores keep it: the tokens it held at At.
// Stores that keep it in memory or as a record share its arithmetic.
type Bucket struct {
	Tokens float64   `json:"tokens"`
	At     time.Time `json:"at"`
}

// Take takes up to want tokens from b at now (a negative want gives them
// back) under rate r, defaults filled, and returns the result; a zero b is
// a full bucket.
func (b *Bucket) Take(r Rate, want int, now time.Time) TakeRateResult {
	perToken := float64(r.Period) / float64(r.Limit)
	// (A bucket stamped ahead, by an instance whose clock is, fills from
	// its stamp.)
	if b.At.IsZero() || now.After(b.At) {
		b.Tokens, b.At = b.tokens(r, now), now
	}
	if want < 0 {
		b.Tokens = math.Min(float64(r.Burst), b.Tokens-float64(want))
		return TakeRateResult{}
	}
	granted := min(want, int(b.Tokens))
	b.Tokens -= float64(granted)
	var next time.Duration
	if b.Tokens < 1 {
		next = time.Duration(math.Ceil((1 - b.Tokens) * perToken))
	}
	return TakeRateResult{Granted: granted, Next: next}
}

// Buckets keeps the buckets of rate limits, by topic, for a store that one
// process alone uses (memory, local): in memory, since a restart may well
// give a limit a full bucket again. Its zero value is ready to use.
type Buckets struct {
	mu sync.Mutex
	m  map[string]*Bucket
}

// Take is Store.TakeRate over b at now.
func (b *Buckets) Take(params *TakeRateParams, now time.Time) (TakeRateResult, error) {
	if err := CheckRate(params); err != nil {
		return TakeRateResult{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = make(map[string]*Bucket)
	}
	bk := b.m[params.Topic]
	if bk == nil {
		bk = &Bucket{}
		b.m[params.Topic] = bk
	}
	return bk.Take(params.Rate, params.Want, now), nil
}

// tokens returns what b holds at now under rate r, defaults filled,
// leaving b as it is: a zero b is full, and one stamped after now holds
// what it held.
func (b *Bucket) tokens(r Rate, now time.Time) float64 {
	if b.At.IsZero() {
		return float64(r.Burst)
	}
	t := b.Tokens
	if now.After(b.At) {
		t += float64(now.Sub(b.At)) / (float64(r.Period) / float64(r.Limit))
	}
	return math.Min(float64(r.Burst), t)
}

// KeyRates is what a store that applies ClaimJobsParams.KeyRate under its
// own lock keeps of one topic: a token bucket per business key (Bucket's
// arithmetic; jobs without a key share the bucket of key ""), in memory,
// so that a restart refills every bucket, and the keys that wait for a
// token with jobs parked, ordered by when their bucket holds one again. A
// full bucket needs no entry: the buckets held are those of keys with
// parked jobs or recent deliveries. Its zero value is ready to use; it is
// not safe for concurrent use.
type KeyRates struct {
	rate    Rate
	buckets map[string]*Bucket
	// sweepAt is the number of buckets at which Take drops the full ones.
	sweepAt int
	waits   keyWaits
}

// keyRatesSweepMin is the fewest buckets a sweep of full ones waits for.
const keyRatesSweepMin = 64

// Rate returns the rate the buckets follow; a zero Limit: none.
func (k *KeyRates) Rate() Rate { return k.rate }

// Set makes r the rate of the buckets (a zero Limit: none) and says
// whether it changed. A change forgets the waiting keys, whose parked jobs
// the store moves back to ready for claims to look at under the new rate;
// buckets keep their tokens (as Store.TakeRate's do) unless r does not
// limit, when they go too.
func (k *KeyRates) Set(r Rate) bool {
	if r == k.rate {
		return false
	}
	k.rate = r
	k.waits = nil
	if r.Limit == 0 {
		k.buckets, k.sweepAt = nil, 0
	}
	return true
}

// Take takes a token from key's bucket at now, true when it had one; with
// none, it returns when the bucket holds one again. The rate must limit.
func (k *KeyRates) Take(key string, now time.Time) (time.Time, bool) {
	b := k.buckets[key]
	if b == nil {
		if len(k.buckets) >= k.sweepAt {
			k.sweep(now)
		}
		b = &Bucket{}
		k.buckets[key] = b
	}
	res := b.Take(k.rate, 1, now)
	if res.Granted == 1 {
		return time.Time{}, true
	}
	return now.Add(res.Next), false
}

// sweep drops the buckets full at now, and sets the number of buckets
// at which the next sweep comes to twice those left: the cost of sweeps
// is spread over the buckets made.
func (k *KeyRates) sweep(now time.Time) {
	if k.buckets == nil {
		k.buckets = make(map[string]*Bucket)
	}
	for key, b := range k.buckets {
		if b.tokens(k.rate, now) >= float64(k.rate.Burst) {
			delete(k.buckets, key)
		}
	}
	k.sweepAt = max(2*len(k.buckets), keyRatesSweepMin)
}

// Tokens returns the whole tokens key's bucket holds at now, n, and when
// it holds a token again once those n are taken.
func (k *KeyRates) Tokens(key string, now time.Time) (n int, next time.Time) {
	t := float64(k.rate.Burst)
	if b := k.buckets[key]; b != nil {
		t = b.tokens(k.rate, now)
	}
	n = int(t)
	perToken := float64(k.rate.Period) / float64(k.rate.Limit)
	return n, now.Add(time.Duration(math.Ceil((float64(n+1) - t) * perToken)))
}

// Wait puts key among the waiting keys, due at at (what Take answered). A
// key may be waiting more than once, or no more (its parked jobs gone): the
// store keeps the at of each waiting key and passes over the others when
// Due gives them.
func (k *KeyRates) Wait(key string, at time.Time) {
	heap.Push(&k.waits, keyWait{key: key, at: at})
}

// Unwait forgets every waiting key, for a store that moved their parked
// jobs back to ready.
func (k *KeyRates) Unwait() { k.waits = nil }

// Due takes out and returns the waiting key of the earliest time, if that
// time came by now.
func (k *KeyRates) Due(now time.Time) (key string, at time.Time, ok bool) {
	if len(k.waits) == 0 || k.waits[0].at.After(now) {
		return "", time.Time{}, false
	}
	w := heap.Pop(&k.waits).(keyWait)
	return w.key, w.at, true
}

// Next returns the earliest time of a waiting key, zero for none.
func (k *KeyRates) Next() time.Time {
	if len(k.waits) == 0 {
		return time.Time{}
	}
	return k.waits[0].at
}

// keyWait is a key waiting for a token until at.
type keyWait struct {
	key string
	at  time.Time
}

// keyWaits is a min-heap of waiting keys by time.
type keyWaits []keyWait

func (h keyWaits) Len() int           { return len(h) }
func (h keyWaits) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h keyWaits) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyWaits) Push(x any)        { *h = append(*h, x.(keyWait)) }
func (h *keyWaits) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

// claimDue claims as Store.ClaimJobs does, within the topic's max_in_flight
// key_concurrency, fair and rate per key (which the store applies) and
// rate limit: it takes tokens for up to p.Max jobs, waiting (within
// p.Wait) for the first, claims as many jobs as it got tokens and gives
// back the tokens the claim did not use. A topic without a limit, or with
// one per key, costs nothing more.
func (e *Engine) claimDue(ctx context.Context, p *ClaimJobsParams) ([]*Job, error) {
	topic := e.topic(p.Topic)
	rate, inFlight, perKey, fair := topic.Rate, topic.MaxInFlight, topic.KeyConcurrency, topic.Fair
	if rate.Limit == 0 || rate.PerKey {
		var keyRate Rate
		if rate.PerKey {
			keyRate = rate
		}
		return e.store.ClaimJobs(ctx, &ClaimJobsParams{Topic: p.Topic, Max: p.Max, Wait: p.Wait, InFlightMax: inFlight, KeyConcurrency: perKey, Fair: fair,
			KeyRate: keyRate, Via: p.Via, Instance: e.instance, Consumer: p.Consumer})
	}
	deadline := e.clock.Now().Add(p.Wait)
	for {
		res, err := e.store.TakeRate(ctx, &TakeRateParams{Topic: p.Topic, Rate: rate, Want: p.Max})
		if err != nil {
			return nil, err
		}
		if res.Granted > 0 {
			wait := max(deadline.Sub(e.clock.Now()), 0)
			jobs, err := e.store.ClaimJobs(ctx, &ClaimJobsParams{Topic: p.Topic, Max: res.Granted, Wait: wait, InFlightMax: inFlight, KeyConcurrency: perKey,
				Fair: fair, Via: p.Via, Instance: e.instance, Consumer: p.Consumer})
			if unused := res.Granted - len(jobs); unused > 0 {
				// Given back even when ctx ended: the tokens were not used.
				gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
				if _, gerr := e.store.TakeRate(gctx, &TakeRateParams{Topic: p.Topic, Rate: rate, Want: -unused}); gerr != nil {
					e.log.Warn("engine: giving back rate tokens failed", "topic", p.Topic, "tokens", unused, "err", gerr)
				}
				cancel()
			}
			return jobs, err
		}
		left := deadline.Sub(e.clock.Now())
		if left <= 0 {
			return []*Job{}, nil
		}
		select {
		case <-ctx.Done():
			return []*Job{}, nil
		case <-e.clock.After(min(max(res.Next, time.Millisecond), left)):
		}
	}
}
