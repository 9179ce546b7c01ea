// Package natsstore is the NATS JetStream core.Store of delayq, over an
// external NATS server or cluster, or over the in-process server that
// StartEmbedded runs (`delayq serve --backend jetstream`).
//
// # One message per job
//
// One stream, <PREFIX>_QUEUE (work-queue retention, file storage, one
// message per subject, direct get, per-message TTL, message schedules;
// metadata delayq-format: FormatVersion), holds every job as exactly one
// message, that of its state, on a subject of its own:
//
//	<prefix>.s.<id>.<topic>   scheduled: a schedule firing Lead before run_at into its due subject
//	<prefix>.d.<id>.<topic>   due (or within Lead of it): what the topic's consumer delivers
//	<prefix>.r.<id>.<topic>   reserved: a schedule firing at the lease's expiry into its due subject
//	                          (the last attempt's: into its dead subject)
//	<prefix>.x.<id>.<topic>   dead
//	<prefix>.k.<id>.<topic>   done, with Nats-TTL = the job's retention, or Retention
//	<prefix>.c.<id>.<topic>   cancelled, the same
//
// The payload is the job itself (encodeRecord: its JSON fields, its
// attempt history among them, then the body byte for byte), as of the
// state the message stands for; readers see
// it as of now (core.Job.AsOf), so a lease that ran out reads as ready or
// dead before any message moves. A key-value bucket <PREFIX>_TOPICS keeps
// a "seen" key per topic (seen.<name>), so ListTopicStates reads no jobs,
// a key per paused topic (paused.<name>), and the metadata records
// (rec.<kind>.<name in base64url>, topic configurations and schedules),
// whose revision is the key's. The release before records kept topic
// configurations in cfg.<name>, schedules in sch.<name> and their cursors
// in cur.<name>: LegacyTopics and LegacySchedules read them for
// core.MigrateTopics and core.MigrateSchedules.
//
// Every change writes the job's new message with a compare-and-set over all
// of the job's subjects (Nats-Expected-Last-Subject-Sequence with
// Nats-Expected-Last-Subject-Sequence-Subject <prefix>.*.<id>.>): it holds
// only while the message it replaces is still the job's last, 0 for a
// create. The replaced message goes with the write, atomically, when it is
// a schedule (the write carries Nats-Scheduler and Nats-Schedule-Next:
// purge, and the server purges the schedule as it stores the write, before
// it can fire) or on the same subject (one message per subject); a due,
// dead or finished message on another subject is deleted right after. A
// schedule that fires is itself such a change: its message moves to the
// target subject, where it is the job's newest. So there is no
// reconciliation and no housekeeping: a stale message (a delete lost to a
// crash) is never a job's last one, and every claim, write and listing
// checks that. But for one case: the server may fire a schedule it took up
// just before a write that replaces it is applied, and store the fired
// message after the write. Each schedule carries the sequence of the
// message it replaced (Delayq-Replaces, which the fired message keeps), so
// a claim of a fired message and a read of a job whose last message is one
// find the write's message before it, and delete the fired one (overtaken).
//
// # A due job, claim to ack: three operations
//
//  1. The topic's fetcher pulls due messages in batches (durable pull
//     consumer <prefix>_due_<topic>_<hash>, filtered on <prefix>.d.*.<topic>)
//     and holds them, unacknowledged, by run_at; in-progress acks keep them
//     past AckWait. A claim takes those due, the most urgent priority first:
//     priority orders the due jobs the instance holds (up to 20 000 per
//     topic), which a burst larger than that makes an approximation.
//  2. The claim publishes the lease schedule against the due message
//     (pipelined for the jobs of one claim), then
//  3. acknowledges the due message (the claim's last one double-acked, so
//     that counts read after the claim no longer see it).
//  4. The ack publishes the done message, which purges the lease schedule:
//     one publish, with no read when this instance made the claim (it keeps
//     the lease messages of its claims as guesses, checked by the
//     compare-and-set).
//
// Retry, bury and touch are one publish each too (a schedule or due
// message, a dead message, a new lease schedule on the same subject). A
// lease that runs out fires the job back into its due subject, where the
// topic's consumer delivers it again, ready with "lease expired" and the
// attempt it used; the last attempt's lease fires into the dead subject.
//
// # Why schedules hold the leases, not the consumer
//
// The consumer's ack wait could time a lease, but it is one value for all
// of a consumer's messages where each job has its own ttr and touch; the
// server accepts any delivery's acknowledgement for a message, so a lease
// lost to a redelivery could still acknowledge it; the delivery count says
// nothing of max_attempts per job or of the error of the last attempt; and
// GetJob could not see a lease kept in consumer state. A lease schedule is
// the job's record while reserved, times its own expiry and is purged by
// the ack that ends it, so a late ack after its firing fails its
// compare-and-set.
//
// # Delivery on time
//
// NATS fires schedules 0-250 ms late (up to ~360 ms at 10 000 due jobs/s),
// and a schedule already past due about 250 ms after it is stored
// (nats-server 2.15.2; docs/backends.md lists the facts this design rests
// on). So a job's schedule fires Lead (500 ms) early, and a job put (or
// retried) due within Lead is written as its due message at once; the
// fetcher holds it and a waiting claim takes it at its exact run_at. Counts
// report a due message whose run_at is still ahead as scheduled
// (notYetDue reads the few stored within the last Lead).
//
// No consumer filters on a schedule subject: nats-server 2.15 mishandles
// the purge of a subject that a consumer's filter covers (it raises the
// consumer's ack floor past deliveries still pending, which are then never
// delivered again), and schedules are purged when they fire or are
// replaced. The topic's consumer sees only due messages, which are removed
// by acknowledgements, deletes by sequence and the one-message-per-subject
// limit, all of which the server handles as acknowledgements.
//
// A fetcher runs while claims come; its arrivals notify the claims waiting
// in core.Claim (core.Notifier), which an empty take tells the next held
// item's due time. 2 s after the last take, with no claim waiting, it stops
// and gives back (nak) what it holds, so another instance's claims get those
// jobs; Close does the same. What an instance that dies (kill -9) held goes
// to another fetcher after AckWait (10 s).
//
// # Clocks
//
// Config.Clock is the store's time: a job's view as of now, run_at, lease
// expiries and retention as the store reads and writes them, the idle
// release of a fetcher and the waits of claims. Schedules fire, AckWait runs
// out and the server stamps messages on the real clock, so in-progress acks
// and the window notYetDue reads take the wall clock. A store on a fake
// clock still talks to a real server in real time.
//
// # Upgrading from the first layout
//
// delayq's first NATS store kept records and nine kinds of wake-up in a
// stream <PREFIX>_JOBS. New refuses a prefix that still has it
// (ErrLegacyLayout, with the steps); ExportLegacy reads it for `delayq
// export`, and `delayq import` writes the jobs into the new stream.
//
// # The record of finished jobs
//
// ListFinished reads the done, cancelled and dead messages in stream
// order from a cursor, the sequence of the last one read (finished.go): a
// finish costs no write of its own, and the server's firing of a last
// attempt's lease into the dead subject is recorded like any other. An
// entry goes with its message, when its job moves on or its TTL ends.
//
// # Durability (tested: go test -run Kill9)
//
// A JetStream file store of a stream with one replica writes every message
// to its file (write(2), the page cache) before it answers with a PubAck;
// it fsyncs on the sync interval. A kill -9 of the process loses nothing
// answered (TestKill9KeepsAnsweredJobs, TestKill9DeliversHeldJobs); a power
// cut loses what was written since the last fsync: up to ~1 s with the
// "1s" interval delayq sets (SyncDefault), nothing answered with "always".
// With Replicas 3 a write is answered once a majority stored it, and a
// node killed while jobs come and go loses none (TestClusterNodeKill).
// Replicas apply writes a little after the leader answers, so on a
// replicated stream a job is read through the stream's leader, not by a
// direct get any replica may answer, and a fetcher's first fetch goes on
// until its consumer delivered the topic's last due message the leader
// knows: a claim sees the jobs put before it. Every JetStream request is
// bounded by opTimeout (5 s): a publish whose answer was lost with a node
// fails as unavailable instead of holding its caller.
//
// # A full disk
//
// nats-server's file store keeps the first write error it meets, such as
// ENOSPC, for good: every later write of the stream fails (after
// opTimeout) until the server restarts. With Config.DiskReserve the store
// keeps a ballast file (internal/diskreserve) of that size, at most a
// tenth of the file system, in Config.DiskDir, the embedded server's
// directory, and reads the free space there every 100 ms and before each
// call that adds jobs: under the low mark, half the reserve, it deletes
// the ballast and is full, before nats-server can meet ENOSPC. PutJobs
// (replaces too, and schedule slots' jobs) and ImportJobs then return
// core.ErrStorageFull at once, and Ping too, while claims, acks, retries,
// the server's schedules, consumer state and compactions write into the
// space released. Each claim and ack writes the job anew (its lease, then
// its done message, body and all), and nats-server frees the messages
// they replace a block at a time, so a full store spends its reserve as
// it works: a claim takes only the jobs whose lease and done message fit
// above the low mark, read afresh, and none below it (ErrStorageFull),
// which leaves the low mark to the acks of the jobs claimed. Once the disk
// has twice the reserve free again, the store makes the ballast again and
// takes new jobs. Since intake is checked at each call, the low mark need
// only hold the writes in flight at once and a compaction (up to half of
// a 4 MiB block): New warns of a reserve under 16 MiB. The embedded server
// then runs without a storage limit of its own (EmbeddedConfig.MaxStore):
// nats-server's default, three quarters of the free space at start, would
// refuse every write, acks' too, before the disk is full.
//
// A separate server's disk is its operator's: with max_file_store below
// the disk's size, the server refuses a write beyond it ("insufficient
// resources") instead of failing it, and takes writes again once space is
// freed. The store answers such a refusal core.ErrStorageFull; but the
// server refuses every write there, claims' and acks' too.
//
// docs/benchmarks.md ("NATS store") has the measured operations, CPU per
// job, burst and lateness of this design beside the first one's.
package natsstore
