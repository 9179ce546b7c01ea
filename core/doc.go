// Package core holds what every part of delayq shares: the job and topic
// model with its validation rules, job ids, the Store interface that each
// backend implements, the injectable Clock (core/coretest has a fake one
// for tests), and the Engine that applies
// topic defaults, backoff and attempt limits and dispatches due jobs to
// delivery transports.
//
// The rules of a job's state live on Job, once, and every store applies
// them rather than its own copy: Reset (a put), Schedule, Reserve (a claim),
// Finish (ack, cancel), Retry, Bury, Requeue, Import, and AsOf, the view of
// a job as of now, with ExpireLease and its reason LeaseExpired. A store
// that cannot call them (redisstore's Lua scripts) keeps a copy that
// core/storetest holds to the same results.
//
// core imports no backend, transport or driver; they import core.
package core
