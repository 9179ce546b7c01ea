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
//
// A scheduled job's wake-up travels sched -> lead -> soon (+ near) -> ready:
// its schedule on sched fires Lead before run_at into lead; the housekeeping
// consumer turns that into a schedule on soon, due at run_at (plus
// soonGrace) into ready, and a plain near message. The topic's fetcher gets
// the near message at once and holds it until run_at; a claim acknowledges
// it and purges the soon schedule before it fires. Unclaimed, the soon
// schedule fires into ready, so that counts and other instances see the job
// ready even when no claim of this topic runs.
//
// The topic's consumer never sees a schedule: the server purges a schedule's
// subject when it stores a schedule (a subject rollup) and when the schedule
// fires, and nats-server 2.15 mishandles such a purge on a consumer whose
// filter covers the subject (see doc.go, "Why near messages").
const (
	kindSched  = "sched"  // schedule of a scheduled job, fires Lead early into lead
	kindLead   = "lead"   // a fired sched, for the housekeeping consumer
	kindSoon   = "soon"   // schedule of a job due within Lead, fires at run_at into ready
	kindNear   = "near"   // plain twin of a soon schedule, for the topic's fetcher
	kindReady  = "ready"  // a job due
	kindLease  = "lease"  // schedule of a reserved job's lease expiry, fires into expire
	kindExpire = "expire" // a lease that ran out, for the housekeeping consumer
	kindDead   = "dead"   // marker of a dead job
)

// Kinds of marker of a finished job, for counts only: no consumer reads
// them, and each expires with its record (Nats-TTL). Their subjects,
// <prefix>.fin.<kind>.<topic>.<id>, have one token more than a wake-up's,
// so that the filter of a job's wake-ups (wakes) leaves them out: a purge
// by a filter scans the stream from the first message it matches to the
// last, and a marker, the newest message, would stretch that scan over
// every message stored since the job's previous wake-up.
const (
	kindDone      = "done"      // marker of a done job
	kindCancelled = "cancelled" // marker of a cancelled job
)

// soonGrace is how long after run_at a soon schedule fires when no claim
// took the job: long enough for a claim at run_at to delete it first.
const soonGrace = 100 * time.Millisecond

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

// marker is the subject of a finished job's marker of one kind.
func (n names) marker(kind, topic, id string) string {
	return n.prefix + ".fin." + kind + "." + topic + "." + id
}

// markerFilter filters the markers of one kind of a topic's jobs.
func (n names) markerFilter(kind, topic string) string {
	return n.prefix + ".fin." + kind + "." + topic + ".*"
}

// kindFilter filters the wake-ups of one kind of a topic's jobs. A job id is
// one token, so topic "a" never matches the jobs of topic "a.b".
func (n names) kindFilter(kind, topic string) string {
	return n.prefix + "." + kind + "." + topic + ".*"
}

// streamSubjects are the subjects of the job stream.
func (n names) streamSubjects() []string {
	s := []string{n.prefix + ".job.*"}
	for _, k := range []string{kindSched, kindLead, kindSoon, kindNear, kindReady, kindLease, kindExpire, kindDead} {
		s = append(s, n.prefix+"."+k+".>")
	}
	return append(s, n.prefix+".fin.>")
}

// topicKinds are the kinds of wake-up a topic's fetcher gets, one durable
// consumer each (see puller: one filter per consumer). Ready comes first:
// its consumer keeps the name of the single consumer of near and ready that
// earlier versions made, and must lose the near filter before the near
// consumer can exist (filters on a work-queue stream must not overlap).
var topicKinds = []string{kindReady, kindNear}

// topicConsumer names the durable consumer of one kind of a topic's
// wake-ups. Dots become underscores, and a hash of the topic keeps "a.b"
// and "a_b" apart.
func (n names) topicConsumer(kind, topic string) string {
	h := fnv.New32a()
	h.Write([]byte(topic))
	t := strings.ReplaceAll(topic, ".", "_")
	if len(t) > 100 {
		t = t[:100]
	}
	return fmt.Sprintf("%s_%s_%s_%08x", n.prefix, kind, t, h.Sum32())
}

// houseKinds are the kinds of wake-up the housekeeping gets, one durable
// consumer each, shared by every store instance of the prefix. Lead comes
// first, for the reason of topicKinds: its consumer keeps the name of the
// single consumer of lead and expire that earlier versions made.
var houseKinds = []string{kindLead, kindExpire}

// houseConsumer names the durable consumer of one kind of housekeeping
// wake-up.
func (n names) houseConsumer(kind string) string {
	if kind == kindLead {
		return n.prefix + "_house"
	}
	return n.prefix + "_house_" + kind
}

// parseWake splits a wake-up subject into kind, topic and id.
func (n names) parseWake(subject string) (kind, topic, id string, ok bool) {
	rest, ok := strings.CutPrefix(subject, n.prefix+".")
	if !ok {
		return "", "", "", false
	}
	kind, rest, ok = strings.Cut(rest, ".")
	if !ok {
		return "", "", "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", "", "", false
	}
	return kind, rest[:i], rest[i+1:], true
}

// idOf returns the job id of a wake-up subject: its last token.
func idOf(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// stamp says which record a wake-up was made for. A wake-up is published
// before its record is compared and set, so a reader may see it before the
// record: pending wake-ups name the record they follow (base, 0 for none),
// others the record they were made from.
type stamp struct {
	base    uint64 // sequence of the job's record the wake-up follows or matches
	pending bool   // made for a record not written yet, which will follow base
}

// pendingAfter stamps a wake-up published ahead of a compare-and-set
// against base.
func pendingAfter(base uint64) stamp { return stamp{base: base, pending: true} }

// matching stamps a wake-up made for the record at seq.
func matching(seq uint64) stamp { return stamp{base: seq} }

// wakeMsg builds a plain wake-up message. Its payload is the due time and
// the stamp: "<due unix ns> <base> <p|c>".
func wakeMsg(subject string, due time.Time, st stamp) *nats.Msg {
	b := strconv.AppendInt(nil, due.UnixNano(), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, st.base, 10)
	if st.pending {
		b = append(b, " p"...)
	} else {
		b = append(b, " c"...)
	}
	return &nats.Msg{Subject: subject, Header: nats.Header{}, Data: b}
}

// scheduleMsg builds a schedule that fires at at into target, carrying due
// and st.
func scheduleMsg(subject, target string, at, due time.Time, st stamp) *nats.Msg {
	m := wakeMsg(subject, due, st)
	// The header is set by hand: jetstream.WithScheduleAt cuts to seconds.
	m.Header.Set(hdrSchedule, "@at "+at.UTC().Format(time.RFC3339Nano))
	m.Header.Set(hdrScheduleTarget, target)
	return m
}

// parseWakeData parses a wake-up's payload; ok is false for a foreign one.
func parseWakeData(data []byte) (due time.Time, st stamp, ok bool) {
	f := strings.Fields(string(data))
	if len(f) != 3 {
		return time.Time{}, stamp{}, false
	}
	n, err1 := strconv.ParseInt(f[0], 10, 64)
	base, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, stamp{}, false
	}
	return time.Unix(0, n).UTC(), stamp{base: base, pending: f[2] == "p"}, true
}
