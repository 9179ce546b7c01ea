package telemetry

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/delayq/delayq/breaker"
	"github.com/delayq/delayq/core"
)

// Metric names, as OTel instruments; the Prometheus exporter turns dots into
// underscores and adds _total to counters and _seconds to durations.
const (
	metricJobs             = "delayq.jobs"
	metricPaused           = "delayq.topic.paused"
	metricRateLimited      = "delayq.rate.limited.jobs"
	metricIntake           = "delayq.intake.jobs"
	metricLateness         = "delayq.lateness"
	metricAttempts         = "delayq.attempts"
	metricDead             = "delayq.dead.jobs"
	metricDeliveryDuration = "delayq.delivery.duration"
	metricBreakerState     = "delayq.breaker.state"
	metricBreakerEndpoints = "delayq.breaker.open.endpoints"
	metricSubscribers      = "delayq.websocket.subscribers"
	metricSchedules        = "delayq.schedules"
	metricLag              = "delayq.topic.lag"
	metricSlotsFired       = "delayq.schedule.slots.fired"
	metricSlotsMissed      = "delayq.schedule.slots.missed"
	metricSlotsBlocked     = "delayq.schedule.slots.blocked"
)

// Attribute keys of metrics.
const (
	attrQueue     = attribute.Key("queue")
	attrTransport = attribute.Key("transport")
	attrOutcome   = attribute.Key("outcome")
	attrState     = attribute.Key("state")
	attrSchedule  = attribute.Key("schedule")
)

// Outcomes of intake, attempts and deliveries.
const (
	outcomeAccepted    = "accepted"
	outcomeReplaced    = "replaced"
	outcomeConflict    = "conflict"
	outcomeBreakerOpen = "breaker_open"
	outcomeUnavailable = "unavailable"
	outcomeError       = "error"
	outcomeOK          = "ok"
	outcomeFailed      = "failed"
	outcomeDead        = "dead"
	outcomeExpired     = "expired"
	outcomeReleased    = "released"
)

// latenessBuckets are the bounds of the lateness histogram, in seconds: fine
// below 10 ms, where delayq aims (p99 under 5 ms), coarse beyond.
var latenessBuckets = []float64{
	0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
}

// durationBuckets are the bounds of the delivery duration histogram.
var durationBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// instruments are the synchronous instruments of the decorators.
type instruments struct {
	intake           metric.Int64Counter
	lateness         metric.Float64Histogram
	attempts         metric.Int64Counter
	dead             metric.Int64Counter
	deliveryDuration metric.Float64Histogram
	slotsFired       metric.Int64Counter
	slotsMissed      metric.Int64Counter
	slotsBlocked     metric.Int64Counter
}

