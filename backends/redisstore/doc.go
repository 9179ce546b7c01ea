// Package redisstore is the Redis core.Store of delayq, over go-redis's
// UniversalClient: one standalone server, a Sentinel-managed master, or a
// Redis Cluster. Several delayq instances may share one prefix on one Redis
// (or Cluster): every change is an atomic Lua script, so they never hand out
// a job twice while its lease holds, and they share the work of ending
// expired leases. Due times and leases are judged by the Redis server's
// clock (TIME in the scripts), so instances whose clocks differ agree.
//
//	client, err := redisstore.ParseURL("redis+cluster://10.0.0.1:7000,10.0.0.2:7000")
//	store, err := redisstore.New(ctx, redisstore.Config{Client: client, Prefix: "delayq"})
//	defer client.Close()
//	defer store.Close()
//
// # Shards
//
// Jobs spread over Config.Shards shards (a power of two) by crc32 (IEEE)
// of the job id. A new prefix gets 16 on a Cluster and 1 on one server,
// where shards spread nothing and only multiply the work of each
// claim and expiry round; a prefix keeps the count it was created with. Every key of a shard carries the hash tag
// {<prefix>:<shard>}, so each script touches one Cluster slot, and the
// shards spread over a Cluster's masters. On a standalone server (or a
// Sentinel-managed master), which has no slots, the claim, expire and
// lease scripts serve several shards in one run instead (see Scripts). The id alone picks the shard, not
// the business key: every operation after the put (get, cancel, ack, retry,
// touch, requeue, HTTP GET /v1/jobs/{id}) knows only the id, and a key-based
// shard would need an id index in another slot, a second round trip and a
// write to two slots that no script can make atomic. Ids are ULIDs or
// client ids, which crc32 spreads evenly. The key is kept and returned with
// the job, and indexed in the job's shard, so that FindJobs reads every
// shard's index of the key; a topic with unique keys gives a keyed job the
// key's id (core.KeyID), which puts it in the key's shard. The shard count of a prefix is recorded at its first New; a
// store with another count is refused, since its jobs would be looked for
// in the wrong shards.
//
// # Keys
//
// With P the prefix and n a shard number:
//
//	{P}:meta              hash   shards: the shard count of the prefix; layout: "packed" (new
//	                             jobs packed) or "queues" (new jobs hashes; Config.JobForm)
//	{P}:topics            hash   before topic records: topic -> configuration (JSON), LegacyTopics
//	{P}:seen              zset   topic -> when a store last put jobs on it (ms): the topic registry
//	{P}:rate:<topic>      hash   the topic's rate limit bucket: n tokens at t (ms); expires once full
//	{P}:kh:<topic>        hash   key -> the slots its jobs hold: reserved by a claim with a
//	                             key_concurrency (their field K), until their lease ends
//	{P}:kq:<topic>:<key>  zset   the key's parked job ids, by claim order: (priority + 10) * 2^43
//	                             + run_at (ms); ties by id
//	{P}:kk:<topic>        set    the keys with parked jobs ("" for those without a key, fair)
//	{P}:kp:<topic>:<key>  zset   a fair topic's jobs its puts parked by key, not yet in the key's
//	                             queue kq, by run_at (ms)
//	{P}:kn:<topic>        zset   the keys with jobs in kp, by their earliest run_at (ms) there
//	{P}:kr:<topic>        zset   the ring of a fair topic: keys with jobs to take, by turn
//	{P}:kt:<topic>        zset   with a rate per key, the keys with parked jobs that wait for a
//	                             token, by when their bucket holds one again (ms)
//	{P}:kb:<topic>:<key>  string the key's token bucket of a rate per key: "<tokens> <at ms>";
//	                             expires once full
//	{P}:ks:<topic>        hash   u the lowest key_concurrency jobs are parked under; f "1" while
//	                             the topic is fair (its claims' or its puts' flag): claims park
//	                             every due job, puts park by key; l
//	                             the key_concurrency of the last fair claim; s the last turn
//	                             given in the ring; c "1" while every reserved job of the topic
//	                             with a key holds a slot; v the last registration given in a
//	                             key's queue (Cluster); r the rate per key of the last claim:
//	                             "<limit> <period ms> <burst>"
//	{P}:kx                zset   on a Cluster, the holders of key slots, every topic's:
//	                             "<topic>\n<id>\n<grant>\n<key>" by when the slot lapses (ms):
//	                             its job's lease expiry, which it caps (slots.lua)
//	{P}:kv:<topic>        hash   on a Cluster, the registration of each id in its key's queue
//	{P}:kd:<topic>        hash   on a Cluster, the TTR (ms) of each id registered in its key's
//	                             queue, for the slot of a job the ring serves
//	{P}:kw                zset   on a Cluster, the parked jobs woken and not yet said back in
//	                             their queue: "<topic>\n<id>\n<registration>\n<key>" by when
//	                             to wake them again (ms)
//	{P}:sched             hash   before records: schedule name -> definition (JSON), LegacySchedules
//	{P}:rec:<kind>        hash   metadata records of a kind: name -> "<revision>:<value>"; "" -> the last revision given
//	{P}:scur              hash   before records: schedule name -> its cursor, the last slot fired (ms)
//	{P:n}:j:<id>          string one job, packed: a MessagePack map of the fields below; a TTL
//	                             once done or cancelled, set in the write that finishes it
//	                      hash   or the same fields as a hash (the form of the prefixes made
//	                             before packed jobs, until the job is put again)
//	{P:n}:b:<id>          string the body of a job when longer than the store's inline limit
//	                             (a packed job's 512 bytes, a hash's 64: see below); the same TTL
//	{P:n}:q:<topic>       zset   the topic's scheduled and ready job ids of priority 0 by run_at
//	                             (ms); ties by id
//	{P:n}:q:<topic>:<y>   zset   the same of priority y (-10 to 10 but 0)
//	{P:n}:lv:<topic>      zset   the priorities y whose queues may hold the topic's jobs, by y;
//	                             a claim drops one it finds empty
//	{P:n}:pk:<topic>      zset   the topic's parked job ids (held back by their key's slots or
//	                             tokens, by fair claims, or put on a fair topic) by run_at (ms):
//	                             to every reader scheduled until their run_at, ready from then
//	{P:n}:kp:<topic>:<key> zset  on a Cluster, a fair topic's jobs the shard's puts parked by
//	                             key, not yet registered in the key's queue kq, by run_at (ms)
//	{P:n}:kn:<topic>      zset   on a Cluster, the keys with jobs in the shard's kp, by their
//	                             earliest run_at (ms) there
//	{P:n}:lease           zset   reserved job ids by lease expiry (ms), every topic
//	{P:n}:ct:<token>      string the ids a claim reserved, space-separated, for a minute (PX):
//	                             a claim whose answer was lost finds them with recover.lua
//	{P:n}:dead:<topic>    zset   dead job ids by time of death (µs)
//	{P:n}:f:<topic>:<d|c> zset   done (d) and cancelled (c) job ids by finish time (ms), for
//	                             ListJobs; trimmed and given an expiry by each topic's first finish
//	                             of a count bucket
//	{P:n}:k:<topic>:<key> zset   ids of the topic's jobs with business key <key>, by when GetJob
//	                             stops finding them (ms): +inf while unfinished, the end of the
//	                             retention once finished; expires with its last finished job
//	{P:n}:n               hash   x:<topic> reserved counts
//	{P:n}:fin             hash   finished counts: d:<topic>, c:<topic> the topic's done and
//	                             cancelled jobs that count; d:<topic>:<end>, c:<topic>:<end>
//	                             those that finished in the bucket that ends at <end> (ms)
//	{P:n}:finq            zset   the bucket fields of fin by <end>, to drop them past retention
//	{P:n}:finlog          stream the record of finished jobs (ListFinished): an entry per script
//	                             run that finished jobs (ack, cancel, bury, death by lease expiry),
//	                             id <ms>-<seq> of the script's now, field r its records (lib.lua's
//	                             log_finish); each append trims the entries past retention (MINID ~)
//	{P:n}:scur            hash   before records, on a Cluster: schedule name -> the last slot fired
//	                             whose job is in the shard (LegacySchedules reads the latest)
//	{P:n}:paused          set    paused topics, the same in every shard: each claim script
//	                             checks its shard's; listings read shard 0's
//	P:wake                channel wake-ups (classic pub/sub; a Cluster forwards it to every node)
//
// Job hash fields: s state, t topic, k key, b body (bytes as given), r
// run_at, d ttr (ms), m max_attempts, a attempt, c created_at, u updated_at,
// e last_error, l lease, x lease expiry, p traceparent, w retry delays (ns,
// comma-separated), y priority, h the job's own webhook URL, v the via of
// the last claim (one letter), H the attempts that ended (History in
// lib.lua), z expires_at, K while the job, reserved by a claim with a
// key_concurrency, holds a slot of its key: "1" on one server, on a
// Cluster the grant of its holder in kx; W on a Cluster the last
// registration in its key's queue it was parked or woken under (kept by
// a job that takes its id); times are Unix ms of the server's clock. Empty
// key, body, traceparent, retry delays, URL and expiry, priority 0 and a
// history before the first delivery ends are left out; l, x and v stay once a lease ends and
// mean nothing unless the job is reserved: the attempt in progress is a,
// u (the claim's time) and v. A
// queued job is stored as scheduled or ready by its run_at when it was
// queued; from its run_at on it is ready whatever the field says. A body
// longer than the store's inline limit is kept in its own string key
// instead. A packed job holds a body of up to 512 bytes
// (packedInlineBody), or the server's hash-max-listpack-value if more. A
// hash holds one of up to hash-max-listpack-value (64 by default; read at
// New, the smallest of a Cluster's masters), so that it keeps every value
// within it and with it the compact listpack encoding: one longer value
// turns the hash into a hash table of about twice the memory (measured:
// 1 180 instead of about 620 bytes per pending job with a 200-byte body).
// A key of its own costs the server a write, a read and an expiry per job. Nothing ever scans the keyspace: every read names
// its keys.
//
// # Scripts
//
// The scripts live in lua/ and are embedded. Each shard script is its own
// file run after lib.lua's definitions; all of them are functions of one
// library (Redis 7 functions), loaded with FUNCTION LOAD on every master
// at New and called with FCALL, so that lib.lua's definitions run once,
// when the library loads, not at every call (about 20 µs of the server's
// time each). The library's name and its functions' carry a hash of its
// code, so that instances of different versions on one server each call
// their own; a call that finds its function missing (a server restarted
// without persistence, FUNCTION FLUSH, a new Cluster node) loads the
// library again and runs again. On a server without functions (before
// Redis 7, FUNCTION renamed away, or a user denied it) each shard script
// is instead a script of its own, lib.lua and its file, loaded with SCRIPT
// LOAD and run with EVALSHA, loaded again when a server lost its script
// cache. get and export, which write nothing, are flagged no-writes, so
// that a server at its maxmemory still answers them. put stores
// a batch of one shard's jobs, claim reserves due jobs straight from the
// queues, expire ends expired leases, lease ends or extends deliveries
// (ack, retry, bury, touch; each on its own, a failure answered to its
// caller alone), cancel and requeue change one job, get reads jobs, stats
// counts topics (dropping the finished-count buckets past retention first),
// import stores exported jobs whose ids are unused (keeping state, attempt,
// last error and creation time; a reserved job becomes ready, without
// lease), export reads one page of one structure after a cursor of score
// and id, for ExportJobs, which walks the lease set and the queues and dead
// sets of the registered topics, never the keyspace, list
// reads one shard's part of a listing by state after a cursor (ListJobs),
// recover reads back what a claim whose answer was lost reserved (the ids
// claim keeps under its token for a minute), and migrate moves the jobs of
// a prefix of the earlier layout (one schedule of
// every topic, "sched", and per-topic ready sets) into queues, once, at New.
//
// Every script takes now from the server (TIME), not from its caller, and
// scripts that answer with times (claim, expire) answer with it too: a
// store converts the server's times into waits on its own clock through
// the difference it last saw (Config.Clock; Config.TimeFromClock makes the
// scripts use the store's clock instead, for tests with a fake one).
//
// Redis runs scripts one at a time, so its time per job bounds a burst; a
// script run costs it far more than the commands inside, each command more
// than its work, and each write more again, for the AOF gets every write a
// script makes (INFO commandstats and perf on the server, in BenchmarkBurst).
// Hence: no pass moves due jobs anywhere before a claim takes them; a
// put's jobs share one EXISTS, one MSET and one ZADD per queue, each packed
// by the store but for the fields the server decides (state, times), which
// the script appends (lib.lua's Packed puts); a claim reads its jobs with
// one MGET and writes them with one MSET, and a lease script reads its
// jobs with one MGET (hashes, of a prefix not yet packed, each alone with
// its own commands); concurrent AckJob,
// RetryJob, BuryJob and TouchJob calls of a store are coalesced, a group
// commit: one goroutine sends them, up to 256 deliveries per lease script
// and 4 pipelines under way, and the calls that arrive meanwhile go
// together in the next, so that no call waits for a batch to fill. On a
// standalone server one claim, expire or lease run serves every shard
// involved (lib.lua's use_shard switches keys); a Cluster runs one per
// shard (slot), all in one pipeline. Claims and acks change the queue, the
// lease set and the counts in bulk, the claim script returns a job's fields
// as read and the store applies the reservation, an ack writes the hash
// once (state, time and the attempt's end) and sets its expiry, and a body lives in the hash or
// in its own key, never both, so that finishing a job with a short body
// leaves the body key alone.
//
// The scripts keep these invariants:
//
//   - A job's hash and its state agree with the one structure that holds
//     it: scheduled or ready in its topic's queue, reserved in lease (and
//     counted in x:<topic>), dead in its topic's dead set, done and
//     cancelled in none, with a key TTL of Config.Retention. Only finished
//     jobs expire; the others stay until they finish.
//   - fin's d:<topic> and c:<topic> are the sums of the topic's bucket
//     fields, each of which finq lists by its end; a done or cancelled job
//     counts in the bucket of its finish time (u) until the bucket is
//     dropped or a put overwrites the job, which takes it out of the bucket.
//   - Every script brings the job it names up to date (core.Job.AsOf)
//     before acting: a reserved job whose lease expired is made ready
//     (dead on its last attempt, last_error "lease expired"), so that the
//     outcome does not depend on whether an expirer got there first, and
//     GetJob reports the same state.
//   - A lease token acts only while the job is reserved with that token and
//     its expiry is after the server's now; claim hands out a fresh token
//     with each reservation, so a delivery whose lease expired can neither
//     acknowledge nor extend the next one's.
//   - A claim reserves a job only while it is due in its queue, and takes
//     it out in the same script: concurrent claims from any number of
//     stores never reserve a job twice.
//   - A script that puts a job in a queue ahead of the queue's first job
//     (or in an empty one) publishes "q <shard> <ms> <topic>"; one that
//     makes a shard's earliest lease expiry earlier publishes
//     "s <shard> <ms>". Scripts also return both to their caller.
//
// # Claims and expiry
//
// A claim keeps, per topic and shard, the earliest run_at the queue may
// hold, learnt from its own reads (the claim script answers with the
// queue's new head), from this store's puts, retries and expiries, and from
// other stores' "q" messages. It reads only the queues whose head is due
// (and any not read for 30 s, a safety net for a lost message): on a
// standalone server one claim script picks the earliest Max due jobs of
// them itself, by run_at then id, and reserves them; on a Cluster the store
// reads the queues' heads, up to Max from the first shard of the claim's
// turn (below) and a fair share of Max from each other first (more only
// from a shard whose share could hide earlier jobs), merges them, and
// reserves them with one claim script per shard in one pipeline, skipping
// a job another claim took in between. Jobs of one priority and run_at (a
// burst due at one instant) are merged by shard before id, in a turn that
// starts at the next shard at each of the store's claims: a claim takes
// them from as few shards as it can, one claim script, and their
// acknowledgements batch in that shard (a quarter less Redis CPU per job
// of a burst on a 3-master Cluster); concurrent claims start in different
// shards. After a claim that took all its jobs from its turn's first shard,
// the next reads one job of each other shard instead of a share, enough to
// show that none comes first (and more where one does): a burst's claims
// then read the least of the other shards, and where the topic has no
// priority but 0 they read it with two plain commands, not a script
// (peekHeads). One claim per topic and store reads
// at a time, so waiting claims do not race each other for the same jobs.
// With nothing due a claim waits in core.Claim, on the store's clock, for
// the earliest head's run_at, a wake-up (the store's core.Notifier, which
// the wake-up channel and this store's own scripts signal), its Wait, its
// ctx or Close: no polling interval adds lateness.
//
// Expired leases need a pass of their own, since nothing else looks at a
// reserved job: each store keeps, per shard, the earliest lease expiry, and
// one timer for the earliest of them. When it fires, expire runs on the
// due shards (one script on a standalone server, sharing its limit of 1000
// leases among them; one per shard in one pipeline on a Cluster) and the
// jobs go back to their queues, which wakes the claims. Every store expires
// every shard: when several fire together the first ends the leases and
// the others find nothing. Every 30 s, and whenever the wake-up
// subscription is made again (a dropped connection, a restarted server),
// every shard is looked at anyway, so that a lost message costs time, never
// a job.
//
// # Key limits
//
// A topic's key_concurrency, fair and rate per key (core.ClaimJobsParams)
// are honoured on one server (standalone or Sentinel-managed), where a
// script may touch keys of every shard: lib.lua's Key limits; on a
// Cluster, below. A claim with a limit parks a
// due job whose key holds that many slots, out of its queue into the
// topic's parked set of its shard and its key's queue; a job it reserves
// holds a slot (field K, counted in kh:<topic>) until its lease ends, by
// ack, retry, bury, cancel or expiry, in the script that ends it, which
// also moves the key's first parked job back to its queue. Slots are
// leases: those of a dead instance come back as its leases expire, and
// instances never hold more than the limit between them. A parked job
// costs later claims nothing; it is ready to every reader (GetJob, the
// listings and counts read the parked set, ExportJobs walks it), and a
// cancel or a replace takes it out. A claim with a higher limit, or none,
// moves the jobs parked under a lower one back first, once. A fair claim
// parks every due job in its key's queue and takes from the ring of keys,
// one job of each in turn. The puts of a fair topic park its jobs by key
// (kp, kn), from the first: the engine names the topics its configuration
// makes fair with each put (core.PutJobsParams.Fair), and a fair claim
// moves the due ones of each key to the key's queue, at most max(Max,
// 100) of a key per script: a key's backlog never holds up another key's
// entry into the ring, which a walk of the topic's queue in claim order
// would (the jobs put without the flag, and the retried ones, are walked
// so).
//
// A claim with a rate per key takes a token of its key's bucket (kb,
// shared by the instances, as the topic's bucket is) for each job it
// reserves; a job whose key has none is parked as for a slot, and the key
// waits in kt until its bucket holds a token: a claim first moves back
// the first parked jobs of the keys whose time came, one per token (fair:
// puts the keys back in the ring), and answers the earliest time left as
// its queue's head, which the store waits for. A claim with another rate,
// or none, moves the waiting jobs back once.
//
// A claim script parks at most about 10 000 jobs, so that a burst does
// not hold the server in one script, nor past a client's read timeout:
// the next script goes on. A topic without them
// pays one HMGET of its key state per claim script and nothing per put or
// per job.
//
// On a Redis Cluster a key's jobs spread over the shards' slots, which no
// script can count together, so the slots live in the prefix's own slot
// (slots.lua, slots.go): a claim with a key_concurrency reads its
// candidates' keys and TTRs with the queues' heads (peek), asks for their
// slots there, each a holder in kx scored by now + TTR, reserves the
// granted jobs in their shards with their leases capped at their holders'
// scores, parks the refused ones in their shard's parked set under the
// registration slots.lua gave them in their key's queue, and frees the
// slots it did not use. Whatever ends a lease that holds one (ack, retry,
// bury, cancel of the running job, expiry, or a put that replaces the job
// once its lease expired) returns it from its script, and
// the store frees it in slots.lua, which wakes the key's first parked job:
// the store moves it back to its queue (claim.lua's "unpark"). A touch
// extends the holder before the lease. A holder lapses one second (the
// masters' clock difference it allows) after its score, at the next
// slots.lua run or every store's 30 s sweep: so a store that died between
// a lease's end and the freeing holds the slot no longer than its lease,
// and a dead instance's slots come back with its leases. The registration
// numbers and the jobs' W make a park and a wake that cross, or two claims
// that park one job, leave it parked exactly while its key's queue holds
// it; kw wakes again a job whose store died before it was back.
//
// A fair claim on a Cluster (fair.go) keeps the ring there too: it reads
// up to 1 000 due jobs of each due shard's queue with their keys and TTRs
// (peek), has slots.lua register them in their keys' queues (kq, under
// registrations as above, their TTRs in kd) and serve up to Max from the
// ring of keys, one of each in turn (a slot granted with each under a
// key_concurrency: a key at it leaves the ring, and a freed slot puts it
// back), then reserves the served jobs in their shards, from the queue or
// the parked set, and parks the others registered: one peek per due
// shard, one slots.lua and one claim per shard with a job served or to
// park, in three round trips. A served job waits in kw until its store
// says its shard answered, and is woken back to its queue otherwise. The
// puts of a Cluster park a fair topic's jobs by key in their own shard
// (pk, and the shard's kp and kn, from the first put, as one server's
// puts do in the prefix's slot), and a fair claim's peek reads, beside the
// queue's, up to max(Max, 100) due jobs of each key there, 1 000 in all:
// so a key's backlog does not hold up another key's entry into the ring.
// A job so read leaves kp once parked under its registration, or reserved.
// A claim that is not fair, after fair ones or as the store's first of the
// topic, wakes every registered job back to its queue, drops the ring, and
// moves the shards' kp jobs back to their queues (claim.lua's "unnew").
//
// A rate per key on a Cluster: the buckets (kb) are in the prefix's slot
// as on one server, and a claim asks slots.lua for a token of each
// candidate's key with its slot (grant; fair: as it serves each key),
// even with no candidate: the keys in kt whose token came first wake as
// many of their parked jobs as they have tokens (fair: back in the ring),
// back to their queues, and the earliest wait left is answered, which the
// store takes as shard 0's due time. A job refused a token is registered
// and parked as one refused a slot. The token of a job granted and then
// taken by another claim first is spent: the rate is held, never passed.
// A topic without a key_concurrency, fair or rate per key pays nothing
// more per job: a store's first claim of a topic says its claims' mode
// (slots.lua's "mode", and claim.lua's "unnew" on each shard without
// fair), and a store runs one slots.lua sweep per 30 s whatever its topics.
//
// # Retention and topics
//
// Done and cancelled jobs get a key TTL (PEXPIRE) of Config.Retention, 72 h
// by default, counted by the Redis server's clock; no sweep and no scan.
// The record of finished jobs does not replace that expiry: deleting jobs
// by it would take a sweep that reads each job (a reused id must stay) and
// deletes its keys, which the server's expiry does without a script.
// Topic states are listed from the topic registry and the paused set: a
// topic is listed while it counts jobs, finished ones included (below), or
// is paused; its configuration is a record (core.KindTopic), which core
// merges. ListTopicStates drops from the registry a topic that is empty an
// hour after its last put. Counts read the
// queues (scheduled: run_at after now; ready: the others), the x counters,
// the dead sets and fin's totals.
//
// Done and cancelled jobs count for the retention period by the store's
// clock, in time buckets of a 64th of Config.Retention (67.5 min with the
// default 72 h; the width rounded up to the ms). Ack (once per topic per
// lease run, however many jobs it acknowledged) and cancel add to the
// bucket of the time they finish and to the topic's total: two HINCRBY on
// the shard's fin hash, in place of the read and write of the topic's last
// finish time that earlier versions made there (a field of fin that each
// topic's next new bucket drops). Once a bucket's end is at or before now
// minus the retention, every job in it is past its retention: the bucket is
// dropped and its count taken off the total, by the stats script before it
// reads the totals (one ZRANGEBYSCORE of finq when none is due), and by the
// ack or cancel that opens a new bucket, so that fin keeps at most 65
// buckets per topic and kind in a shard even when nothing reads the counts.
// A read adds one HMGET of the topic's two totals per shard, whatever the
// number of buckets. So a finished job stops counting less than one bucket
// width after its retention ends, never before, while its key's TTL runs on
// the server's clock. A put that overwrites a finished job (its id reused)
// takes it out of its bucket, which it finds from the job's finish time
// with the store's own width: instances of one prefix should share one
// Retention, or an overwritten job may count until its bucket is dropped.
//
// # Durability and measurements
//
// docs/backends.md says what each persistence setting of the server (AOF
// always, AOF everysec, none) keeps over a kill of redis-server and over a
// power cut. docs/benchmarks.md ("Redis store") gives the figures of this
// package's benchmarks (Intake, Lateness, Burst, MemoryPerPendingJob) with
// the commands that produced them. What bounds them is the design above:
// Redis runs one script at a time on one thread, so a burst is bounded by
// its CPU per job (put, claim and ack run about 10 commands per job from
// Lua, and the AOF gets every write); and on one server, shards only
// multiply the per-shard work of each round, which is why a new prefix
// there gets one.
//
// DELAYQ_BENCH_REDISSTATS=1 prints the server's INFO commandstats and cpu
// and, for Lateness, when the late jobs were due; =slowlog adds the time
// per script (and slows the server).
//
// Tests start their own redis-server processes (package redistest):
// TEST_REDIS_URL and TEST_REDIS_CLUSTER_URL point them at external servers
// instead.
package redisstore
