// Package core holds what every part of delayq shares: the job and topic
// model with its validation rules, job ids, the Store interface that each
// backend implements, the injectable Clock (core/coretest has a fake one
// for tests), and the Engine that applies
// topic defaults, backoff and attempt limits and dispatches due jobs to
// delivery transports.
//
// # Job-state rules
//
// The rules of a job's state live on Job, once, and every store applies
// them rather than its own copy: Reset (a put), Replaces (a replace),
// Schedule, Reserve (a claim), Finish (ack, cancel), Retry, Bury, Requeue,
// Import, and AsOf, the view of a job as of now, with ExpireLease and its
// reason LeaseExpired; TrimHistory bounds what History keeps. A store
// that cannot call them (redisstore's Lua scripts) keeps a copy that
// core/storetest holds to the same results. Trail composes a job's trail
// from its Changes, History and state, for every surface that shows it.
//
// # Calling convention
//
// The operations of Engine, Store and Deliverer share one convention. Each
// takes a context.Context first and at most one other argument: the thing
// it acts on, such as an id, a topic name or a *Topic (Get(ctx, id),
// PutTopic(ctx, t)). An operation that needs more takes a params struct by
// pointer, named after the call (PushBatchParams, NackParams,
// DeliverParams); where an Engine call and a Store call mean the same thing
// they share the struct (ClaimJobsParams, AckJobParams, TouchJobParams,
// ListDeadJobsParams). No operation takes a boolean flag: a bool that
// selects behaviour is a named field of the params
// (PushBatchParams.Replace) or a method of its own (Push, Replace). So a
// call site names what it passes, and adding an argument is adding a field,
// which changes no existing caller. The Engine and the deliverers answer
// nil params, a caller's mistake, with an ErrInvalidArgument *FieldError
// rather than a panic. Constructors, accessors and checks that do no I/O
// (NewEngine, Engine.Limits, ValidateTTR, Deliverer.ValidateTopic, Invalid)
// are not operations: they take no ctx and keep plain arguments. Close
// follows io.Closer.
//
// core imports no backend, transport or driver; they import core.
package core
