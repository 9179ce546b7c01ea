package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// jobState is where a job is in the model.
type jobState uint8

const (
	stNone    jobState = iota // never created
	stWaiting                 // scheduled or ready: due time is a direct check
	stReserved
	stDone
	stDead
	stCancelled
)

func (s jobState) String() string {
	return [...]string{"none", "waiting", "reserved", "done", "dead", "cancelled"}[s]
}

// unknownLease is the lease of a delivery whose claim got no answer.
const unknownLease = "?"

// jobCore is the model's view of one job.
type jobCore struct {
	St      jobState
	Attempt int
	Max     int
	TTR     int64
	// Lease is the current delivery's lease while reserved (unknownLease
	// for a claim without answer), Exp when it expires (for unknownLease,
	// the earliest it may).
	Lease string
	Exp   int64
}

// maxUndo bounds the writes a crash may take back in the model; more in one
// job's window than this is not seen in practice.
const maxUndo = 4

// modelState is a job's state and, when writes that a kill -9 may lose were
// made since the last durable one, the states the job had before each
// (oldest first): a kill takes back a suffix of them.
type modelState struct {
	jobCore
	Undo  [maxUndo]jobCore
	NUndo int
}

// mKind is a step of the per-job model.
type mKind uint8

const (
	mCreate  mKind = iota // POST without replace
	mReplace              // PUT, or POST on a unique_keys replace topic
	mCancel
	mGet
	mClaimed // a claim answered this job
	mPhantom // a claim of the job's topic got no answer: it may have taken it
	mRelease // the server's release of what such a claim of a subscriber whose connection ended took
	mAck
	mNack
	mTouch
	mRequeue
	mCrash // a kill -9 that may lose the last writes: of a local store, of a Redis master
)

func (k mKind) String() string {
	return [...]string{"create", "replace", "cancel", "get", "claimed", "phantom-claim", "release", "ack", "nack", "touch", "requeue", "crash"}[k]
}

// mInput is one step with what it was answered (porcupine's output is
// unused: the answer is part of the input).
type mInput struct {
	Kind      mKind
	Call, Ret int64 // Ret is a bound for indeterminate operations
	Status    int   // 0: no answer
	Lease     string
	Attempt   int   // claimed: the delivery's; get: the answer's
	Exp       int64 // claimed, touch: the lease's expiry answered
	State     string
	Max       int
	TTR       int64
	Tolerance int64
	Fragile   bool // an async write a kill right after may lose
	// Skewed marks an operation of a job that lived during a clock fault,
	// on a store whose instances judge leases on their own clocks: one
	// may see a lease ended that another still sees hold.
	Skewed  bool
	Durable bool // a write answered after its fsync
	Descr   string
}

// expansions returns the states s may be in at a moment between call and
// ret, as far as lease expiry goes: a lease surely expired before call is
// ended, one that may have is either.
func expansions(s modelState, in *mInput) []modelState {
	if s.St != stReserved {
		return []modelState{s}
	}
	expired := s
	if s.Attempt >= s.Max {
		expired.St = stDead
	} else {
		expired.St = stWaiting
	}
	expired.Lease, expired.Exp = "", 0
	if s.Lease == unknownLease {
		if in.Ret >= s.Exp-in.Tolerance {
			return []modelState{s, expired}
		}
		return []modelState{s}
	}
	switch {
	case in.Call > s.Exp+in.Tolerance:
		return []modelState{expired}
	case in.Ret < s.Exp-in.Tolerance:
		return []modelState{s}
	default:
		return []modelState{s, expired}
	}
}

// fresh is the state of a job a create or replace just stored.
func fresh(in *mInput) jobCore {
	return jobCore{St: stWaiting, Max: in.Max, TTR: in.TTR}
}

// valid reports whether lease settles s's delivery (expiry is decided by
// expansions).
func valid(s jobCore, lease string) bool {
	return s.St == stReserved && s.Lease == lease && lease != unknownLease
}