func newInstruments(m metric.Meter) (*instruments, error) {
	var in instruments
	var errs [8]error
	in.intake, errs[0] = m.Int64Counter(metricIntake, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs pushed, by outcome: accepted, replaced, conflict (id in use), breaker_open, unavailable, error. Input rejected by validation never reaches the store and is not counted."))
	in.lateness, errs[1] = m.Float64Histogram(metricLateness, metric.WithUnit("s"),
		metric.WithDescription("How long after its run_at a job was claimed for delivery (claim time minus run_at); redeliveries after a lost lease are not included."),
		metric.WithExplicitBucketBoundaries(latenessBuckets...))
	in.attempts, errs[2] = m.Int64Counter(metricAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Delivery attempts that ended, by outcome: ok (acknowledged), failed (retried later), dead (buried), expired (lease ran out without an answer)."))
	in.dead, errs[3] = m.Int64Counter(metricDead, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs that went dead through a failed last attempt or a bury; jobs whose last lease expired are counted by delayq_jobs{state=\"dead\"} only."))
	in.deliveryDuration, errs[4] = m.Float64Histogram(metricDeliveryDuration, metric.WithUnit("s"),
		metric.WithDescription("How long one push delivery attempt (webhook, nats) took, by outcome: ok, failed, breaker_open."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.slotsFired, errs[5] = m.Int64Counter(metricSlotsFired, metric.WithUnit("{slot}"),
		metric.WithDescription("Slots of recurring schedules that created their job, by schedule, counted by the instance that fired them."))
	in.slotsMissed, errs[6] = m.Int64Counter(metricSlotsMissed, metric.WithUnit("{slot}"),
		metric.WithDescription("Slots of recurring schedules that no instance fired within a minute (downtime) and whose missed policy passed over, by schedule."))
	in.slotsBlocked, errs[7] = m.Int64Counter(metricSlotsBlocked, metric.WithUnit("{slot}"),
		metric.WithDescription("Slots of recurring schedules that created no job because a job not made for the slot held its id (an unfinished job of the schedule's key, or a job that took the slot's id), by schedule, counted by each instance that fired the slot."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("telemetry: instruments: %w", err)
	}
	return &in, nil
}

// ObserveBreakers reports the state of the store's breaker as
// delayq_breaker_state (0 closed, 1 half-open, 2 open) and how many
// endpoint breakers of the deliverers given are not closed as
// delayq_breaker_open_endpoints. store may be nil. The returned func stops
// reporting.
func ObserveBreakers(cfg Config, store *breaker.Store, endpoints ...*breaker.Deliverer) (unregister func() error, err error) {
	cfg = cfg.WithDefaults()
	m := cfg.MeterProvider.Meter(scope)
	state, err := m.Int64ObservableGauge(metricBreakerState,
		metric.WithDescription("State of the store's circuit breaker: 0 closed, 1 half-open (probing), 2 open (calls fail at once)."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: breaker state: %w", err)
	}
	open, err := m.Int64ObservableGauge(metricBreakerEndpoints, metric.WithUnit("{endpoint}"),
		metric.WithDescription("Delivery circuits (a topic and its webhook host or NATS subject, or a job's own URL) whose breaker is open or half-open."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: breaker endpoints: %w", err)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if store != nil {
			o.ObserveInt64(state, int64(store.State()))
		}
		if len(endpoints) > 0 {
			n := 0
			for _, d := range endpoints {
				for _, e := range d.States() {
					if e.State != breaker.StateClosed {
						n++
					}
				}
			}
			o.ObserveInt64(open, int64(n))
		}
		return nil
	}, state, open)
	if err != nil {
		return nil, fmt.Errorf("telemetry: breaker callback: %w", err)
	}
	return reg.Unregister, nil
}

// Subscribers is the delayq_websocket_subscribers gauge: open WebSocket
// subscriptions by topic. Its Add method is the hook a transport takes as a
// func(topic string, delta int), so that the transport needs no OTel.
type Subscribers struct {
	gauge metric.Int64UpDownCounter
}

// NewSubscribers returns the subscribers gauge of cfg's meter provider.
func NewSubscribers(cfg Config) (*Subscribers, error) {
	cfg = cfg.WithDefaults()
	g, err := cfg.MeterProvider.Meter(scope).Int64UpDownCounter(metricSubscribers, metric.WithUnit("{subscriber}"),
		metric.WithDescription("Open WebSocket subscriptions, by topic."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: subscribers: %w", err)
	}
	return &Subscribers{gauge: g}, nil
}

// Add changes the number of a topic's subscribers by delta: +1 when a
// subscription opens, -1 when it closes. Safe for concurrent use.
func (s *Subscribers) Add(topic string, delta int) {
	s.gauge.Add(context.Background(), int64(delta), metric.WithAttributeSet(attribute.NewSet(attrQueue.String(topic))))
}

// transportOf returns the transport label of a call: the one its context
// names, else the topic's delivery type (webhook, nats, consumer).
func transportOf(named, deliveryType string) string {
	if named != "" {
		return named
	}
	if deliveryType != "" {
		return deliveryType
	}
	return core.DeliveryConsumer
}
