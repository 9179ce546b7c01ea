package core

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// Job lifecycle events. A topic's Events names another topic that gets an
// event job for each of its jobs that finishes as one of Events.On: done
// (acknowledged), cancelled, dead (a failed last attempt, a bury, a lease
// that ran out on it) or expired (dead for its expiry). The event's body
// is a CloudEvents 1.0 JSON document (Event); the event topic's delivery
// takes it on, as anything else it delivers.
//
// The engine follows the store's record of finished jobs
// (Store.ListFinished), which each store writes in the same atomic write
// as the finish, from a cursor kept in a record (KindCursor, EventsCursor)
// that every instance reads and moves on: so no finish is missed, a kill
// -9 included. An event's id stands for the finish (EventID), and it is
// put only if absent (PutJobsParams.IfAbsent), so that instances following
// the record at once, or one that reads entries again after a crash, make
// it once while it is kept.

// Transitions Events.On may name.
const (
	EventDone      = "done"
	EventCancelled = "cancelled"
	EventDead      = "dead"
	EventExpired   = "expired"
)

// eventTransitions are the transitions of Events.On, all of them when On
// is empty.
var eventTransitions = []string{EventDone, EventCancelled, EventDead, EventExpired}

// Events configures a topic's lifecycle events.
type Events struct {
	// Topic is the topic that gets the events; empty: none.
	Topic string `json:"topic,omitempty"`
	// On are the transitions told: EventDone, EventCancelled, EventDead,
	// EventExpired; empty: all of them.
	On []string `json:"on,omitempty"`
}

// IsZero reports whether e sends no event.
func (e Events) IsZero() bool { return e.Topic == "" && len(e.On) == 0 }

// tells reports whether e sends an event for transition.
func (e Events) tells(transition string) bool {
	return e.Topic != "" && (len(e.On) == 0 || slices.Contains(e.On, transition))
}

// validate checks e as a part of topic's configuration.
func (e Events) validate(topic string) error {
	if e.IsZero() {
		return nil
	}
	if e.Topic == "" {
		return Invalid("events.topic", "events.topic is required with events.on")
	}
	if err := ValidateTopicName(e.Topic); err != nil {
		return Invalid("events.topic", "events.topic: %s", err)
	}
	if e.Topic == topic {
		return Invalid("events.topic", "events.topic must name another topic: an event's own finish is never told")
	}
	for i, on := range e.On {
		if !slices.Contains(eventTransitions, on) {
			return Invalid("events.on", "events.on: %q is not done, cancelled, dead or expired", on)
		}
		if slices.Contains(e.On[:i], on) {
			return Invalid("events.on", "events.on: %q given twice", on)
		}
	}
	return nil
}

// EventTypePrefix starts the CloudEvents type of every event:
// "delayq.job.done" and so on.
const EventTypePrefix = "delayq.job."

// Event is the body of an event job: a CloudEvents 1.0 document in its
// JSON form (structured mode).
type Event struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            EventData `json:"data"`
}

// EventData is the job an event tells of, as it finished.
type EventData struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	Key   string `json:"key,omitempty"`
	// State is done, cancelled or dead (dead for an expired job too).
	State     State  `json:"state"`
	Attempt   int    `json:"attempt"`
	LastError string `json:"last_error,omitempty"`
	// FinishedAt is when it finished.
	FinishedAt time.Time `json:"finished_at"`
	// Body is the job's body when the job was still found as it finished
	// and the event stays within the body limit with it; BodyOmitted says
	// it was left out.
	Body        json.RawMessage `json:"body,omitempty"`
	BodyOmitted bool            `json:"body_omitted,omitempty"`
}

// EventID returns the id of the event of job id's finish as transition
// at finished: "e-" and 32 hex digits of a SHA-256 of the three, the same
// on every instance.
func EventID(id, transition string, finished time.Time) string {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(transition))
	h.Write(binary.BigEndian.AppendUint64([]byte{0}, uint64(finished.UnixNano())))
	return eventIDPrefix + hex.EncodeToString(h.Sum(nil)[:keyIDHexLen/2])
}

// eventIDPrefix starts every EventID.
const eventIDPrefix = "e-"

// IsEventID reports whether id has the form of an EventID: the finish of
// an event job is never told, so that topics whose events go to each
// other make no endless chain.
func IsEventID(id string) bool { return isDerivedID(id, eventIDPrefix) }

// transitionOf returns the transition of a finished job's entry.
func transitionOf(f *FinishedJob) string {
	switch {
	case f.State == StateDone:
		return EventDone
	case f.State == StateCancelled:
		return EventCancelled
	case f.LastError == JobExpired:
		return EventExpired
	}
	return EventDead
}

// The cursor of the events, a record every instance reads and moves on.
const (
	// KindCursor holds the engine's cursors over the store's records.
	KindCursor = "cursor"
	// EventsCursor names the events' cursor among them.
	EventsCursor = "events"
	// eventsPage bounds the entries one read of the record returns.
	eventsPage = 500
)

// eventsCursor is the value of the events' cursor record: the Next of the
// last read, and when the cursor was made, before which no finish is told
// (a deployment that turns events on tells only what finishes from then).
type eventsCursor struct {
	After string    `json:"after"`
	Since time.Time `json:"since"`
}