// apply returns the states p may go to by the step, none when the answer is
// impossible from p.
func apply(p modelState, in *mInput) []jobCore {
	c := p.jobCore
	ind := in.Status == 0
	// maybe adds next when the step was indeterminate, else requires ok.
	switch in.Kind {
	case mCreate, mReplace:
		creatable := c.St == stNone || c.St == stDone || c.St == stCancelled
		replaceable := in.Kind == mReplace && (c.St == stWaiting || c.St == stDead)
		switch {
		case ind:
			out := []jobCore{c}
			if creatable || replaceable {
				out = append(out, fresh(in))
			}
			return out
		case in.Status == 201 && creatable, in.Status == 200 && replaceable:
			return []jobCore{fresh(in)}
		case in.Status == 409 && in.Kind == mCreate && !creatable,
			in.Status == 409 && in.Kind == mReplace && c.St == stReserved:
			return []jobCore{c}
		case in.Status >= 400 && in.Status != 409:
			return []jobCore{c} // refused before the store: no change
		}
		return nil
	case mCancel:
		cancelable := c.St == stWaiting || c.St == stDead
		done := c
		done.St, done.Lease, done.Exp = stCancelled, "", 0
		switch {
		case ind && cancelable:
			return []jobCore{c, done}
		case ind:
			return []jobCore{c}
		case in.Status == 204 && cancelable:
			return []jobCore{done}
		case in.Status == 404 && (c.St == stNone || c.St == stDone || c.St == stCancelled),
			in.Status == 409 && c.St == stReserved:
			return []jobCore{c}
		case in.Status >= 400 && in.Status != 404 && in.Status != 409:
			return []jobCore{c}
		}
		return nil
	case mGet:
		switch {
		case ind, in.Status >= 500:
			return []jobCore{c}
		case in.Status == 404 && c.St == stNone:
			return []jobCore{c}
		case in.Status == 200 && c.St != stNone && in.Attempt == c.Attempt && stateMatches(c.St, in.State):
			return []jobCore{c}
		}
		return nil
	case mClaimed:
		if c.St == stWaiting && in.Attempt == c.Attempt+1 && in.Attempt <= c.Max {
			n := c
			n.St, n.Attempt, n.Lease, n.Exp = stReserved, in.Attempt, in.Lease, in.Exp
			return []jobCore{n}
		}
		return nil
	case mPhantom:
		out := []jobCore{c}
		if c.St == stWaiting {
			n := c
			n.St, n.Attempt, n.Lease, n.Exp = stReserved, c.Attempt+1, unknownLease, in.Call+c.TTR
			out = append(out, n)
		}
		return out
	case mRelease:
		// A subscriber's connection ended: the server releases what it
		// had claimed for it, a step of its own after the claim's, so that
		// the job is reserved between the two. Never sent, the attempt is
		// given back (Engine.Release); sent and lost with the connection,
		// it counts (a nack with delay 0). Or nothing was released: the
		// claim took nothing, or the release failed and the lease runs out.
		out := []jobCore{c}
		if c.St == stReserved && c.Lease == unknownLease {
			back := c
			back.St, back.Attempt, back.Lease, back.Exp = stWaiting, c.Attempt-1, "", 0
			nacked := c
			nacked.St, nacked.Lease, nacked.Exp = stWaiting, "", 0
			if c.Attempt >= c.Max {
				nacked.St = stDead
			}
			out = append(out, back, nacked)
		}
		return out
	case mAck, mNack, mTouch:
		ok := valid(c, in.Lease)
		n := c
		switch in.Kind {
		case mAck:
			n.St, n.Lease, n.Exp = stDone, "", 0
		case mNack:
			if c.Attempt >= c.Max {
				n.St = stDead
			} else {
				n.St = stWaiting
			}
			n.Lease, n.Exp = "", 0
		case mTouch:
			n.Exp = in.Exp
		}
		switch {
		case ind && ok:
			if in.Kind == mTouch {
				// The new expiry is unknown: no later than the last
				// moment the touch could have been applied, plus ttr.
				n.Exp = in.Ret + c.TTR
			}
			return []jobCore{c, n}
		case ind:
			return []jobCore{c}
		case in.Status/100 == 2 && ok:
			return []jobCore{n}
		case in.Status == 409 && c.St != stNone && !ok,
			in.Status == 404 && c.St == stNone:
			return []jobCore{c}
		case in.Status >= 400 && in.Status != 404 && in.Status != 409:
			return []jobCore{c}
		}
		return nil
	case mRequeue:
		n := c
		n.St, n.Attempt = stWaiting, 0
		switch {
		case ind && c.St == stDead:
			return []jobCore{c, n}
		case ind:
			return []jobCore{c}
		case in.Status == 204 && c.St == stDead:
			return []jobCore{n}
		case in.Status == 409 && c.St != stNone && c.St != stDead,
			in.Status == 404 && c.St == stNone:
			return []jobCore{c}
		case in.Status >= 400 && in.Status != 404 && in.Status != 409:
			return []jobCore{c}
		}
		return nil
	}
	panic(fmt.Sprintf("history: unknown model step %d", in.Kind))
}

// stateMatches reports whether a state answered by a get is the model's.
func stateMatches(s jobState, answered string) bool {
	switch s {
	case stWaiting:
		return answered == "scheduled" || answered == "ready"
	default:
		return answered == s.String()
	}
}

