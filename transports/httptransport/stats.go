package httptransport

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
)

// Defaults of StatsConfig.
const (
	// StatsIntervalDefault is how often Stats samples its counters.
	StatsIntervalDefault = 5 * time.Second
	// StatsWindowDefault is how far back Stats keeps samples.
	StatsWindowDefault = 10 * time.Minute
)

// StatsCounters are cumulative counters, as a metrics registry keeps
// them, that Stats turns into rates by sampling.
type StatsCounters struct {
	// Intake counts, per topic, the jobs accepted (created or replaced).
	Intake map[string]float64
	// Deliveries counts, per topic, the delivery attempts that ended
	// (acked, retried, buried or expired).
	Deliveries map[string]float64
	// Retries counts, per topic, the attempts of Deliveries that failed
	// and left the job to be tried again: nacked, errored, or whose lease
	// ran out.
	Retries map[string]float64
	// Deaths counts, per topic, the attempts of Deliveries that buried
	// their job.
	Deaths map[string]float64
	// Lateness is, per topic, the histogram of how late claims took their
	// jobs, in seconds.
	Lateness map[string]Histogram
}

// Histogram is a cumulative histogram as Prometheus keeps one: Counts[i]
// observations at most Bounds[i] (seconds); observations above the last
// bound count only in Count.
type Histogram struct {
	Bounds []float64
	Counts []float64
	Count  float64
}

// BreakerState is the state of one circuit breaker.
type BreakerState struct {
	// Name is "store" for the store's breaker, else the topic and delivery
	// endpoint (webhook host, NATS subject or a job's own URL) of an
	// endpoint's breaker, such as "orders → svc:8443", or the endpoint
	// alone for one every topic shares (the Kafka cluster).
	Name string `json:"name"`
	// Endpoint is true for a delivery endpoint's breaker.
	Endpoint bool `json:"endpoint"`
	// State is closed, half-open or open.
	State string `json:"state"`
}

// StatsConfig configures Stats.
type StatsConfig struct {
	// CountersFunc reads the counters at each sample. Required.
	CountersFunc func(ctx context.Context) (StatsCounters, error)
	// BreakersFunc returns the breakers' states now; nil reports none.
	BreakersFunc func() []BreakerState
	// Interval between samples.
	//
	// Defaults to StatsIntervalDefault (5s).
	Interval time.Duration
	// Window is how far back samples are kept.
	//
	// Defaults to StatsWindowDefault (10m).
	Window time.Duration
	// Clock times the samples. Defaults to core.RealClock().
	Clock core.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Stats keeps the live statistics of GET /v1/stats: a ring of samples,
// each the rates and lateness of one interval, taken from cumulative
// counters the service already keeps (its metrics). It is safe for
// concurrent use.
type Stats struct {
	cfg StatsConfig

	mu      sync.Mutex
	last    *StatsCounters // counters at the previous sample
	lastAt  time.Time      // when they were read
	samples []statsSample  // ring, oldest at next once full
	next    int
}

// statsSample is one interval's rates and lateness, per topic.
type statsSample struct {
	at         time.Time
	intake     map[string]float64 // jobs per second
	deliveries map[string]float64 // attempts per second
	retries    map[string]float64 // failed attempts per second
	deaths     map[string]float64 // burying attempts per second
	lateness   map[string]Histogram
}

// NewStats returns a Stats; it samples once Run runs. It panics without
// CountersFunc.
func NewStats(cfg StatsConfig) *Stats {
	if cfg.CountersFunc == nil {
		panic("httptransport: StatsConfig.CountersFunc is required")
	}
	cfg.Interval = cmp.Or(cfg.Interval, StatsIntervalDefault)
	cfg.Window = cmp.Or(cfg.Window, StatsWindowDefault)
	if cfg.Clock == nil {
		cfg.Clock = core.RealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Stats{cfg: cfg}
}

// Run samples every Interval until ctx is done.
func (st *Stats) Run(ctx context.Context) {
	st.Sample(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.cfg.Clock.After(st.cfg.Interval):
			st.Sample(ctx)
		}
	}
}

// Sample reads the counters and, from the second sample on, records the
// interval since the previous one. A failed read is logged and skipped.
func (st *Stats) Sample(ctx context.Context) {
	c, err := st.cfg.CountersFunc(ctx)
	if err != nil {
		st.cfg.Logger.Warn("httptransport: stats sample", "err", err)
		return
	}
	now := st.cfg.Clock.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	prev, since := st.last, st.lastAt
	st.last, st.lastAt = &c, now
	if prev == nil {
		return
	}
	secs := now.Sub(since).Seconds()
	if secs <= 0 {
		return
	}
	s := statsSample{
		at:         now,
		intake:     rates(prev.Intake, c.Intake, secs),
		deliveries: rates(prev.Deliveries, c.Deliveries, secs),
		retries:    rates(prev.Retries, c.Retries, secs),
		deaths:     rates(prev.Deaths, c.Deaths, secs),
		lateness:   map[string]Histogram{},
	}
	for topic, h := range c.Lateness {
		if d, ok := h.minus(prev.Lateness[topic]); ok {
			s.lateness[topic] = d
		}
	}
	st.push(s)
}

// capacity is how many samples the ring holds.
func (st *Stats) capacity() int {
	return max(2, int(st.cfg.Window/st.cfg.Interval)+1)
}

// push adds s to the ring, over the oldest once it is full.
func (st *Stats) push(s statsSample) {
	if len(st.samples) < st.capacity() {
		st.samples = append(st.samples, s)
		return
	}
	st.samples[st.next] = s
	st.next = (st.next + 1) % len(st.samples)
}

// ordered returns the samples oldest first.
func (st *Stats) ordered() []statsSample {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]statsSample, 0, len(st.samples))
	out = append(out, st.samples[st.next:]...)
	return append(out, st.samples[:st.next]...)
}

