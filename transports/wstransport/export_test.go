package wstransport

// QueuedAcks returns how many ack frames wait in the server's acker for a
// batch: what tests of the connections' ack path observe.
func (s *Server) QueuedAcks() int {
	s.acks.mu.Lock()
	defer s.acks.mu.Unlock()
	return len(s.acks.queue)
}

// AcksInFlight is acksInFlight, for the tests outside the package.
const AcksInFlight = acksInFlight
