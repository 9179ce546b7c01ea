// Package core holds what every part of delayq shares: the job and topic
// model with its validation rules, job ids, the Store interface that each
// backend implements, the injectable Clock (core/coretest has a fake one
// for tests), and the Engine that applies
// topic defaults, backoff and attempt limits and dispatches due jobs to
// delivery transports.
//
// core imports no backend, transport or driver; they import core.
package core
