package core

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// Dead-letter notices. A topic's OnDead names another topic that gets a
// notice job for each of its jobs that goes dead, whatever sent it there:
// a failed last attempt, a nack or a subscriber gone on it, a lease that
// ran out on it, a bury. The notice topic's own delivery takes it on: a
// signed webhook with its retries, a NATS subject, pull consumers.
//
// The engine follows the deaths of such topics from the store, not from
// its own calls, since stores end expired leases themselves (the NATS
// server even fires them into dead): every TopicRefresh it lists each
// topic's dead jobs since its cursor (ListDeadJobs, Since) and pushes a
// notice for each it has not yet seen. A notice's id stands for the death
// (NoticeID), so the instances that all follow one topic push each notice
// once: a create of an id in use conflicts, and a notice already delivered
// is still found for the retention period, which is checked first. A
// notice is pushed at least once; a death that two instances meet in the
// same moment, just as the first's notice finished, may be told twice.

const (
	// noticeCatchUp is how far back an engine that starts looks for deaths
	// it has not told: those while no instance ran.
	noticeCatchUp = time.Hour
	// noticeLag is how far back from its cursor each round looks again: a
	// death is listed at its time, which a store may record a little late
	// (a lease expiry the store ends when it next looks).
	noticeLag = time.Minute
	// noticePage bounds the dead jobs one listing reads.
	noticePage = 1000
)

// NoticeType is the type of a dead-letter notice's body.
const NoticeType = "job.dead"

// DeadNotice is the body of a dead-letter notice job.
type DeadNotice struct {
	// Type is NoticeType.
	Type string `json:"type"`
	// Job is the job that went dead.
	Job NoticeJob `json:"job"`
}

// NoticeJob is the dead job a notice tells of.
type NoticeJob struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	Key   string `json:"key,omitempty"`
	// Body is the job's body; left out (BodyOmitted) when the notice would
	// exceed the body limit with it.
	Body        json.RawMessage `json:"body,omitempty"`
	BodyOmitted bool            `json:"body_omitted,omitempty"`
	RunAt       time.Time       `json:"run_at"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
	LastError   string          `json:"last_error"`
	CreatedAt   time.Time       `json:"created_at"`
	// DiedAt is when the job went dead.
	DiedAt time.Time `json:"died_at"`
}

// NoticeID returns the id of the notice of job id's death at died: "n-"
// and 32 hex digits of a SHA-256 of both, the same on every instance. A
// job that dies again after a requeue dies at another time: another
// notice.
func NoticeID(id string, died time.Time) string {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write(binary.BigEndian.AppendUint64([]byte{0}, uint64(died.UnixNano())))
	return noticeIDPrefix + hex.EncodeToString(h.Sum(nil)[:keyIDHexLen/2])
}

// noticeIDPrefix starts every NoticeID.
const noticeIDPrefix = "n-"

// IsNoticeID reports whether id has the form of a NoticeID. The death of
// a notice is not told: a notice topic whose notices go dead would
// otherwise tell of them for ever, through a cycle of OnDead.
func IsNoticeID(id string) bool { return isDerivedID(id, noticeIDPrefix) }

// notices follows the deaths of topics with OnDead and pushes their
// notices, a step of the engine's refresh loop, which alone uses it.
type notices struct {
	e *Engine
	// since is each followed topic's cursor: the latest death told.
	since map[string]time.Time
	// told holds the notices known to be pushed, by id, with their death
	// time, until they are older than any round reads.
	told map[string]time.Time
}

// follow pushes the notices of the deaths of every topic with OnDead
// that it has not told yet. A failure stops the topic's round where it
// was, for the next round to go on from.
func (n *notices) follow(ctx context.Context) {
	e := n.e
	e.mu.Lock()
	var followed []*Topic
	for _, t := range e.topics {
		if t.OnDead != "" {
			followed = append(followed, t)
		}
	}
	e.mu.Unlock()
	if len(followed) == 0 {
		return
	}
	if n.since == nil {
		n.since, n.told = map[string]time.Time{}, map[string]time.Time{}
	}
	now := e.clock.Now()
	for _, t := range followed {
		since, ok := n.since[t.Name]
		if !ok {
			since = now.Add(-noticeCatchUp)
		}
		last, err := n.followTopic(ctx, t, since)
		n.since[t.Name] = last
		if err != nil && ctx.Err() == nil {
			e.log.Warn("engine: dead-letter notices failed", "topic", t.Name, "on_dead", t.OnDead, "err", err)
		}
	}
	for id, died := range n.told {
		if died.Before(now.Add(-noticeCatchUp - noticeLag)) {
			delete(n.told, id)
		}
	}
}

// followTopic pushes the notices of t's deaths from noticeLag before
// since on that are not told yet, and returns the new cursor: the latest
// death told, since when there was none.
func (n *notices) followTopic(ctx context.Context, t *Topic, since time.Time) (time.Time, error) {
	e := n.e
	from := since.Add(-noticeLag)
	for {
		dead, err := e.store.ListDeadJobs(ctx, &ListDeadJobsParams{Topic: t.Name, Limit: noticePage, Since: from})
		if err != nil {
			return since, err
		}
		for _, j := range dead {
			if err := n.tell(ctx, t, j); err != nil {
				return since, err
			}
			if j.UpdatedAt.After(since) {
				since = j.UpdatedAt
			}
		}
		if len(dead) < noticePage || !dead[len(dead)-1].UpdatedAt.After(from) {
			return since, nil
		}
		from = dead[len(dead)-1].UpdatedAt
	}
}

// tell pushes the notice of dead job j of t unless it was told.
func (n *notices) tell(ctx context.Context, t *Topic, j *Job) error {
	e := n.e
	if IsNoticeID(j.ID) {
		return nil
	}
	// By the death's time as the notice tells it (ms), so that a receiver
	// can work the id out of the notice.
	id := NoticeID(j.ID, StoreTime(j.UpdatedAt))
	if _, ok := n.told[id]; ok {
		return nil
	}
	_, err := e.store.GetJob(ctx, id)
	switch {
	case err == nil:
		n.told[id] = j.UpdatedAt
		return nil
	case !errors.Is(err, ErrNotFound):
		return err
	}
	told := DeadNotice{Type: NoticeType, Job: NoticeJob{
		ID: j.ID, Topic: j.Topic, Key: j.Key, Body: j.Body, RunAt: StoreTime(j.RunAt), Attempt: j.Attempt,
		MaxAttempts: j.MaxAttempts, Priority: j.Priority, LastError: j.LastError,
		CreatedAt: StoreTime(j.CreatedAt), DiedAt: StoreTime(j.UpdatedAt),
	}}
	// Not IfAbsent: the GetJob above finds a notice kept; one that
	// finished meanwhile may be made again (told twice, as said above).
	if err := e.putMade(ctx, false, madeJob{ID: id, Topic: t.OnDead, Body: &told, TraceParent: j.TraceParent,
		Omit: func() { told.Job.Body, told.Job.BodyOmitted = nil, true }, Via: OriginNotices}); err != nil {
		return err
	}
	n.told[id] = j.UpdatedAt
	return nil
}