// rates returns (cur-prev)/secs per key; a counter that went down (a
// restart of its source) counts from zero.
func rates(prev, cur map[string]float64, secs float64) map[string]float64 {
	out := make(map[string]float64, len(cur))
	for k, v := range cur {
		d := v - prev[k]
		if d < 0 {
			d = v
		}
		if d > 0 {
			out[k] = d / secs
		}
	}
	return out
}

// minus returns the observations of h that prev did not have, and false
// when there are none.
func (h Histogram) minus(prev Histogram) (Histogram, bool) {
	if h.Count-prev.Count <= 0 {
		return Histogram{}, false
	}
	d := Histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts)), Count: h.Count - prev.Count}
	same := slices.Equal(h.Bounds, prev.Bounds) && len(prev.Counts) == len(h.Counts)
	for i, c := range h.Counts {
		if same {
			c -= prev.Counts[i]
		}
		d.Counts[i] = c
	}
	if !same {
		d.Count = h.Count
	}
	return d, true
}

// add adds o's observations to h; histograms of other bounds are skipped.
func (h *Histogram) add(o Histogram) {
	if h.Bounds == nil {
		h.Bounds, h.Counts = o.Bounds, make([]float64, len(o.Counts))
	}
	if !slices.Equal(h.Bounds, o.Bounds) || len(h.Counts) != len(o.Counts) {
		return
	}
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.Count += o.Count
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile
// does: linear within the bucket that holds it; the last bound when it
// lies above every bound. NaN without observations.
func (h Histogram) quantile(q float64) float64 {
	if h.Count <= 0 {
		return math.NaN()
	}
	rank := q * h.Count
	lower, below := 0.0, 0.0
	for i, c := range h.Counts {
		if c >= rank {
			if c == below {
				return h.Bounds[i]
			}
			return lower + (h.Bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.Bounds[i], c
	}
	return lower
}

// statsView is the answer of GET /v1/stats.
type statsView struct {
	// Interval is the time between samples.
	Interval string `json:"interval"`
	// Samples are oldest first.
	Samples []statsSampleView `json:"samples"`
	// Topics are the topics that appear in Samples, sorted.
	Topics []string `json:"topics"`
	// Breakers are the circuit breakers' states now.
	Breakers []BreakerState `json:"breakers"`
}

// statsSampleView is one sample of GET /v1/stats.
type statsSampleView struct {
	Time time.Time `json:"time"`
	// IntakePerSecond, DeliveriesPerSecond, RetriesPerSecond and
	// DeathsPerSecond are per topic, over the interval that ends at Time;
	// topics without any are left out.
	IntakePerSecond     map[string]float64 `json:"intake_per_second"`
	DeliveriesPerSecond map[string]float64 `json:"deliveries_per_second"`
	RetriesPerSecond    map[string]float64 `json:"retries_per_second"`
	DeathsPerSecond     map[string]float64 `json:"deaths_per_second"`
	// LatenessP50 and LatenessP99 (seconds) are over the claims of the
	// interval on every topic shown; absent without claims.
	LatenessP50 *float64 `json:"lateness_p50,omitempty"`
	LatenessP99 *float64 `json:"lateness_p99,omitempty"`
	// Claims is how many jobs were claimed in the interval.
	Claims float64 `json:"claims"`
}

// stats serves GET /v1/stats: the samples of the last minutes, for the
// topics the token may use (all without tokens), or only the topic of the
// query's topic, whose page charts them, and the breakers' states (a
// token restricted to some topics sees only the store's, not the delivery
// endpoints, which other topics name).
func (s *Server) stats(w http.ResponseWriter, r *http.Request) error {
	v := statsView{Interval: StatsIntervalDefault.String(), Samples: []statsSampleView{}, Topics: []string{}, Breakers: []BreakerState{}}
	if s.liveStats == nil {
		s.writeJSON(w, r, http.StatusOK, v)
		return nil
	}
	only := r.URL.Query().Get("topic")
	allowed := func(topic string) bool { return (only == "" || topic == only) && service.Allows(r.Context(), topic) }
	topics := map[string]bool{}
	v.Interval = s.liveStats.cfg.Interval.String()
	// shown keeps the rates of the topics allowed, and notes them.
	shown := func(rates map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, x := range rates {
			if allowed(k) {
				out[k], topics[k] = x, true
			}
		}
		return out
	}
	for _, smp := range s.liveStats.ordered() {
		sv := statsSampleView{Time: smp.at.UTC(), IntakePerSecond: shown(smp.intake), DeliveriesPerSecond: shown(smp.deliveries),
			RetriesPerSecond: shown(smp.retries), DeathsPerSecond: shown(smp.deaths)}
		var late Histogram
		for k, h := range smp.lateness {
			if allowed(k) {
				late.add(h)
			}
		}
		if late.Count > 0 {
			p50, p99 := late.quantile(0.5), late.quantile(0.99)
			sv.LatenessP50, sv.LatenessP99, sv.Claims = &p50, &p99, late.Count
		}
		v.Samples = append(v.Samples, sv)
	}
	v.Topics = append(v.Topics, slices.Sorted(maps.Keys(topics))...)
	if f := s.liveStats.cfg.BreakersFunc; f != nil {
		for _, b := range f() {
			if id := service.IdentityFrom(r.Context()); b.Endpoint && id != nil && id.Restricted() {
				continue
			}
			v.Breakers = append(v.Breakers, b)
		}
	}
	s.writeJSON(w, r, http.StatusOK, v)
	return nil
}
