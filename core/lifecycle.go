package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Start runs the engine's background services and returns once they run:
// the dispatchers of topics delivered by webhook or NATS, the topic
// refresh (which follows configuration changes made through other
// instances, and dead jobs for their notices), the schedule loop and the
// expiry sweep, but those its Roles leave to other instances (the refresh
// always runs, without the notices when deliveries are skipped). It
// loads the topic configurations first; a failure of that load is logged
// and retried by the refresh every missingRetry, and until one succeeds
// pushes and claims fail with errTopicsMissing, since a topic's settings
// (unique keys, rate, key limits) would go unheeded. Errors: the engine
// was started or stopped before.
func (e *Engine) Start(ctx context.Context) error {
	if !e.roles.SkipDeliveries {
		if err := e.dispatch.Start(ctx); err != nil {
			return err
		}
	}
	e.migrateTopics(ctx) // else again by the topic refresh
	if err := e.loadTopics(ctx); err != nil {
		e.topicsMissing.Store(true)
		e.log.Warn("engine: first topic load failed; retrying in the background, pushes and claims refused until then", "err", err)
	}
	e.migrateSchedules(ctx) // else again by the schedule loop
	errs := []error{e.refresh.Start(ctx)}
	if !e.roles.SkipSchedules {
		errs = append(errs, e.schedules.Start(ctx))
	}
	if !e.roles.SkipDeliveries {
		errs = append(errs, e.expiry.Start(ctx))
	}
	return errors.Join(errs...)
}

// Stop stops the background services: the refresh, schedule and expiry loops, then
// the dispatchers, which claim no more and wait until ctx is done for the
// deliveries in flight to finish, then interrupt those still running
// (each releases its job for redelivery at once), returning ctx's error.
// It is idempotent and safe before Start.
func (e *Engine) Stop(ctx context.Context) error {
	loops := errors.Join(e.refresh.Stop(ctx), e.schedules.Stop(ctx), e.expiry.Stop(ctx))
	return errors.Join(loops, e.dispatch.Stop(ctx))
}

// topicRefresh is the engine's service that reads the topic
// configurations again every TopicRefresh, or when asked (readNow), so
// that the changes of other instances take effect here, then tells the
// deaths of topics with on_dead (notice.go).
type topicRefresh struct {
	e     *Engine
	every time.Duration
	life  startStop // its wake asks the loop to read the topics now
}

// Start runs the loop and returns at once. Errors: errStarted.
func (r *topicRefresh) Start(ctx context.Context) error { return r.life.start(ctx, r.run) }

// Stop ends the loop, waiting for it until ctx is done. Idempotent; safe
// before Start.
func (r *topicRefresh) Stop(ctx context.Context) error { return r.life.stop(ctx) }

// readNow asks the loop to read the topics again now.
func (r *topicRefresh) readNow() { r.life.nudge() }

func (r *topicRefresh) run(ctx context.Context) {
	e := r.e
	t := e.clock.NewTicker(r.every)
	defer t.Stop()
	for {
		// Until the topics are read once, the engine refuses pushes and
		// claims: try again soon rather than at the next tick.
		var (
			soon  Timer
			soonC <-chan time.Time
		)
		if e.topicsMissing.Load() {
			soon = e.clock.NewTimer(missingRetry)
			soonC = soon.Chan()
		}
		select {
		case <-ctx.Done():
		case <-t.Chan():
		case <-soonC:
		case <-r.life.wake:
		}
		if soon != nil {
			soon.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		e.migrateTopics(ctx)
		if err := e.loadTopics(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("engine: topic refresh failed", "err", err)
		}
		if !e.roles.SkipDeliveries {
			e.notices.follow(ctx)
			e.events.follow(ctx)
		}
	}
}

// missingRetry is how soon the refresh reads the topics again while it
// has not read them once.
const missingRetry = 200 * time.Millisecond

// loadTopics replaces the topic cache with the store's configurations.
func (e *Engine) loadTopics(ctx context.Context) error {
	list, err := listTopicConfigs(ctx, e.store)
	if err != nil {
		return err
	}
	m := make(map[string]*Topic, len(list))
	for _, t := range list {
		m[t.Name] = t
	}
	e.cacheTopics(m, true)
	e.topicsMissing.Store(false)
	return nil
}

// errTopicsMissing refuses a push or a claim of a started engine that has
// not read the topics' configurations yet (a backend that did not answer
// at its start): taken, a keyed push to a topic with unique keys would
// make a second job of its key (the likely cause of a job no push named
// in an hour-long history run on NATS), and a claim would pass over a
// topic's rate and key limits.
var errTopicsMissing = fmt.Errorf("%w: the topics' configurations are not read yet", ErrUnavailable)

// cacheTopics updates the topic cache with ts (replacing it whole when
// full) and has the dispatchers follow it.
func (e *Engine) cacheTopics(ts map[string]*Topic, full bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if full {
		e.topics = make(map[string]*Topic, len(ts))
	}
	for name, t := range ts {
		d := t.WithDefaults()
		d.Counts = Counts{}
		e.topics[name] = &d
	}
	e.dispatch.apply(maps.Clone(e.topics))
	if o, ok := capability[TopicObserver](e.store); ok {
		o.ObserveTopics(maps.Clone(e.topics))
	}
}
