package core

import (
	"slices"
	"strings"
	"time"
)

// Change is one thing that happened to a job besides its deliveries, as
// its Changes keep it: its creation, a replace, a requeue.
type Change struct {
	// At is when it happened (store precision, UTC).
	At time.Time `json:"at"`
	// Kind is what happened, one of the Change constants.
	Kind string `json:"kind"`
	// Via is how the push that made the change came, one of the Origin
	// constants; empty for a requeue and when unknown.
	Via string `json:"via,omitempty"`
	// Token is the name of the API token that pushed it (CleanName'd);
	// empty without tokens.
	Token string `json:"token,omitempty"`
}

// The kinds of a Change.
const (
	ChangeCreated  = "created"
	ChangeReplaced = "replaced"
	ChangeRequeued = "requeued"
)

// How a push came (Change.Via, PushBatchParams.Via): by a client over
// HTTP, gRPC, NATS or Kafka (the transport's name, WithTransport), or made
// by delayq itself: a schedule's slot, an import, a chain's next step, a
// topic's event or a dead-letter notice.
const (
	OriginHTTP     = TransportHTTP
	OriginGRPC     = TransportGRPC
	OriginNATS     = TransportNATS
	OriginKafka    = TransportKafka
	OriginSchedule = "schedule"
	OriginImport   = "import"
	OriginChain    = "chain"
	OriginEvents   = "events"
	OriginNotices  = "notices"
)

// ChangesMax is how many changes a job's Changes keep: the oldest is
// dropped for a new one past it.
const ChangesMax = 20

// AppendChange returns changes, not changed, with c after them, the oldest
// dropped past ChangesMax.
func AppendChange(changes []Change, c Change) []Change {
	out := make([]Change, 0, min(len(changes)+1, ChangesMax))
	if len(changes) >= ChangesMax {
		changes = changes[len(changes)-ChangesMax+1:]
	}
	return append(append(out, changes...), c)
}

// NameMaxLen bounds the names a job's trail keeps: an instance's, a
// consumer's address, a token's.
const NameMaxLen = 64

// CleanName returns s as a job's trail keeps a name (an instance, a
// consumer's address, a token's name): cut to NameMaxLen bytes, control
// characters and the separators ',', '/' and '|' replaced by '_', so that
// every store can keep it in a compact form.
func CleanName(s string) string {
	if len(s) > NameMaxLen {
		s = strings.ToValidUTF8(s[:NameMaxLen], "")
	}
	if !strings.ContainsFunc(s, badNameRune) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if badNameRune(r) {
			return '_'
		}
		return r
	}, s)
}

func badNameRune(r rune) bool {
	return r < 0x20 || r == 0x7f || r == ',' || r == '/' || r == '|'
}

// TrailEntry is one step of a job's trail (Trail).
type TrailEntry struct {
	// At is when it happened: for a delivery, when it started.
	At time.Time `json:"at"`
	// Event is what happened, one of the Trail constants.
	Event string `json:"event"`
	// Via is, for created and replaced, how the push came (an Origin
	// constant, Change.Via); for delivered, how it was delivered (a Via
	// constant, Attempt.Via).
	Via string `json:"via,omitempty"`
	// Token is the name of the token that pushed (Change.Token).
	Token string `json:"token,omitempty"`
	// Instance and Consumer say, for delivered, which instance handed the
	// job out and to which consumer's address (Attempt).
	Instance string `json:"instance,omitempty"`
	Consumer string `json:"consumer,omitempty"`
	// Attempt, Outcome, EndedAt and Error are a delivery's (Attempt):
	// Outcome and EndedAt are empty while it is in progress.
	Attempt int       `json:"attempt,omitempty"`
	Outcome string    `json:"outcome,omitempty"`
	EndedAt time.Time `json:"ended_at,omitzero"`
	Error   string    `json:"error,omitempty"`
}

// The events of a job's trail (TrailEntry.Event): the kinds of a Change,
// and these.
const (
	TrailCreated   = ChangeCreated
	TrailReplaced  = ChangeReplaced
	TrailRequeued  = ChangeRequeued
	TrailDelivered = "delivered"
	TrailCancelled = "cancelled"
	TrailExpired   = "expired"
)

// TrailMax is how many entries Trail returns at most: the newest.
const TrailMax = 50

// Trail returns j's trail, oldest first, the last TrailMax entries: its
// Changes, a delivered entry per attempt of its History (with the
// attempt's outcome), and, when it ended so, cancelled or expired at its
// UpdatedAt. Entries at the same time keep that order. Every surface
// that shows a job's trail calls it.
func Trail(j *Job) []TrailEntry {
	out := make([]TrailEntry, 0, len(j.Changes)+len(j.History)+1)
	for _, c := range j.Changes {
		out = append(out, TrailEntry{At: c.At, Event: c.Kind, Via: c.Via, Token: c.Token})
	}
	for _, a := range j.History {
		out = append(out, TrailEntry{At: a.StartedAt, Event: TrailDelivered, Via: a.Via, Instance: a.Instance,
			Consumer: a.Consumer, Attempt: a.Attempt, Outcome: a.Outcome, EndedAt: a.EndedAt, Error: a.Error})
	}
	switch {
	case j.State == StateCancelled:
		out = append(out, TrailEntry{At: j.UpdatedAt, Event: TrailCancelled})
	case j.State == StateDead && j.LastError == JobExpired:
		out = append(out, TrailEntry{At: j.UpdatedAt, Event: TrailExpired})
	}
	slices.SortStableFunc(out, func(a, b TrailEntry) int { return a.At.Compare(b.At) })
	if len(out) > TrailMax {
		out = out[len(out)-TrailMax:]
	}
	return out
}

// pushChange is the change a push of p makes: created, by p's via and
// token.
func pushChange(p *PushBatchParams) []Change {
	return []Change{{Kind: ChangeCreated, Via: p.Via, Token: CleanName(p.Token)}}
}

// madeChange is the change that makes a job delayq made itself, by via
// (an Origin constant).
func madeChange(via string) []Change { return []Change{{Kind: ChangeCreated, Via: via}} }
