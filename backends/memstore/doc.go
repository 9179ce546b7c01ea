// Package memstore is an in-memory core.Store: the reference backend that the
// engine's tests run on and that `delayq serve --backend memory` uses. Nothing
// survives the process.
//
// One mutex guards everything. Each topic keeps a min-heap of scheduled jobs by
// run_at, a heap of ready jobs by run_at, a heap of reserved jobs by lease
// expiry and a list of dead jobs in order of death. Scheduled jobs are
// promoted and expired leases handled lazily whenever a topic is looked at.
// Claims wait in core.Claim: a take with nothing to give answers the topic's
// next due time, for the claim's timer on the injected clock, and a change
// that makes a job ready or due sooner notifies (core.Notifier), so a fake
// clock drives promotion and nothing polls. Finished jobs (done, cancelled)
// sit in one list in order of finishing and are dropped after the retention
// period; the record of finished jobs (ListFinished) is a slice of entries,
// dead jobs' too, numbered in order and dropped alike.
//
// Counts read no job: the queues and the dead list know their lengths, and
// each topic keeps its numbers of done and cancelled jobs, moved as a job
// enters the finished list (ack, cancel) and leaves it (dropped after
// retention, or overwritten by a put that reuses its id). They are exact:
// a finished job counts until the instant its retention ends on the clock.
package memstore
