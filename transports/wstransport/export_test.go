package wstransport

import (
	"context"
	"sync"

	"github.com/delayq/delayq/core"
)

// QueuedAcks returns how many ack frames wait in the server's acker for a
// batch: what tests of the connections' ack path observe.
func (s *Server) QueuedAcks() int {
	s.acks.mu.Lock()
	defer s.acks.mu.Unlock()
	return len(s.acks.queue)
}

// AcksInFlight is acksInFlight, for the tests outside the package.
const AcksInFlight = acksInFlight

// AckGate holds every AckJobs call of a real store (Store) until Let, and
// records how many acks each carried; Entered gets a value per call while
// it has room. The ack path's tests, in the package and outside, hold
// batches with it.
type AckGate struct {
	core.Store
	Entered chan struct{}

	release chan struct{}
	let     sync.Once
	mu      sync.Mutex
	sizes   []int
}

// NewAckGate returns a gate over store whose Entered holds up to entered
// values.
func NewAckGate(store core.Store, entered int) *AckGate {
	return &AckGate{Store: store, Entered: make(chan struct{}, entered), release: make(chan struct{})}
}

// AckJobs records the call and holds it until Let.
func (g *AckGate) AckJobs(ctx context.Context, p *core.AckJobsParams) ([]core.AckResult, error) {
	g.mu.Lock()
	g.sizes = append(g.sizes, len(p.Acks))
	g.mu.Unlock()
	select {
	case g.Entered <- struct{}{}:
	default:
	}
	<-g.release
	return g.Store.AckJobs(ctx, p)
}

// Let lets the held calls and every later one go on; it may be called again.
func (g *AckGate) Let() { g.let.Do(func() { close(g.release) }) }

// Sizes returns how many acks each call carried, in the order they came.
func (g *AckGate) Sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.sizes...)
}
