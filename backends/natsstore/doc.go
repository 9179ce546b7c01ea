// Package natsstore is the NATS JetStream core.Store of delayq, over an
// external NATS server or cluster, or over the in-process server that
// StartEmbedded runs (`delayq serve --backend jetstream`).
//
// # Layout
//
// One stream, <PREFIX>_JOBS (work-queue retention, file storage,
// MaxMsgsPerSubject 1, direct get, per-message TTL, message schedules),
// holds both the job records and their wake-ups:
//
//	<prefix>.job.<id>              the record: the job's JSON fields, then its body byte for byte
//	<prefix>.sched.<topic>.<id>    schedule @ run_at-Lead -> lead      (scheduled job)
//	<prefix>.lead.<topic>.<id>     fired sched, for the housekeeping consumer
//	<prefix>.soon.<topic>.<id>     schedule @ run_at+100ms -> ready    (due within Lead)
//	<prefix>.near.<topic>.<id>     plain twin of soon, for the topic's fetcher
//	<prefix>.ready.<topic>.<id>    due job
//	<prefix>.lease.<topic>.<id>    schedule @ lease expiry -> expire   (reserved job)
//	<prefix>.expire.<topic>.<id>   fired lease, for the housekeeping consumer
//	<prefix>.dead.<topic>.<id>     marker of a dead job
//	<prefix>.fin.done.<topic>.<id>       marker of a done job, for counts; Nats-TTL as its record
//	<prefix>.fin.cancelled.<topic>.<id>  marker of a cancelled job, the same
//
// A key-value bucket <PREFIX>_TOPICS keeps topic configurations (cfg.<name>)
// and a "seen" key per topic written on its first job (seen.<name>), so
// ListTopics reads no jobs.
//
// The record is the truth; wake-ups are hints. Every change reads the
// record, publishes the wake-up of the new state, then writes the record
// with Nats-Expected-Last-Subject-Sequence set to the sequence read (0 for a
// create), then purges the job's older wake-ups (subject filter
// <prefix>.*.<topic>.<id>, below the new wake-up's sequence). A crash between
// the steps leaves a stale wake-up, never a job without one; a stale
// wake-up is reconciled with the record by whoever receives it. Finished
// records carry Nats-TTL = Retention and expire by themselves, and so do
// their markers, which no consumer reads and which the purges of wake-ups
// leave alone (see Counts).
//
// The purge runs in the background, after the change has answered: a
// stale wake-up is harmless, so the caller need not wait the round trip.
// Counts and dead listings, which read wake-ups rather than records, first
// wait for the purges running in their instance (awaitPurges), so an instance
// reads its own writes. A job's several wake-ups (a soon schedule and its
// near twin) are published pipelined and awaited together, before the
// record: one connection's publishes are stored in the order sent. A job
// reserved by a claim keeps its record in the instance (up to 100 000), so
// that its acknowledgement writes without reading it; the compare-and-set
// checks the guess, and a refusal made on a guess (a lease lost) is checked
// against the stored record.
//
// # The embedded server's users
//
// StartEmbedded runs natsserver's in-process server (package natsserver,
// which `delayq serve` also starts for the NATS transports of the other
// backends) with its JetStream files and the client password in
// EmbeddedConfig.DataDir. It takes two users and no anonymous connection.
// delayq's own (Embedded.Connect, in process, a password made at each
// start) may do everything; its inboxes are under OwnInboxPrefix.
// Producers and consumers connect as EmbeddedConfig.ClientUser
// ("delayq-client") with the password given or kept in
// <DataDir>/nats-client-password (made at first start, mode 0600; a file
// others may read is refused). They may publish only on the intake
// subjects (delayq.push.> and delayq.cancel, with replies to their
// inboxes) and subscribe to anything but those, the stream's subjects
// above, $JS/$JSC/$NRG/$KV/$O/$SYS and OwnInboxPrefix; a wildcard
// subscription is filtered by the same list. They have no JetStream, so
// they can neither read nor delete the store nor keep streams of their
// own: who needs those runs a NATS server of their own (--backend nats).
// With EmbeddedConfig.NoListen the server serves no clients at all, only
// the store's in-process connections.
//
// # Why one stream, not two
//
// Records and wake-ups could live in two streams. Cleaning up a job's
// old wake-ups must not delete the wake-up of a newer state written
// concurrently by another instance (a cancel racing a re-create of the same
// id, say). With one stream, sequences order records and wake-ups: every
// wake-up of a later state is published after the record it replaces was
// read, so a purge "below my own wake-up's sequence" removes only stale
// ones. With two streams there is no such bound. Per-job subjects for every
// kind (ready included) make cancel a subject purge and counts exact.
//
// Wake-ups carry a stamp (the record sequence they follow and whether their
// record is still to be written). A reader that finds the record not yet
// written waits for it, up to 2 s, instead of dropping the wake-up: wake-ups
// are published before their record by design. A compare-and-set that loses
// deletes its own wake-up by sequence (only that message can have it) and
// republishes the winner's, which the loser's may have replaced.
//
// # Delivery on time
//
// NATS fires schedules 0-250 ms late (up to ~360 ms at 10 000/s), and a
// schedule already past due about 250 ms after it is stored (nats-server
// 2.15.2; docs/backends.md lists the facts about schedules this design
// rests on). So a scheduled
// job's schedule fires Lead (500 ms) early into lead; the housekeeping
// consumer (durable consumers shared by every instance) turns it into a
// soon schedule due at run_at+100ms and publishes its plain twin on near.
// The topic's durable pull consumers (<prefix>_near_<topic>_<hash> and
// <prefix>_ready_<topic>_<hash>, filtered on exactly the topic's near and
// ready subjects, so "a" and "a.b" never overlap, and never on a schedule:
// see below) see the near message at once; the instance's fetcher holds
// it, unacknowledged, in a heap by run_at (in-progress acks keep it), reads
// the record ahead, and a waiting ClaimJobs takes it at its exact run_at.
// The claim publishes the lease schedule, acknowledges the held message and
// compares-and-sets the record to reserved, then purges the job's older
// wake-ups in the background (the soon schedule, normally before it fires;
// if not, the ready message it makes is a stale wake-up). Left unclaimed,
// the soon schedule fires into ready, so counts and other instances see the
// job ready even where no claim runs; the fetcher then holds the ready
// message instead. Claims wait on the fetcher's arrivals and a timer for
// the next due time, never polling.
//
// A fetcher runs while claims come; 2 s after the last one it stops and
// gives back (nak) what it holds, so another instance's claims get those
// jobs; Close does the same. An instance that dies (kill -9) gives nothing
// back: what its fetcher held goes to another fetcher after AckWait (10 s),
// which in-progress acks every AckWait/2 keep from happening while the
// instance lives. Lease expiries fire into expire; the
// housekeeping consumer makes the job ready (or dead after its last attempt,
// "lease expired"). GetJob and every operation read a job as of now:
// a scheduled job past run_at is ready, a reserved job past its lease is
// ready or dead, before the housekeeping has written so.
//
// # Clocks
//
// Config.Clock is the store's time: a job's view as of now, run_at, lease
// expiries and retention as the store reads and writes them, the idle
// release of a fetcher and the waits of claims. What the NATS server times
// runs on the real clock, and so does what the store paces against it:
// schedules fire and AckWait runs out on the server's clock, so in-progress
// acks, the age of a pending wake-up (against the server's timestamp of
// it), retries after a failed call, the audit of consumers and the bound on
// a drain read the wall clock. A store on a fake clock therefore still
// talks to a real server in real time; only what the store decides from
// its own reading of now moves with the fake clock.
//
// # Why near messages
//
// The server purges a schedule's subject when it stores the schedule (a
// subject rollup, so a new schedule replaces the old) and when the schedule
// fires (Nats-Schedule-Next: purge). nats-server 2.15.2 applies such a purge
// to every consumer whose filter covers the subject (consumer.purge, the
// "wider" case): it drops the pending entries whose messages left the
// stream and raises the consumer's ack floor to their delivery sequence,
// although older deliveries are still pending; the next acknowledgement then
// moves the stream ack floor past them. From then on the consumer takes
// those messages for acknowledged: when the fetcher holding them gives them
// back or dies, the server drops them instead of delivering them again, and
// the jobs stay ready for ever (its log says "error on write store state
// from purge: bad pending entry" or "old update ignored"). When the topic's
// consumer filtered on soon schedules, a third of the due jobs held while
// other jobs' schedules fired were lost that way, after a kill -9 and
// without one (TestKill9DeliversHeldJobs, TestReleasedJobsDeliveredAgain).
//
// So no consumer filters on a schedule subject: the topic's consumers get
// plain near and ready messages, the housekeeping consumers plain lead and
// expire messages. The store's own purges of a job's wake-ups use the
// filter <prefix>.*.<topic>.<id>, which no consumer filter contains, so the
// server does not apply them to consumers; removals of single messages
// (acknowledgements, deletes by sequence, the one-message-per-subject limit)
// it handles as acknowledgements, which keep the consumer's state right.
//
// As a safety net, and to mend consumers broken by earlier versions, each
// instance checks the topic's consumers when its fetcher first starts and
// every minute while it runs: a near or ready message at or below the
// consumer's ack floor (on a work-queue stream an acknowledged message is
// deleted at once) that is still there a second later is one the consumer
// will never deliver. The instance then deletes and recreates the consumer,
// which delivers every near and ready message again; other instances'
// fetchers resume on the new one, and wake-ups delivered twice are harmless
// since claims compare and set the record.
//
// # One filter per consumer
//
// Each consumer has one filter subject: the topic's near and ready, and the
// housekeeping's lead and expire, are a consumer each. nats-server 2.15
// finds a multi-filter consumer's next message by intersecting its filters
// with every subject of the message block (firstMatchingMulti), for every
// message delivered; on a work-queue stream, whose blocks are mostly
// deleted messages, it does so nearly always. That took 40% of the
// process's CPU at 10 000 due jobs/s and 40% of a 100 000-job burst; a
// single filter finds the next message by a short linear scan. Earlier
// versions made one consumer of near and ready (<prefix>_ready_...) and one
// of lead and expire (<prefix>_house): New and the fetcher update those to
// ready and lead only before they make the near and expire consumers, since
// the server refuses overlapping filters on a work-queue stream. (An
// instance of an earlier version started afterwards fails to make its
// consumers for the same reason: upgrade every instance.)
//
// # Counts
//
// A JetStream stream-info request with a subject filter tells how many
// subjects have messages, without sending them (an offset past the end):
// scheduled = sched+lead+soon subjects of the topic, ready = ready, reserved
// = lease, dead = dead, done = done, cancelled = cancelled; near messages
// are not counted. Eight such requests, in parallel, count a topic. While a
// job changes state both its old and new wake-ups exist for a moment (one
// round trip), and a stale wake-up that lost a race may count until it
// fires and is reconciled; counts are exact once settled.
//
// Done and cancelled jobs count by their markers: an acknowledgement or a
// cancel publishes the marker and then the record, pipelined (one round
// trip, as the record alone took before), both with Nats-TTL = Retention,
// so the marker leaves when the record does, on the server's clock (NATS
// keeps whole seconds of a TTL and expires messages up to a few hundred ms
// late). A put that reuses a finished job's id first purges its marker
// (one literal subject, only then), so the job counts once, in its new
// state, in its new topic. Markers have a token more than wake-ups
// (<prefix>.fin.<kind>...), so that the filter of a job's wake-ups,
// <prefix>.*.<topic>.<id>, leaves them out: nats-server purges by a filter
// by scanning the stream from the first message the filter matches to the
// last, and a marker, stored last, stretched the purge that follows an
// acknowledgement over every message stored since the claim (a 20 000-job
// burst took 40% more CPU per job). The cost is one more message stored
// per finished job, kept for the retention period like its record. A crash
// between a marker and its record leaves a marker that counts until it
// expires. ListDeadJobs reads the dead
// subjects, then the records, sorted by time of death.
//
// # Export and import
//
// ExportJobs reads the job records in stream order, 256 at a time, by
// batched direct gets (next_by_subj <prefix>.job.*), and passes on those
// not finished as GetJob would show them now. A record rewritten during
// the export moves to the stream's end, where the export meets it again;
// it remembers the ids it passed on (ids only, not jobs) so that none
// comes twice. ImportJobs is PutJobs' create, pipelined 2 000 jobs at a
// time: the wake-ups of each job's imported state first (a reserved job
// ready at once, a dead one with its dead marker), then the records with
// expected last subject sequence 0; a record refused because the id is in
// use (any state, finished within retention too) is skipped, and its
// wake-ups undone as a collided create's are. docs/benchmarks.md ("NATS
// store") has the times of both.
//
// # Durability (tested: go test -run Kill9)
//
// A JetStream file store of a stream with one replica writes every message
// to its file (write(2), the page cache) before it answers with a PubAck;
// it fsyncs on the sync interval. So:
//
//   - kill -9 of the process (delayq with the embedded server, or an external
//     nats-server) loses nothing that was answered, whatever the sync
//     setting: TestKill9KeepsAnsweredJobs kills a separate nats-server with
//     SIGKILL while 8 goroutines put batches and finds every answered job,
//     with its wake-up, after the restart; TestKill9DeliversHeldJobs kills
//     it while a fetcher holds due jobs and others come due, and gets every
//     job delivered after the restart (those held within about AckWait);
//   - a power cut (or kernel crash) loses what was written since the last
//     fsync: up to 2 min with nats-server's default interval, up to ~1 s with
//     "1s", nothing answered with "always" (each write fsynced before the
//     PubAck).
//
// Intake with "1s" (BenchmarkIntake) costs nothing measurable over the
// server's 2 min default, and bounds a power cut's loss to about a
// second, like Redis' appendfsync everysec: it is SyncDefault. "always"
// costs most of the intake rate. docs/benchmarks.md ("NATS store") has
// the figures and the command.
//
// # Lateness
//
// BenchmarkLateness measures it (docs/benchmarks.md, "NATS store", has the
// command and the figures). A due job costs 12 JetStream operations and the firing of its schedule:
// the housekeeping reads the record and publishes the soon schedule and
// its near twin (pipelined, one round trip), then acknowledges the lead
// message; the fetcher reads the record ahead; the claim publishes the
// lease schedule, then writes the record while the acknowledgement of the
// near message is confirmed (two round trips from due time to answer) and
// purges the soon schedule in the background; the acknowledgement writes
// the done marker and the record from the claim's copy (pipelined, one
// round trip) and purges the lease in the background. The tail is those round trips on a CPU shared with
// the in-process server, which fires schedules in bursts every 250 ms.
// Those operations, not waiting, bound the rate of due jobs one process
// sustains: the CPU they cost per job, times the rate, must fit the cores.
//
// # Burst
//
// BenchmarkBurst puts 100 000 jobs due at one instant and times their
// claims and acknowledgements (docs/benchmarks.md, "NATS store"). Each
// costs the same 12 operations as above, so a burst is bounded by CPU per
// job; nats-server alone (version 2.15.2) takes about 1.4 s to fire 100 000
// raw schedules due at one instant, before any of delayq's work.
package natsstore