// events follows the record of finished jobs for the topics with Events,
// a step of the engine's refresh loop, which alone uses it.
type events struct {
	e *Engine
}

// follow tells the finishes recorded since the cursor to the event topics
// of their topics, a page after another until the record's end, moving the
// cursor after each page. It reads nothing while no topic has Events. A
// failure stops the round where it was, for the next round to go on from;
// another instance's move of the cursor ends it too (that instance told
// those).
func (ev *events) follow(ctx context.Context) {
	e := ev.e
	e.mu.Lock()
	followed := false
	for _, t := range e.topics {
		if t.Events.Topic != "" {
			followed = true
			break
		}
	}
	e.mu.Unlock()
	if !followed && !ev.chained(ctx) {
		return
	}
	if err := ev.round(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, ErrConflict) {
		e.log.Warn("engine: job events failed", "err", err)
	}
}

// round reads pages of the record from the cursor and tells them, until
// the end. Errors: the store's; ErrConflict when another instance moved
// the cursor meanwhile.
func (ev *events) round(ctx context.Context) error {
	e := ev.e
	cur, rev, err := ev.cursor(ctx)
	if err != nil {
		return err
	}
	for {
		page, err := e.store.ListFinished(ctx, &ListFinishedParams{After: cur.After, Limit: eventsPage})
		if err != nil {
			return err
		}
		// The page's events in one put: a store call (a sync to disk on
		// the local store) per event held a burst's events to a few
		// hundred a second (docs/benchmarks.md).
		var made []madeJob
		for i := range page.Jobs {
			m, ok, err := ev.event(ctx, &page.Jobs[i], cur.Since)
			if err != nil {
				return err
			}
			if ok {
				made = append(made, m)
			}
		}
		if err := e.putMade(ctx, true, made...); err != nil {
			return err
		}
		if err := ev.chain(ctx, page.Jobs, cur.Since); err != nil {
			return err
		}
		if page.Next == cur.After {
			return nil
		}
		cur.After = page.Next
		value, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		if rev, err = e.store.PutRecord(ctx, &PutRecordParams{Kind: KindCursor, Name: EventsCursor, Value: value, Revision: rev}); err != nil {
			return err
		}
		if len(page.Jobs) < eventsPage {
			return nil
		}
	}
}

// start makes the events' cursor unless the deployment has one: at the
// record's oldest entry, telling what finishes from now. Another
// instance's that came first is kept. Errors: the store's.
func (ev *events) start(ctx context.Context) error {
	_, err := ev.e.store.GetRecord(ctx, KindCursor, EventsCursor)
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	value, err := json.Marshal(eventsCursor{Since: StoreTime(ev.e.clock.Now())})
	if err != nil {
		return err
	}
	_, err = ev.e.store.PutRecord(ctx, &PutRecordParams{Kind: KindCursor, Name: EventsCursor, Value: value})
	if errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

// cursor reads the events' cursor and its revision, making it first when
// there is none: PutTopic makes it, but a topic's configuration may come
// otherwise (a restored backup of the store's records).
func (ev *events) cursor(ctx context.Context) (eventsCursor, uint64, error) {
	var cur eventsCursor
	r, err := ev.e.store.GetRecord(ctx, KindCursor, EventsCursor)
	if errors.Is(err, ErrNotFound) {
		if err = ev.start(ctx); err == nil {
			r, err = ev.e.store.GetRecord(ctx, KindCursor, EventsCursor)
		}
	}
	if err != nil {
		return cur, 0, err
	}
	if err := json.Unmarshal(r.Value, &cur); err != nil {
		return cur, 0, err
	}
	return cur, r.Revision, nil
}

// event returns the event job of finished entry f, and false when there
// is none: its topic does not tell the transition, it finished before
// since, or it is an event's own finish. It is put only if absent.
func (ev *events) event(ctx context.Context, f *FinishedJob, since time.Time) (madeJob, bool, error) {
	e := ev.e
	if IsEventID(f.ID) || f.FinishedAt.Before(since) {
		return madeJob{}, false, nil
	}
	t := e.topic(f.Topic)
	transition := transitionOf(f)
	if !t.Events.tells(transition) {
		return madeJob{}, false, nil
	}
	at := StoreTime(f.FinishedAt)
	id := EventID(f.ID, transition, at)
	ce := Event{SpecVersion: "1.0", ID: id, Source: "delayq", Type: EventTypePrefix + transition, Subject: f.ID, Time: at,
		DataContentType: "application/json", Data: EventData{ID: f.ID, Topic: f.Topic, Key: f.Key, State: f.State,
			Attempt: f.Attempt, LastError: f.LastError, FinishedAt: at}}
	// The body, when the job is still the one that finished.
	if j, err := e.store.GetJob(ctx, f.ID); err == nil && j.Topic == f.Topic && StoreTime(j.UpdatedAt).Equal(at) {
		ce.Data.Body = j.Body
	} else if err != nil && !errors.Is(err, ErrNotFound) {
		return madeJob{}, false, err
	}
	return madeJob{ID: id, Topic: t.Events.Topic, Body: &ce, Omit: func() { ce.Data.Body, ce.Data.BodyOmitted = nil, true },
		Via: OriginEvents}, true, nil
}
