package core

import (
	"cmp"
	"context"
	"math"
	"sync"
	"time"
)

// Rate limits a topic's deliveries, by every instance and every way
// together (pull, WebSocket, webhook, NATS): a token bucket of Burst
// tokens that fills with Limit tokens every Period; each delivery takes
// one. Jobs over the limit wait, ready, for the next tokens; none is
// dropped. A zero Limit means no limit.
type Rate struct {
	// Limit is how many deliveries a Period allows.
	Limit int `json:"limit,omitempty"`
	// Period is the time Limit counts over. Defaults to 1s.
	Period time.Duration `json:"period,omitempty"`
	// Burst is how many deliveries may go at once after a quiet time.
	// Defaults to Limit.
	Burst int `json:"burst,omitempty"`
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
	case r.Limit == 0 && (r.Period != 0 || r.Burst != 0):
		return Invalid("rate.limit", "rate.limit is required with rate.period or rate.burst")
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
	switch {
	case b.At.IsZero():
		b.Tokens, b.At = float64(r.Burst), now
	case now.After(b.At):
		// (A bucket stamped ahead, by an instance whose clock is, fills
		// from its stamp.)
		b.Tokens = math.Min(float64(r.Burst), b.Tokens+float64(now.Sub(b.At))/perToken)
		b.At = now
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

// claimDue claims as Store.ClaimJobs does, within the topic's max_in_flight
// key_concurrency and fair (which the store applies) and rate limit:
// it takes tokens for up to p.Max jobs, waiting (within p.Wait) for the
// first, claims as many jobs as it got tokens and gives back the tokens
// the claim did not use. A topic without a limit costs nothing more.
func (e *Engine) claimDue(ctx context.Context, p *ClaimJobsParams) ([]*Job, error) {
	topic := e.topic(p.Topic)
	rate, inFlight, perKey, fair := topic.Rate, topic.MaxInFlight, topic.KeyConcurrency, topic.Fair
	if rate.Limit == 0 {
		return e.store.ClaimJobs(ctx, &ClaimJobsParams{Topic: p.Topic, Max: p.Max, Wait: p.Wait, InFlightMax: inFlight, KeyConcurrency: perKey, Fair: fair,
			Via: p.Via, Instance: e.instance, Consumer: p.Consumer})
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
