package core

import "time"

// DeliveryGate is the optional capability of a Deliverer (found by type
// assertion) that says whether deliveries of a topic to its own destination
// would be refused now, as by that destination's open circuit breaker, so
// that a dispatcher claims no job only to have its delivery refused.
// Decorators of a Deliverer pass it on.
type DeliveryGate interface {
	// DeliveryAdmits returns how many deliveries of topic to its own
	// destination (jobs without a url of their own) may start now: -1 for
	// any number, 0 while they are refused. With 0, wait is how long until
	// it is worth asking again.
	DeliveryAdmits(topic *Topic) (n int, wait time.Duration)
}

// DeliveryAdmits asks d when it is a DeliveryGate, and otherwise admits
// every delivery (-1, 0); decorators of a Deliverer implement DeliveryGate
// with it.
func DeliveryAdmits(d Deliverer, topic *Topic) (n int, wait time.Duration) {
	g, ok := d.(DeliveryGate)
	if !ok {
		return -1, 0
	}
	return g.DeliveryAdmits(topic)
}
