package natsstore

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/delayq/delayq/core"
)

// NATS headers the store sets.
const (
	hdrExpectLastSubjSeq     = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectLastSubjSeqSubj = "Nats-Expected-Last-Subject-Sequence-Subject"
	hdrTTL                   = "Nats-TTL"
	hdrSchedule              = "Nats-Schedule"
	hdrScheduleTarget        = "Nats-Schedule-Target"
	hdrScheduler             = "Nats-Scheduler"
	hdrScheduleNext          = "Nats-Schedule-Next"
	// hdrReplaces, on a schedule, is the sequence of the job's message it
	// replaced (0: none). The server copies it into the message the
	// schedule fires, which overtaken reads from.
	hdrReplaces = "Delayq-Replaces"
)

// Kinds of message, the second token of a job message's subject
// <prefix>.<kind>.<id>.<topic>: a job has one message, that of its state
// (see the package doc for how it moves). One letter each keeps subjects,
// which the server holds in memory per pending job, short.
const (
	kindSched     = "s" // schedule of a scheduled job, fires Lead before run_at into its due subject
	kindDue       = "d" // a job due (or within Lead of it), for the topic's consumer
	kindLease     = "r" // schedule of a reserved job, fires at the lease's expiry into its due (last attempt: dead) subject
	kindDead      = "x" // a dead job, or the lease of its last attempt that ran out
	kindDone      = "k" // a done job, with a TTL of the retention
	kindCancelled = "c" // a cancelled job, the same
)

// kinds are every kind, in the order counts read them.
var kinds = []string{kindSched, kindDue, kindLease, kindDead, kindDone, kindCancelled}

// isSchedule reports whether messages of kind are NATS schedules, which a
// later message of the job purges as it is stored (Nats-Schedule-Next:
// purge) rather than deleting them after.
func isSchedule(kind string) bool { return kind == kindSched || kind == kindLease }

// kindOf is the kind of message that holds j, a job in its new state, at
// now.
func kindOf(j *core.Job, now time.Time, lead time.Duration) string {
	switch j.State {
	case core.StateReserved:
		return kindLease
	case core.StateDead:
		return kindDead
	case core.StateDone:
		return kindDone
	case core.StateCancelled:
		return kindCancelled
	}
	if j.RunAt.Sub(now) > lead {
		return kindSched
	}
	return kindDue
}

// FormatVersion is the version of the stream layout this package writes,
// kept in the stream's metadata under metaFormat.
const FormatVersion = "2"

// metaFormat is the stream metadata key of the layout's version.
const metaFormat = "delayq-format"

// names builds the subjects, stream and consumer names of one prefix.
type names struct {
	prefix string
	stream string // job messages
	topics string // KV bucket of topic records
}

func newNames(prefix string) names {
	up := strings.ToUpper(prefix)
	return names{prefix: prefix, stream: up + "_QUEUE", topics: up + "_TOPICS"}
}

// subject is the subject of a job's message of one kind. The id comes
// before the topic, whose tokens end the subject, so that one filter
// matches all of a job's messages (jobFilter) and another all of a topic's
// messages of one kind (kindFilter).
func (n names) subject(kind, id, topic string) string {
	return n.prefix + "." + kind + "." + id + "." + topic
}

// jobFilter matches every message of one job, whatever its kind and topic:
// the compare-and-set of a write checks the last sequence among them.
func (n names) jobFilter(id string) string { return n.prefix + ".*." + id + ".>" }

// kindFilter matches a topic's messages of one kind. A job id is one token
// and the topic ends the subject, so topic "a" never matches "a.b".
func (n names) kindFilter(kind, topic string) string {
	return n.prefix + "." + kind + ".*." + topic
}

// streamSubjects are the subjects of the job stream: job messages and key
// entries.
func (n names) streamSubjects() []string {
	s := make([]string, 0, len(kinds)+1)
	for _, k := range kinds {
		s = append(s, n.prefix+"."+k+".>")
	}
	return append(s, n.prefix+"."+kindKey+".>")
}

// dueConsumer names the durable consumer of a topic's due messages. Dots
// become underscores, and a hash of the topic keeps "a.b" and "a_b" apart.
func (n names) dueConsumer(topic string) string {
	h := fnv.New32a()
	h.Write([]byte(topic))
	t := strings.ReplaceAll(topic, ".", "_")
	if len(t) > 100 {
		t = t[:100]
	}
	return fmt.Sprintf("%s_due_%s_%08x", n.prefix, t, h.Sum32())
}

// parse splits a job message's subject into kind, id and topic.
func (n names) parse(subject string) (kind, id, topic string, ok bool) {
	rest, ok := strings.CutPrefix(subject, n.prefix+".")
	if !ok {
		return "", "", "", false
	}
	kind, rest, ok = strings.Cut(rest, ".")
	if !ok {
		return "", "", "", false
	}
	id, topic, ok = strings.Cut(rest, ".")
	return kind, id, topic, ok && id != "" && topic != ""
}
