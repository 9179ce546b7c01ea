package natsstore

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// NATS headers the store sets.
const (
	hdrExpectLastSubjSeq = "Nats-Expected-Last-Subject-Sequence"
	hdrTTL               = "Nats-TTL"
	hdrSchedule          = "Nats-Schedule"
	hdrScheduleTarget    = "Nats-Schedule-Target"
)

// Kinds of wake-up message, the second token of their subjects.
const (
	kindSched  = "sched"  // schedule of a scheduled job, fires into ready
	kindReady  = "ready"  // a job due (or due within the lead time)
	kindLease  = "lease"  // schedule of a reserved job's lease expiry, fires into expire
	kindExpire = "expire" // a lease that ran out, for the expiry handler
	kindDead   = "dead"   // marker of a dead job
)

// names builds the subjects, stream and consumer names of one prefix.
type names struct {
	prefix string
	stream string // job records and wake-ups
	topics string // KV bucket of topic records
}

func newNames(prefix string) names {
	up := strings.ToUpper(prefix)
	return names{prefix: prefix, stream: up + "_JOBS", topics: up + "_TOPICS"}
}

// job is the subject of a job's record.
func (n names) job(id string) string { return n.prefix + ".job." + id }

// wake is the subject of a job's wake-up of one kind.
func (n names) wake(kind, topic, id string) string {
	return n.prefix + "." + kind + "." + topic + "." + id
}

// wakes filters every wake-up subject of one job: records have one token
// after the prefix's "job", wake-ups have the topic's tokens and the id, so
// the filter matches this job's wake-ups and nothing else.
func (n names) wakes(topic, id string) string { return n.prefix + ".*." + topic + "." + id }

// kindFilter filters the wake-ups of one kind of a topic's jobs. A job id is
// one token, so topic "a" never matches the jobs of topic "a.b".
func (n names) kindFilter(kind, topic string) string {
	return n.prefix + "." + kind + "." + topic + ".*"
}

// streamSubjects are the subjects of the job stream.
func (n names) streamSubjects() []string {
	s := []string{n.prefix + ".job.*"}
	for _, k := range []string{kindSched, kindReady, kindLease, kindExpire, kindDead} {
		s = append(s, n.prefix+"."+k+".>")
	}
	return s
}

// readyConsumer names the durable consumer of a topic's ready wake-ups.
// Dots become underscores, and a hash of the topic keeps "a.b" and "a_b"
// apart.
func (n names) readyConsumer(topic string) string {
	h := fnv.New32a()
	h.Write([]byte(topic))
	t := strings.ReplaceAll(topic, ".", "_")
	if len(t) > 100 {
		t = t[:100]
	}
	return fmt.Sprintf("%s_ready_%s_%08x", n.prefix, t, h.Sum32())
}

// expireConsumer names the durable consumer of lease expiries.
func (n names) expireConsumer() string { return n.prefix + "_expire" }

// idOf returns the job id of a wake-up subject: its last token.
func idOf(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// wakeMsg builds a plain wake-up message whose payload is the due time.
func wakeMsg(subject string, due time.Time) *nats.Msg {
	return &nats.Msg{
		Subject: subject,
		Header:  nats.Header{},
		Data:    strconv.AppendInt(nil, due.UnixNano(), 10),
	}
}

// scheduleMsg builds a schedule that fires at at into target, carrying due.
func scheduleMsg(subject, target string, at, due time.Time) *nats.Msg {
	m := wakeMsg(subject, due)
	// The header is set by hand: jetstream.WithScheduleAt cuts to seconds.
	m.Header.Set(hdrSchedule, "@at "+at.UTC().Format(time.RFC3339Nano))
	m.Header.Set(hdrScheduleTarget, target)
	return m
}

// dueOf parses the due time of a wake-up; ok is false for a foreign payload.
func dueOf(data []byte) (time.Time, bool) {
	n, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n).UTC(), true
}
