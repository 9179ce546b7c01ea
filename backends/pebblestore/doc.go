// Package pebblestore is the local core.Store of delayq, the default of
// delayq serve: jobs kept in one directory with Pebble
// (github.com/cockroachdb/pebble/v2, the LSM store of CockroachDB) and an
// in-memory schedule that knows what is due next. One process opens a
// directory at a time; several delayq instances need a shared backend
// (Redis, NATS) instead.
//
//	store, err := pebblestore.Open(pebblestore.Config{Dir: "delayq-data/local"})
//	defer store.Close()
//
// # Keys
//
// With id a job's id and topic a topic name (never holding a zero byte):
//
//	m<id>                          the state of an unfinished job: topic, state, run_at,
//	                               attempt, max_attempts, ttr, updated_at, and the lease
//	                               and its expiry while reserved (a few dozen bytes)
//	j<id>                          what a put sets and nothing changes: key, traceparent,
//	                               created_at, the retry schedule, own URL and expiry when
//	                               the job has them, body
//	e<id>                          the last error, while there is one
//	h<id>                          the job's attempts that ended, the last 20, once one did; the
//	                               attempt in progress is in m (its start and via) while reserved,
//	                               and a job that finished with its first ended attempt keeps
//	                               that one in x instead
//	x<id>                          the state of a done or cancelled job (as m)
//	f<finished ms><id>             finished jobs by finish time, for the prune
//	d<topic>\0<died ns><id>        dead jobs of a topic in order of death
//	F<topic>\0<state><done ns><id> done or cancelled jobs of a topic by state and finish time,
//	                               which ListJobs reads newest first
//	l<n>                           the record of finished jobs (ListFinished): entry number n
//	                               (8 bytes) of a finish (done, cancelled, dead), written with it:
//	                               when recorded, id, topic, key, state, attempt, last error, time
//	t<topic>                       before records: a topic's configuration (JSON), LegacyTopics
//	p<topic>                       a paused topic (no value)
//	c<topic>\0<state><bucket>      jobs of a topic finished (done or cancelled) in a bucket
//	k<topic>\0<key>\0<id>          a job with a business key, while the job is kept (no value)
//	S<name>                        before records: a schedule with its cursor (JSON), LegacySchedules
//	r<kind>\0<name>                a metadata record: its revision (8 bytes), then its value
//	q                              the last metadata record revision given (8 bytes)
//	K                              the jobs' keys are all in k keys (written at the first Open)
//	L                              the finished jobs are all in F keys (written at the first Open)
//	s                              the unfinished jobs and their id bytes at the last Close,
//	                               which the next Open sizes its index by (else it counts)
//
// Numbers in keys are big-endian, so that keys sort by them; values are
// varint-framed and start with a format version. A claim, an ack or a
// retry writes m (and e), never the body; the end of a delivery (retry,
// bury, expiry, and an ack after earlier attempts) writes h, reading it
// first only when the index says the job has one (a slot flag, set for
// every job at Open), while the ack of a job delivered once puts its
// attempt in the x it writes anyway: no key more.
//
// # The index
//
// Open reads every m key, the small values only, and rebuilds the schedule
// from them: no body is read at start. Each unfinished job is then a slot
// of a few dozen bytes in one slice (no pointers), its id in one byte
// arena, found by a pointer-free hash map, and placed by number in its
// topic's scheduled, ready or reserved heap, so that the garbage collector
// sees a few large objects however many jobs are pending. Claims take from
// the ready heap and wait in core.Claim: an empty take answers the topic's
// next due time, for the claim's timer on the injected clock, and a change
// that makes a job ready or due sooner notifies (core.Notifier), so nothing
// polls. Done and
// cancelled jobs leave the index: their state moves from m to x, where
// GetJob finds it for the retention period.
//
// # Durability
//
// Writes go to Pebble's write-ahead log in the order of the index's
// changes (they are applied under the store's lock) and are of two kinds:
//
//   - Creates, replaces, cancels, requeues, imports and topic changes wait
//     for their fsync before they return. Concurrent callers share one
//     fsync (Pebble's group commit), so a batch of a thousand jobs costs
//     one, and jobs pushed one per request share fsyncs too: an fsync
//     starts the time after the previous one in which walSyncGroup (4)
//     such writes come at their recent rate, at most walMinSyncInterval
//     (2 ms), so that callers pushing thousands a second wait under a
//     millisecond or about one (Go's runtime may stretch a shorter timer
//     to 1 ms when idle; syncPacer). They survive kill -9 and a power cut.
//   - Claims, acks, retries, buries, touches and lease expiries return once
//     Pebble holds them, before any sync; a background sync every
//     Config.SyncInterval (1 s) bounds what a power cut can lose, and
//     Config.SyncAlways makes them wait for their fsync too. Pebble may
//     keep such a write in a buffer of the process for a moment, so kill
//     -9 too can lose the last of them. Losing one only delivers a job
//     again: a lost ack or bury leaves the job reserved until its lease
//     expires, a lost retry likewise, a lost claim leaves the job ready
//     with its attempt uncounted.
//
// # Leases and restarts
//
// A lease is 128 random bits. The claim that takes it is written before
// the claim is answered (without waiting for a sync), so after a restart
// the job is still reserved with that lease until it expires: an ack with
// it then succeeds, as it would have without the restart. If the claim was
// lost, the job is ready and the lease unknown: an ack with it gets
// ErrLeaseLost. Either way a later delivery has a lease of its own, which
// no earlier token can match. A lease that expired while the store was
// down is ended at Open as it would have been (core.Job.AsOf).
//
// # Retention
//
// Finished jobs are kept for Config.Retention (72 h). Every minute (or
// every bucket width if shorter) a prune deletes those past it, reading
// the f keys in order. Counts of done and cancelled jobs come from
// counters in 64 buckets per retention period, kept in memory and written
// in the batch of the finishes that change them (once per batch), so that
// no count reads the jobs. A job leaves its
// bucket in the batch that deletes it: the prune's, or a put's that reuses
// a finished job's id (one read of x, answered by a bloom filter for a new
// id in the tables; none for an id of core.NewID's form greater than every
// finished one, which Open finds from the end of the x keys), so that it
// counts once. A job stops being counted at the prune
// that deletes it, at most one prune interval after it expired, and a
// bucket is dropped once it is past retention.
//
// The record of finished jobs (ListFinished) is the l keys, numbered in
// the order the finishes were written (under the store's lock, so in the
// order of the write-ahead log); a cursor is a number, so it outlives a
// restart, which starts numbering after the last l key. A finish writes its
// l key in its own batch: the job's topic, state and attempt come from the
// index, its key (read from its j key) only when the job has one and its
// last error (its e key) only when an earlier attempt left one and the
// finish sets none. The prune deletes the l keys recorded the retention
// period ago, by one range delete; ListFinished skips those it has not yet
// deleted. Config.RetentionMaxJobs does not bound them.
//
// Config.RetentionMaxJobs bounds the finished jobs kept, of every topic
// together, by count: after deleting those past retention, the prune
// deletes the oldest of the rest, in the same f order, until no more than
// the bound are left, however young they are. With a bound the prune runs
// every 10 s at least, so the store keeps at most the bound plus the jobs
// finished in the last 10 s. The number kept is the sum of the count
// buckets (a finish adds to them, and a delete takes from them, in the
// batch that writes it), so the bound needs no scan, at start or at a
// prune, and holds across restarts; a bound lowered at a restart applies
// at the first prune, which deletes the excess a thousand jobs per hold of
// the lock. A job pruned early is gone for GetJob as for the counts. A
// bound by count rather than by bytes: the store knows a job's finish
// without reading its record, and what the disk holds per kept job
// follows from it (docs/benchmarks.md measures it).
//
// # A full disk
//
// With Config.DiskReserve the store keeps a ballast file of that size in
// Dir, and Pebble writes through vfs.OnDiskFull: the first write that meets
// ENOSPC deletes the ballast and is tried again, so that Pebble, which
// cannot go on after a failed write of its log or manifest, does not see
// the error. The store is then full: PutJobs and ImportJobs return
// core.ErrStorageFull at once, and Ping too, while claims, acks, retries,
// cancels and reads go on in the reserve. Every second a full store asks
// the file system for its free space; at twice the reserve it makes the
// ballast again and takes puts. The memtable is at most the reserve, so
// that its flush fits in it, and Open refuses at once a log that the free
// space cannot hold once replayed rather than wait for space.
//
// # Backups
//
// Checkpoint (core.Checkpointer) copies the store while it serves: a Pebble
// checkpoint of the database, taken after the write-ahead log is synced, so
// that it holds every write answered before the call, writes of both kinds
// above. Its tables are hard links when it is on the file system of
// Config.Dir, and its log is a copy. Open opens it as it is, and finds the
// store as it was, reserved jobs with their leases.
package pebblestore