// step returns the states the job may go to from s by the step in.
func step(s modelState, in *mInput) []modelState {
	if in.Kind == mCrash {
		out := []modelState{{jobCore: s.jobCore}}
		for i := range s.NUndo {
			out = append(out, modelState{jobCore: s.Undo[i]})
		}
		return out
	}
	var out []modelState
	exps := expansions(s, in)
	for _, p := range exps {
		for _, n := range apply(p, in) {
			ns := modelState{jobCore: n, Undo: p.Undo, NUndo: p.NUndo}
			switch {
			case n == p.jobCore:
			case in.Durable:
				// Its fsync made every earlier write durable.
				ns.Undo, ns.NUndo = [maxUndo]jobCore{}, 0
			case in.Fragile && ns.NUndo < maxUndo:
				ns.Undo[ns.NUndo] = p.jobCore
				ns.NUndo++
			}
			out = append(out, ns)
		}
	}
	// An instance whose clock is ahead of the one that claimed may see the
	// lease ended and write nothing (a settle answered 409, a read): the
	// lease still holds for the others.
	if in.Skewed && len(exps) == 2 && exps[0].St == stReserved {
		for _, n := range apply(exps[1], in) {
			if n == exps[1].jobCore {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// stateSet is the states a job may be in, sorted by compareStates, none
// twice, none that another one subsumes (reduce).
type stateSet []modelState

// reduce sorts set and drops the states that another one allows all of:
// copies, and of the states that differ only in the expiry of a lease
// whose claim got no answer (unknownLease), all but the earliest, which
// may stay reserved as long or end from an earlier moment (expansions).
// Without it, a backend out for seconds makes every failed claim of a
// topic a state of its own for each of its jobs, and the check of one
// job ran out of time with a few hundred of them.
func (set stateSet) reduce() stateSet {
	slices.SortFunc(set, compareStates)
	out := set[:0]
	for _, s := range set {
		if n := len(out); n > 0 {
			prev := out[n-1]
			if prev == s {
				continue
			}
			if s.St == stReserved && s.Lease == unknownLease {
				prev.Exp = s.Exp
				if prev == s {
					continue
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// compareStates orders states by everything but their expiry, then by it,
// so that states differing only in it are next to each other, the
// earliest first.
func compareStates(a, b modelState) int {
	if c := compareCores(a.jobCore, b.jobCore, false); c != 0 {
		return c
	}
	if c := cmp.Compare(a.NUndo, b.NUndo); c != 0 {
		return c
	}
	for i := range a.NUndo {
		if c := compareCores(a.Undo[i], b.Undo[i], true); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.Exp, b.Exp)
}

// compareCores orders jobCores, by their expiry too when withExp.
func compareCores(a, b jobCore, withExp bool) int {
	c := cmp.Or(cmp.Compare(a.St, b.St), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.Max, b.Max),
		cmp.Compare(a.TTR, b.TTR), strings.Compare(a.Lease, b.Lease))
	if c != 0 || !withExp {
		return c
	}
	return cmp.Compare(a.Exp, b.Exp)
}

// hashState hashes what tells states apart most often (equal states hash
// alike).
func hashState(s modelState) uint64 {
	h := uint64(s.St)<<56 ^ uint64(s.Attempt)<<48 ^ uint64(s.NUndo)<<40 ^ uint64(len(s.Lease))
	return (h ^ uint64(s.Exp)) * 0x9e3779b97f4a7c15
}

// jobModel is the porcupine model of one job's history. Its state is the
// stateSet the job may be in, as porcupine.NondeterministicModel makes a
// nondeterministic model deterministic, but reduced after each step.
var jobModel = porcupine.Model{
	Init: func() any { return stateSet{{}} },
	Step: func(state, input, _ any) (bool, any) {
		in := input.(*mInput)
		var next stateSet
		for _, s := range state.(stateSet) {
			next = append(next, step(s, in)...)
		}
		next = next.reduce()
		return len(next) > 0, next
	},
	Equal: func(a, b any) bool { return slices.Equal(a.(stateSet), b.(stateSet)) },
	Hash: func(state any) uint64 {
		var h uint64
		for _, s := range state.(stateSet) {
			h ^= hashState(s)
		}
		return h
	},
	DescribeOperation: func(input, _ any) string {
		return input.(*mInput).Descr
	},
	DescribeState: func(state any) string {
		var b strings.Builder
		for i, s := range state.(stateSet) {
			if i > 0 {
				b.WriteString(" | ")
			}
			fmt.Fprintf(&b, "%s attempt %d/%d lease %.8s exp %s undo %d", s.St, s.Attempt, s.Max, s.Lease, time.Unix(0, s.Exp).UTC().Format("15:04:05.000"), s.NUndo)
		}
		return b.String()
	},
}
