-- lib.lua: the code every shard script of redisstore shares (see doc.go
-- and scripts.go, which puts them together).
--
-- Every script runs on one shard: all the keys it touches carry the shard's
-- hash tag, the base "{<prefix>:<shard>}" in ARGV[1], so each runs on one
-- Redis Cluster slot. KEYS holds the shard's fixed keys (KEYS[1] routes the
-- call); job and per-topic keys are built here from the base, under the
-- same tag. The exception: on a standalone server (no slots) the claim,
-- expire and lease scripts may handle several shards in one run, switching
-- with use_shard, since each run costs the server far more than its
-- commands.
--
-- Common ARGV: [1] base, [2] now (Unix ms) or empty for the server's clock
-- (TIME), [3] the wake-up channel, [4] the shard number, [5] retention
-- (ms). Script arguments start at ARGV[6].
local base

-- int formats an integral number without exponent: Redis would otherwise
-- turn large Lua numbers into "1.8e+15". Formatting costs about a third of
-- a microsecond (string.format, or the %.14g of a number concatenated),
-- more than most of a script's work per job, and a call formats the same
-- few values many times (lengths, attempts, the claim's time, a lease's
-- expiry): int_memo keeps them formatted, up to INT_MEMO_MAX values, from
-- one call to the next (a function library keeps it; a script run anew
-- starts it empty). Scripts format numbers with int, never by
-- concatenation.
local INT_MEMO_MAX = 4096
local int_memo, int_memo_n = {}, 0
local function int(n)
  local s = int_memo[n]
  if s then return s end
  s = string.format('%d', n)
  if n ~= n then return s end -- NaN is no table key
  if int_memo_n >= INT_MEMO_MAX then int_memo, int_memo_n = {}, 0 end
  int_memo[n] = s
  int_memo_n = int_memo_n + 1
  return s
end

-- The call's values, which begin (at the end) sets: now (ms) and now_us
-- (see begin), now_s now formatted once (formatting it for every write
-- showed in the server's profile), chan the wake-up channel, shard the
-- current shard's number, retention as given and retention_ms.
local now, now_us, now_s
local chan, shard, retention, retention_ms

local K_LEASE -- zset: reserved job ids by lease expiry (ms), all topics
local K_COUNT -- hash: "x:<topic>" reserved counts
local K_FIN   -- hash: counts of finished jobs, per topic and time bucket
local K_FINQ  -- zset: the bucket fields of K_FIN by the end of their bucket (ms)

local function key_job(id) return base .. ':j:' .. id end
local function key_body(id) return base .. ':b:' .. id end
local function key_dead(t) return base .. ':dead:' .. t end
local function key_levels(t) return base .. ':lv:' .. t end

-- Priorities. A queued job of priority 0, the default, waits in its
-- topic's queue q:<t>; one of another priority y in q:<t>:<y>, and y is
-- in the topic's levels lv:<t> (a zset scored by y) while that queue may
-- hold jobs. A claim takes the due jobs of the most urgent (lowest) level
-- first.
local function key_queue(t, y)
  if y == nil or y == 0 then return base .. ':q:' .. t end
  return base .. ':q:' .. t .. ':' .. int(y)
end

-- levels returns the priorities whose queues may hold jobs of topic t,
-- most urgent first, 0 among them.
local function levels(t)
  local out, zero = {}, false
  for _, y in ipairs(redis.call('ZRANGE', key_levels(t), 0, -1)) do
    y = tonumber(y)
    if not zero and y > 0 then
      out[#out + 1] = 0
      zero = true
    end
    out[#out + 1] = y
  end
  if not zero then out[#out + 1] = 0 end
  return out
end

-- queue_head returns the earliest run_at among topic t's queued jobs, or
-- false when none is queued.
local function queue_head(t)
  local head = false
  for _, y in ipairs(levels(t)) do
    local h = redis.call('ZRANGE', key_queue(t, y), 0, 0, 'WITHSCORES')
    if h[2] and (not head or tonumber(h[2]) < head) then head = tonumber(h[2]) end
  end
  return head
end

-- due_candidates returns up to limit due jobs of topic t, each {id,
-- run_at, priority}, most urgent first and by run_at (then id) within a
-- priority. It drops from the levels those whose queue is empty.
local function due_candidates(t, limit)
  local out = {}
  for _, y in ipairs(levels(t)) do
    if #out >= limit then break end
    local kq = key_queue(t, y)
    local due = redis.call('ZRANGE', kq, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, limit - #out, 'WITHSCORES')
    for k = 1, #due, 2 do out[#out + 1] = {due[k], tonumber(due[k + 1]), y} end
    if y ~= 0 and #due == 0 and redis.call('EXISTS', kq) == 0 then
      redis.call('ZREM', key_levels(t), int(y))
    end
  end
  return out
end

-- fetch returns job id as read whole, in the store's own form first (see
-- JOB_FORM below): a packed job as {its string}, a hash's fields as
-- HGETALL gives them, or {} when there is none. The other form answers
-- WRONGTYPE, an error reply, and then the other command.
local function fetch(id)
  local kj = key_job(id)
  if JOB_FORM == 'hash' then
    local h = redis.pcall('HGETALL', kj)
    if h.err then return {redis.call('GET', kj)} end
    return h
  end
  local raw = redis.pcall('GET', kj)
  if type(raw) == 'string' then return {raw} end
  if raw then return redis.call('HGETALL', kj) end
  return {}
end

-- with_body appends to a fetched job (fetch) its body when it has a key of
-- its own.
local function with_body(id, out)
  local body = redis.call('GET', key_body(id))
  if not body then return end
  if #out == 1 then
    out[2] = body
  else
    out[#out + 1] = 'b'
    out[#out + 1] = body
  end
end

-- job_all returns the job as the scripts' callers read it (codec.go): a
-- hash's fields as HGETALL does, its body included wherever it lives; a
-- packed job as {its string} or, with a body key, {its string, the body};
-- {} when there is no such job.
local function job_all(id)
  local out = fetch(id)
  if #out > 0 then with_body(id, out) end
  return out
end

-- The record of finished jobs (Store.ListFinished): the stream finlog of
-- the shard gets the finishes a script makes, one entry per shard and
-- script run however many jobs it finished (an ack script settles up to
-- 256), since each command costs the server far more than its work. An
-- entry's field r holds its records, oldest first, each "<state><attempt>,
-- <u>,<len>:<id><len>:<topic><len>:<key><len>:<last error>": state d
-- (done), D (done, with a next step: the job's field T), c (cancelled) or
-- x (dead), u the finish time (ms: the job's u),
-- key and last error empty for none. Its stream id is now (ms) and a
-- sequence, so that the stream is in the order recorded and its ids tell
-- when; each XADD trims the entries recorded the retention period ago
-- (MINID ~, whole nodes at a time; ListFinished skips what is left).
local fin_log

-- log_finish records that job id (j from load) became state (d, c or x)
-- at ms at (a string) with last error err; flush_finished writes it. One
-- concatenation: it runs for every job a burst acknowledges.
local function log_finish(id, j, state, at, err)
  local t, k, e = j.t, j.k or '', err or ''
  if state == 'd' and j.T then state = 'D' end
  fin_log[#fin_log + 1] = state .. int(j.a or 0) .. ',' .. at .. ',' .. int(#id) .. ':' .. id .. int(#t) .. ':' .. t ..
    int(#k) .. ':' .. k .. int(#e) .. ':' .. e
end

-- flush_finished appends the finishes recorded in the shard to its
-- stream. announced() calls it, which every script that may finish a job
-- calls at the end of its work in a shard, and use_shard before it
-- switches.
local function flush_finished()
  if #fin_log == 0 then return end
  local kl = base .. ':finlog'
  local minid = int(math.max(now - tonumber(retention), 0))
  local v = table.concat(fin_log)
  fin_log = {}
  -- An id of now unless the stream already has a later one (a clock that
  -- stepped back, a failover to a server whose clock is behind): then the
  -- server's own next id, which is after it.
  local r = redis.pcall('XADD', kl, 'MINID', '~', minid, now_s .. '-*', 'r', v)
  if type(r) == 'table' and r.err then
    redis.call('XADD', kl, 'MINID', '~', minid, '*', 'r', v)
  end
end

-- Queue heads. A script that adds a job to a topic's queue ahead of the
-- queue's earliest run_at (or to an empty queue) announces it, "q <shard>
-- <ms> <topic>", so that claims waiting anywhere know when to look, and
-- returns the same to its caller (announced()).
local q_head, q_low, q_topics

-- note_queued notes a job of topic t queued due at r, for announced.
local function note_queued(t, r)
  if q_head[t] == nil then
    q_head[t] = queue_head(t)
    q_topics[#q_topics + 1] = t
  end
  if not q_low[t] or r < q_low[t] then q_low[t] = r end
end

-- link_queue adds job id of topic t and priority y (nil for 0) to its
-- queue, due at r.
local function link_queue(id, t, r, y)
  note_queued(t, r)
  redis.call('ZADD', key_queue(t, y), int(r), id)
  if y and y ~= 0 then redis.call('ZADD', key_levels(t), y, int(y)) end
end

-- q_elsewhere holds those the call made in other shards than the one it
-- works in (in_shard), announced already, flat as announced returns them.
local q_elsewhere

-- announced publishes the queue heads the call made earlier and returns
-- them, {topic, ms, shard, ...}, those of other shards too. Every script
-- that writes jobs calls it at the end of its work in a shard, so it also
-- writes the finishes recorded (flush_finished).
local function announced()
  flush_finished()
  local out = q_elsewhere
  q_elsewhere = {}
  for _, t in ipairs(q_topics) do
    local h, l = q_head[t], q_low[t]
    if not h or l < h then
      redis.call('PUBLISH', chan, 'q ' .. shard .. ' ' .. int(l) .. ' ' .. t)
      out[#out + 1] = t
      out[#out + 1] = int(l)
      out[#out + 1] = shard
    end
  end
  q_head, q_low, q_topics = {}, {}, {}
  return out
end

-- Lease head. lease_head0 is the shard's earliest lease expiry before the
-- call (false for none), read before the first lease the call adds;
-- lease_low the earliest the call added.
local lease_head0, lease_low

local function lease_head()
  local h = redis.call('ZRANGE', K_LEASE, 0, 0, 'WITHSCORES')
  return h[2] and tonumber(h[2]) or false
end

local function note_lease(x)
  if lease_head0 == nil then lease_head0 = lease_head() end
  if not lease_low or x < lease_low then lease_low = x end
end

-- lease_announced tells every instance, "s <shard> <ms>", when the call
-- made the shard's earliest lease expiry earlier, and returns that time, or
-- -1.
local function lease_announced()
  local h, l = lease_head0, lease_low
  lease_head0, lease_low = nil, nil
  if l ~= nil and (not h or l < h) then
    redis.call('PUBLISH', chan, 's ' .. shard .. ' ' .. int(l))
    return int(l)
  end
  return -1
end

local function add_count(field, by)
  if redis.call('HINCRBY', K_COUNT, field, by) == 0 then
    redis.call('HDEL', K_COUNT, field)
  end
end

-- A job is the key j:<id>, in one of two forms: a hash of its fields, one
-- letter each (codec.go), or packed, one string of the same fields as a
-- MessagePack map, read and written whole, which costs Redis one short
-- write per change instead of a write of each field changed. Put and
-- import create jobs in the form their caller names (the prefix's layout);
-- every other change writes a job back in the form it was read in, so that
-- both forms live side by side while a prefix changes layout. Scripts read
-- a job with load (or job_all) and write it with save and save_kept, and
-- nothing else touches the key: the layout of a job is theirs alone.

-- JOB_NUMBERS are the fields load turns into numbers and save formats
-- back (int) in a hash.
local JOB_NUMBERS = {r = true, x = true, a = true, m = true, d = true, y = true, u = true, c = true, z = true, R = true}

-- packed_ids holds the ids of the jobs in the packed form that the call
-- read or made, for save.
local packed_ids

-- JOB_FORM, set for each call by the variant of the script the store
-- runs (scripts.go), as CLUSTER is, is the form of the jobs it creates,
-- 'packed' or 'hash': read first, as most of its jobs have it.

-- hash_job returns job id of the hash fields v (HMGET's answer), or nil.
local function hash_job(id, v)
  packed_ids[id] = nil
  if not v[1] then return nil end
  return {s = v[1], t = v[2], r = tonumber(v[3]), x = tonumber(v[4]), a = tonumber(v[5]),
    m = tonumber(v[6]), l = v[7], d = tonumber(v[8]), b = v[9], y = tonumber(v[10]), k = v[11],
    u = tonumber(v[12]), v = v[13], H = v[14], e = v[15], c = tonumber(v[16]), z = tonumber(v[17]), R = tonumber(v[18]),
    T = v[19], K = v[20]}
end

-- packed_job returns job id of raw, its packed string.
local function packed_job(id, raw)
  local j = cmsgpack.unpack(raw)
  if type(j) ~= 'table' then error('redisstore: key ' .. key_job(id) .. ' holds no job') end
  packed_ids[id] = true
  return j
end

-- HASH_FIELDS are the fields of a hash load reads: those scripts act on,
-- since a hash is written a field at a time.
local HASH_FIELDS = {'s', 't', 'r', 'x', 'a', 'm', 'l', 'd', 'b', 'y', 'k', 'u', 'v', 'H', 'e', 'c', 'z', 'R', 'T', 'K'}

-- prefetched holds packed jobs read ahead, by id (prefetch): read_job
-- takes one at most once, and save drops one, so that a job is never read
-- from it after a write.
local prefetched

-- prefetch reads the packed jobs ids (a list) in one MGET for read_job,
-- instead of one GET each: a hash (not yet packed) or a job gone answers
-- false there and is read by read_job as usual.
local function prefetch(ids)
  if JOB_FORM ~= 'packed' or #ids == 0 then return end
  local keys = {}
  for n, id in ipairs(ids) do keys[n] = key_job(id) end
  for i = 1, #keys, 2000 do
    local raws = redis.call('MGET', unpack(keys, i, math.min(i + 1999, #keys)))
    for n, raw in ipairs(raws) do
      if raw then prefetched[ids[i + n - 1]] = raw end
    end
  end
end

-- read_job returns the job id as load does, and when it is packed the
-- string it is stored as. A key of the other form answers WRONGTYPE: an
-- error reply, not an error of the script, and then the other command.
local function read_job(id)
  local pre = prefetched[id]
  if pre then
    prefetched[id] = nil
    return packed_job(id, pre), pre
  end
  local kj = key_job(id)
  if JOB_FORM == 'hash' then
    local v = redis.pcall('HMGET', kj, unpack(HASH_FIELDS))
    if not v.err then return hash_job(id, v) end
    local raw = redis.call('GET', kj)
    return packed_job(id, raw), raw
  end
  local raw = redis.pcall('GET', kj)
  if type(raw) == 'string' then return packed_job(id, raw), raw end
  if not raw then return nil end
  return hash_job(id, redis.call('HMGET', kj, unpack(HASH_FIELDS)))
end

-- load returns the fields of job id, or nil: s state, t topic, r run_at, x
-- lease expiry, a attempt, m max attempts, l lease, d ttr, b the body when
-- the job holds it (which tells that no body key exists: put and import
-- keep a body in one place only), y priority, k key, u updated, v the via
-- of the attempt in progress, H history, e last error, c created, z
-- expires_at, R its own retention (ms), T its next step (JSON), K set
-- while it is reserved holding a slot of its key (release_slot); a packed
-- job has all its fields (p traceparent, w retry delays, h url too). A job in its queue is stored as
-- scheduled or ready (by its run_at when it got there); settle tells them
-- apart.
local function load(id)
  return (read_job(id))
end

-- hash_field appends to f, the arguments of an HSET, field name and its
-- value v, a number formatted (now's format is made once: formatting
-- showed in the server's profile).
local function hash_field(f, name, v)
  f[#f + 1] = name
  if not JOB_NUMBERS[name] then
    f[#f + 1] = v
  elseif v == now then
    f[#f + 1] = now_s
  else
    f[#f + 1] = int(v)
  end
end

-- save writes job id from j, which load read (or which a put makes whole):
-- a packed job whole; of a hash the fields named, or with none named
-- every field j has.
local function save(id, j, ...)
  prefetched[id] = nil
  if packed_ids[id] then
    redis.call('SET', key_job(id), cmsgpack.pack(j))
    return
  end
  local names = {...}
  local f = {}
  if #names == 0 then
    for name, v in pairs(j) do
      if v then hash_field(f, name, v) end
    end
  else
    for _, name in ipairs(names) do hash_field(f, name, j[name]) end
  end
  redis.call('HSET', key_job(id), unpack(f))
end

-- kept_for returns how long finished job j is kept (ms): its own
-- retention, or the store's.
local function kept_for(j) return j.R or retention_ms end

-- shift_of returns how far the store's retention of finished job j is
-- moved (ms): its own retention less the store's, so that the finished
-- listings and counts, kept by the store's retention from when each job
-- finished, keep a job with its own retention by that instead (fin_add,
-- fin_forget, finished listings).
local function shift_of(j)
  if j.R then return j.R - retention_ms end
  return 0
end

-- save_kept saves finished job id as save does, and makes it expire after
-- its retention period, its body key with it: a packed job in the same
-- write.
local function save_kept(id, j, ...)
  prefetched[id] = nil
  local ms = int(kept_for(j))
  if packed_ids[id] then
    redis.call('SET', key_job(id), cmsgpack.pack(j), 'PX', ms)
  else
    save(id, j, ...)
    redis.call('PEXPIRE', key_job(id), ms)
  end
  if not j.b then redis.call('PEXPIRE', key_body(id), ms) end
end

-- History. A job's attempts that ended are its field H, absent until the
-- first ends: "<n>|" then its n entries, oldest first, each
-- "<attempt>,<started ms>,<ms until it ended>,<via>,<outcome>,<error
-- length>:<error>", via as the claim gave it (encodeVia: a letter, or
-- "<letter>/<instance>/<consumer>") and outcome one letter (codec.go).
-- The attempt in progress of a reserved job is its fields a, u (the
-- claim's time: only the end of the delivery changes u again) and v (the
-- via the claim named), so that a claim writes one short field more and a
-- job that was never delivered none.
local HISTORY_MAX = 50 -- core.HistoryMax
local HISTORY_BYTES = 16384 -- core.HistoryMaxBytes
local ATTEMPT_OVERHEAD = 32 -- what core.AttemptSize adds to an attempt's names and error

-- ENTRY_HEAD matches an entry of H up to its error, capturing its via and
-- the error's length.
local ENTRY_HEAD = '^[^,]*,[^,]*,[^,]*,([^,]*),[^,]*,(%d+):'

-- entry_sizes returns the sizes of the entries of rest (H without its
-- count) as core.AttemptSize counts them, and where each ends.
local function entry_sizes(rest)
  local sizes, ends, at = {}, {}, 1
  while at <= #rest do
    local _, e, via, len = string.find(rest, ENTRY_HEAD, at)
    if not e then break end
    local names = 0
    local inst, cons = string.match(via, '^[^/]*/([^/]*)/(.*)$')
    if inst then names = #inst + #cons end
    sizes[#sizes + 1] = ATTEMPT_OVERHEAD + tonumber(len) + names
    at = e + 1 + tonumber(len)
    ends[#ends + 1] = at
  end
  return sizes, ends
end

-- ended_attempt returns j's H with the attempt in progress ended at ms
-- ended with outcome (a letter) and error err appended, the oldest
-- dropped past HISTORY_MAX and HISTORY_BYTES (core.TrimHistory). It drops
-- j.v, which the entry now holds: a packed job is written without it (a
-- hash keeps the field, which a save of named fields leaves alone).
local function ended_attempt(j, outcome, ended, err)
  local started = j.u or ended
  local entry = int(j.a or 0) .. ',' .. int(started) .. ',' .. int(ended - started) .. ',' .. (j.v or '') .. ',' ..
    outcome .. ',' .. int(#err) .. ':' .. err
  j.v = nil
  local h = j.H
  if not h or h == '' then return '1|' .. entry end
  local n, rest = string.match(h, '^(%d+)|(.*)$')
  n = tonumber(n)
  if not n then return '1|' .. entry end
  rest = rest .. entry
  n = n + 1
  -- An entry holds its size less ATTEMPT_OVERHEAD: below this no
  -- entry need be read.
  if n > HISTORY_MAX or #rest + n * ATTEMPT_OVERHEAD > HISTORY_BYTES then
    local sizes, ends = entry_sizes(rest)
    local total, drop = 0, 0
    for k = 1, #sizes do total = total + sizes[k] end
    while drop < #sizes - 1 and (#sizes - drop > HISTORY_MAX or total > HISTORY_BYTES) do
      drop = drop + 1
      total = total - sizes[drop]
    end
    if drop > 0 then
      rest = string.sub(rest, ends[drop])
      n = n - drop
    end
  end
  return int(n) .. '|' .. rest
end

-- Changes. A job's Changes are its field C: entries "<kind><at ms>,<via>,
-- <token>", kind c (created), r (replaced) or q (requeued), joined by '|',
-- oldest first, at most CHANGES_MAX (codec.go). A put's caller sends
-- "<via>,<token>" (putChange); the script stamps it, but for a created
-- entry, whose time is the job's c and is left out: every write of a
-- packed job writes it again.
local CHANGES_MAX = 20 -- core.ChangesMax

-- appended_change returns changes c (a C field, or nil) with the change
-- of kind (a letter) at now by tail ("<via>,<token>") appended, the oldest
-- dropped past CHANGES_MAX.
local function appended_change(c, kind, tail)
  local entry = kind .. now_s .. ',' .. tail
  if not c or c == '' then return entry end
  local _, n = string.gsub(c, '|', '|')
  while n + 1 >= CHANGES_MAX do
    c = string.sub(c, string.find(c, '|', 1, true) + 1)
    n = n - 1
  end
  return c .. '|' .. entry
end

-- Business keys. A job of topic t with key k is a member of the zset
-- k:<t>:<k> of its shard, scored by when it stops being found (ms): +inf
-- while it is unfinished, the end of its retention once it finished (its
-- hash expires then). The zset expires with its last finished member, and
-- a put trims the members past their time, so that keys searched never
-- and keys reused often both stay bounded.
local function key_index(t, k) return base .. ':k:' .. t .. ':' .. k end

-- index_expiry makes the zset kk expire with its last member, unless one
-- is unfinished.
local function index_expiry(kk)
  local last = redis.call('ZRANGE', kk, -1, -1, 'WITHSCORES')
  if last[2] and last[2] ~= 'inf' then redis.call('PEXPIREAT', kk, last[2]) end
end

-- index_key files job id of topic t under key k: unfinished, or finished
-- (found for kept ms, the end of its retention) when kept is given.
local function index_key(id, t, k, kept)
  local kk = key_index(t, k)
  if not kept then
    redis.call('ZREMRANGEBYSCORE', kk, '-inf', now_s)
    redis.call('ZADD', kk, '+inf', id)
    redis.call('PERSIST', kk)
    return
  end
  redis.call('ZADD', kk, int(now + kept), id)
  index_expiry(kk)
end

-- unindex_key takes job id out of key k of topic t.
local function unindex_key(id, t, k)
  local kk = key_index(t, k)
  redis.call('ZREM', kk, id)
  index_expiry(kk)
end

-- unparked, release_slot and park_new are defined with the key limits
-- (Key limits below).
local unparked, release_slot, park_new

-- unlink takes job id out of the structure its state puts it in. A queued
-- job not in its queue is parked, which only a standalone server's claims
-- do: unparked takes it out of its parked queues. A reserved job that
-- holds a slot of its key gives it back (release_slot).
local function unlink(id, j)
  if j.s == 'scheduled' or j.s == 'ready' then
    if redis.call('ZREM', key_queue(j.t, j.y), id) == 0 then unparked(id, j) end
  elseif j.s == 'reserved' then
    redis.call('ZREM', K_LEASE, id)
    add_count('x:' .. j.t, -1)
    if j.K then release_slot(id, j) end
  elseif j.s == 'dead' then
    redis.call('ZREM', key_dead(j.t), id)
  end
end

-- link_dead adds job id to its topic's dead set, scored by time of death
-- in µs so that deaths close together keep their order.
local function link_dead(id, t, us)
  redis.call('ZADD', key_dead(t), int(us), id)
end

-- expire_lease ends a reserved job's expired lease: the job is ready again
-- in its queue at its run_at, or dead when it used its last attempt, with
-- last error "lease expired" and its attempt ended lease_expired at the
-- expiry.
local function expire_lease(id, j)
  unlink(id, j)
  j.H = ended_attempt(j, 'x', j.x, '')
  j.u, j.e = j.x, 'lease expired'
  if j.a >= j.m then
    j.s = 'dead'
    save(id, j, 's', 'u', 'e', 'H')
    link_dead(id, j.t, j.x * 1000)
    log_finish(id, j, 'x', int(j.x), 'lease expired')
  else
    j.s = 'ready'
    save(id, j, 's', 'u', 'e', 'H')
    link_queue(id, j.t, j.r, j.y)
  end
  j.l = nil
end

-- settle brings job id up to now: ready when its run_at passed (nothing to
-- write: the queue holds both), ready or dead when its lease expired,
-- whether or not the expirer got to it yet.
local function settle(id, j)
  if j.s == 'scheduled' and j.r <= now then
    j.s = 'ready'
  elseif j.s == 'reserved' and j.x <= now then
    expire_lease(id, j)
  end
end

-- Finished counts. K_FIN holds "d:<topic>" and "c:<topic>", the topic's
-- done and cancelled jobs in the shard that count now, and the same per
-- time bucket, "d:<topic>:<end>" and "c:<topic>:<end>": the jobs that
-- finished within the bucket that ends at <end> (Unix ms, inclusive),
-- FIN_WIDTH wide, a job with its own retention as if it finished that
-- retention less the store's later (shift_of). K_FINQ lists the bucket fields by <end>. Once <end> is at or before now
-- minus the retention, every job of the bucket is past its retention: the
-- bucket leaves K_FIN and its count leaves the topic's total (fin_expire),
-- so a finished job stops counting less than FIN_WIDTH after its retention
-- ends, and reads sum nothing. Each total is the sum of its topic's bucket
-- fields.
-- FIN_WIDTH is the bucket width: a 64th of the retention, so that a topic
-- has at most 65 buckets of each kind in a shard, whatever the retention.
local FIN_WIDTH
-- fin_end_of returns the end of the bucket of a job that finished at ms.
local function fin_end_of(ms)
  return (math.floor(ms / FIN_WIDTH) + 1) * FIN_WIDTH - 1
end

-- add_fin moves a count of K_FIN by n, dropping the field at zero.
local function add_fin(field, n)
  if redis.call('HINCRBY', K_FIN, field, n) <= 0 then
    redis.call('HDEL', K_FIN, field)
  end
end

-- fin_expire drops up to limit buckets that ended at or before now minus
-- the retention, taking their counts off their totals. It returns how many
-- it dropped.
local function fin_expire(limit)
  local old = redis.call('ZRANGEBYSCORE', K_FINQ, '-inf', int(now - retention_ms), 'LIMIT', 0, limit)
  if #old == 0 then return 0 end
  local n = redis.call('HMGET', K_FIN, unpack(old))
  for i, f in ipairs(old) do
    local c = tonumber(n[i])
    if c and c > 0 then add_fin(string.match(f, '^(.*):%d+$'), -c) end
  end
  redis.call('HDEL', K_FIN, unpack(old))
  redis.call('ZREM', K_FINQ, unpack(old))
  return #old
end

-- Finished jobs by topic, for listings: f:<t>:d (done) and f:<t>:c
-- (cancelled), ids by finish time (ms). A finish adds the job; the first
-- finish of a bucket (fin_add) drops the members past retention and makes
-- the zset expire with the last member it may hold, so that it needs no
-- write of its own per job beyond the ZADD. A member whose id was reused
-- stays until then: listings read the job and leave it out.
local function key_finished(t, kind) return base .. ':f:' .. t .. ':' .. kind end

-- expire_later makes key k expire at ms at, unless it expires later.
local function expire_later(k, at)
  local ttl = redis.call('PTTL', k)
  if ttl < 0 or now + ttl < at then redis.call('PEXPIREAT', k, int(at)) end
end

-- fin_add counts n jobs of topic t that finished now, kind 'd' (done) or
-- 'c' (cancelled), their retention moved by shift (shift_of). A new bucket
-- is listed in K_FINQ, and the first job of a bucket drops buckets that
-- expired meanwhile, so that K_FIN stays bounded even if nothing reads the
-- counts; it also drops the topic's last finish time, a field earlier
-- versions kept in K_FIN.
local function fin_add(kind, t, n, shift)
  local e = fin_end_of(now + shift)
  local f = kind .. ':' .. t .. ':' .. int(e)
  if redis.call('HINCRBY', K_FIN, f, n) == n then
    redis.call('ZADD', K_FINQ, int(e), f)
    redis.call('HDEL', K_FIN, t)
    local kf = key_finished(t, kind)
    redis.call('ZREMRANGEBYSCORE', kf, '-inf', '(' .. int(now - retention_ms))
    expire_later(kf, e + retention_ms)
    fin_expire(100)
  end
  redis.call('HINCRBY', K_FIN, kind .. ':' .. t, n)
end

-- fin_forget uncounts finished job id (j from load) before it is
-- overwritten: its bucket, by its finish time, loses it, unless it was
-- dropped already (past retention) or was made with another width (an
-- instance with another retention), where it counts until it expires.
local function fin_forget(id, j)
  local kind = 'd'
  if j.s == 'cancelled' then kind = 'c' end
  local u = j.u
  if not u then return end
  local f = kind .. ':' .. j.t .. ':' .. int(fin_end_of(u + shift_of(j)))
  local c = tonumber(redis.call('HGET', K_FIN, f))
  if c and c > 0 then
    add_fin(f, -1)
    add_fin(kind .. ':' .. j.t, -1)
  end
end

-- finish makes job id done or cancelled: it expires after the retention
-- period, counts as finished until then, and is recorded (log_finish).
-- The fields named after state are saved with it. Its lease fields stay:
-- they mean nothing once the job is not reserved, and deleting them would
-- cost the server a write per job.
local function finish(id, j, state, ...)
  j.s, j.u = state, now
  save_kept(id, j, 's', 'u', ...)
  if j.k then index_key(id, j.t, j.k, kept_for(j)) end
  local kind = 'd'
  if state ~= 'done' then kind = 'c' end
  local shift = shift_of(j)
  redis.call('ZADD', key_finished(j.t, kind), int(now + shift), id)
  fin_add(kind, j.t, 1, shift)
  log_finish(id, j, kind, now_s, j.e)
end

-- parked_under returns the last registration in its key's queue on a
-- Cluster (slots.lua) that job id (j from load) was parked or woken under:
-- its field W, 0 for none.
local function parked_under(id, j)
  if packed_ids[id] then return tonumber(j.W or 0) end
  return tonumber(redis.call('HGET', key_job(id), 'W') or 0)
end

-- Packed puts. The caller packs the fields of a new job that the put
-- alone decides (put.lua's part: a MessagePack map16 of t, r, d, m, a, y
-- and those of k, b, p, w, h, z, R, T it has) and, apart, the value of C
-- a new job starts with; put_job appends those the server decides (s, c,
-- u, W) and C to the part, whose header counts s, c, u and C already
-- (PUT_ADDED), so that a put builds no table, packs no job and copies the
-- part once. The job strings and the queue entries of a call wait
-- in put_sets ({key, string, ...}) and put_zadds (per
-- queue key {score, id, ...}, put_zkeys the keys in order) until
-- flush_puts writes them: one MSET and one ZADD per queue instead of a SET
-- and a ZADD per job, each redis.call costing the server about a
-- microsecond beyond its command. put_ids holds every id the call put, in
-- either form: a put of one of them flushes first, and looks for the job
-- (put.lua looked for all of them at once, before the first).
local put_sets, put_ids, put_zadds, put_zkeys
-- now_p is now packed, made at the first put of a call.
local now_p
-- PUT_ADDED is how many fields put_job appends to a part (codec.go's
-- putAdded), which its header counts.
local PUT_ADDED = 4
-- recounted returns part, a map16, with its count of entries moved by
-- delta (the count stays under 256: a job has about 25 fields).
local function recounted(part, delta)
  return '\222\0' .. string.char(string.byte(part, 3) + delta) .. string.sub(part, 4)
end
-- PACKED_STATE are the states of a new job, packed.
local PACKED_STATE = {ready = '\165ready', scheduled = '\169scheduled'}

-- flush_puts writes the puts of the call that wait (see put_sets).
local function flush_puts()
  for i = 1, #put_sets, 2000 do
    redis.call('MSET', unpack(put_sets, i, math.min(i + 1999, #put_sets)))
  end
  for _, kq in ipairs(put_zkeys) do
    local z = put_zadds[kq]
    for i = 1, #z, 2000 do
      redis.call('ZADD', kq, unpack(z, i, math.min(i + 1999, #z)))
    end
  end
  put_sets, put_zadds, put_zkeys = {}, {}, {}
end

-- add_pair appends a and b to the list of k in lists, which it makes at
-- k's first pair, appending k to keys: the arguments of one command per
-- key, in the order of the keys' first use.
local function add_pair(lists, keys, k, a, b)
  local l = lists[k]
  if not l then
    l = {}
    lists[k] = l
    keys[#keys + 1] = k
  end
  l[#l + 1] = a
  l[#l + 1] = b
end

-- queue_later is link_queue for a put whose job waits in put_sets.
local function queue_later(id, t, r, y)
  note_queued(t, r)
  add_pair(put_zadds, put_zkeys, key_queue(t, y), int(r), id)
  if y and y ~= 0 then redis.call('ZADD', key_levels(t), y, int(y)) end
end

-- put_job stores the job whose 8 arguments start at ARGV[i] (put.lua's): a
-- new job, a finished one overwritten (not with absent: any job kept is a
-- conflict), or with replace an unfinished one replaced unless reserved;
-- in the form JOB_FORM names. A job of a topic of fair (a set of topics)
-- is parked by its key (park_new) rather than queued.
-- fresh says that the caller found neither the job's key nor its body
-- key. Returns 0 created, 1 replaced, or the existing job (job_all) on a
-- conflict.
local function put_job(replace, inline_body, i, absent, fair, fresh)
  local id, t, k, b = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local r, y = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local kj = key_job(id)
  if put_ids[id] then
    flush_puts()
    fresh = false
  end
  local created = now
  -- changes is the job's C packed; a replace unpacks it to append.
  local changes = ARGV[i + 6]
  local res = 0
  -- The body key too: a finished job's two keys expire apart, and a stale
  -- body must not outlive it into a new job of the same id.
  -- On a Cluster the job that takes the id keeps the old one's W, so that
  -- a park under a registration of the old one, still to come, passes.
  local was_parked = 0
  if not fresh and redis.call('EXISTS', kj, key_body(id)) > 0 then
    local j = load(id)
    if j and CLUSTER then was_parked = parked_under(id, j) end
    if j then settle(id, j) end
    if not j then
      -- only a stale body key
    elseif absent then
      return job_all(id)
    elseif j.s == 'done' or j.s == 'cancelled' then
      -- finished: overwritten by a fresh job, and no longer counted
      fin_forget(id, j)
    elseif not replace or j.s == 'reserved' then
      return job_all(id)
    else
      res = 1
      created = j.c
      unlink(id, j)
      local before = j.C
      if not packed_ids[id] then before = redis.call('HGET', kj, 'C') end
      changes = cmsgpack.pack(appended_change(before, 'r', string.sub(cmsgpack.unpack(changes), 3)))
    end
    redis.call('DEL', kj, key_body(id)) -- also drops a finished job's expiry
    if j and j.k and (j.k ~= k or j.t ~= t) then unindex_key(id, j.t, j.k) end
  end
  local state = 'scheduled'
  if r <= now then state = 'ready' end
  if #b > inline_body then redis.call('SET', key_body(id), b) end
  put_ids[id] = true
  local part = ARGV[i + 7]
  if JOB_FORM == 'packed' then
    local tail = ''
    if was_parked > 0 then
      part = recounted(part, 1)
      tail = '\161W' .. cmsgpack.pack(was_parked)
    end
    if not now_p then now_p = cmsgpack.pack(now) end
    local c = now_p
    if created ~= now then c = cmsgpack.pack(created) end
    put_sets[#put_sets + 1] = kj
    put_sets[#put_sets + 1] = part ..
      '\161s' .. PACKED_STATE[state] .. '\161c' .. c .. '\161u' .. now_p .. '\161C' .. changes .. tail
    packed_ids[id] = true
    if fair[t] then park_new(id, t, k, r) else queue_later(id, t, r, y) end
  else
    local j = cmsgpack.unpack(recounted(part, -PUT_ADDED))
    j.s, j.c, j.u, j.y, j.C = state, created, now, y, cmsgpack.unpack(changes)
    if was_parked > 0 then j.W = was_parked end
    packed_ids[id] = nil
    save(id, j)
    if fair[t] then park_new(id, t, k, r) else link_queue(id, t, r, y) end
  end
  if k ~= '' then index_key(id, t, k, false) end
  return res
end

-- use_shard makes the rest of the script act on shard n (base b): its keys.
-- Only for a standalone server, whose scripts may touch keys of several
-- hash tags.
local function use_shard(b, n)
  flush_finished()
  base, shard = b, n
  K_LEASE, K_COUNT, K_FIN, K_FINQ = b .. ':lease', b .. ':n', b .. ':fin', b .. ':finq'
end

-- Key limits (core.ClaimJobsParams.KeyConcurrency and Fair), on one
-- server, whose scripts may touch any key: the structures of a topic t
-- are the prefix's (PB, "{<prefix>}"), but for each shard's parked set.
-- On a Cluster (CLUSTER) the slots are slots.lua's and the shard scripts
-- only park, wake and report the slots they give back (released).
--
-- A claim with a limit that meets a due job whose key has that many slots
-- held parks it: out of its queue into pk:<t> of its shard (by run_at, for
-- the readers: a parked job is ready) and kq:<t>:<key> (by claim order,
-- KQ_LEVEL), the key in kk:<t>. A job reserved under a limit holds a slot:
-- its field K, counted in kh:<t>; whatever ends its lease (ack, retry,
-- bury, cancel, expiry) gives it back in the same script (release_slot),
-- which moves the key's first parked job back to its queue. So a key at
-- its limit costs a claim nothing however many of its jobs are due, and
-- its jobs go out in claim order. ks:<t> holds u, the lowest limit jobs
-- were parked under: a claim with a higher one, or none, moves them all
-- back (unpark_all).
--
-- A fair claim parks every due job (those without a key under key "") and
-- serves the ring kr:<t>, keys by turn: the key at the front gives its
-- first job and goes to the back while it has parked jobs and is under the
-- limit; a key enters at the back when it gets a parked job or a slot
-- back. ks:<t> then holds f (fair), l (the limit of the last fair claim:
-- keys at it are out of the ring) and s (the last turn given). A claim
-- that is not fair moves every parked job back first. ks:<t>'s c says
-- every reserved job of the topic with a key holds a slot (claim.lua).
--
-- A put of a job of a fair topic (core.PutJobsParams.Fair: the engine
-- names the topics its configuration makes fair, from their first put)
-- sets ks:<t>'s f and parks the job at once (park_new): in pk:<t> of its
-- shard, by run_at, scheduled or ready as its run_at says, and in its
-- key's new jobs kp:<t>:<key>, by run_at, the key in kn:<t> by its
-- earliest (or earlier: a job cancelled leaves it). A fair claim moves
-- the due ones of each key in kn to the key's queue, a bounded number of
-- each key per script (claim.lua's ripen), so that a key's backlog never
-- holds up the next key's entry into the ring, whether the jobs came
-- before the topic's first claim or after, and no claim walks the topic's
-- queue for them.
--
-- A claim with a rate per key (core.ClaimJobsParams.KeyRate; ks:<t>'s r
-- holds it) takes a token of the job's key's bucket kb:<t>:<key> for each
-- job it reserves (claim.lua); a job whose key has none is parked as for a
-- slot, and the key waits in kt:<t>, scored by when its bucket holds a
-- token again, out of the ring: claims then move back the heads of the
-- keys whose time came, one per token, or, fair, put the keys back in the
-- ring. A key that waits costs a claim nothing until then.
local PB
-- KQ_LEVEL spaces the priorities of a key's queue: a parked job's score
-- is (priority + 10) * KQ_LEVEL + run_at, exact in a double.
local KQ_LEVEL = 8796093022208 -- 2^43 ms, about 278 years

local function key_parked(t) return base .. ':pk:' .. t end
local function key_kq(t, k) return PB .. ':kq:' .. t .. ':' .. k end
local function key_kkeys(t) return PB .. ':kk:' .. t end
local function key_held(t) return PB .. ':kh:' .. t end
local function key_kstate(t) return PB .. ':ks:' .. t end
local function key_ring(t) return PB .. ':kr:' .. t end
local function key_waits(t) return PB .. ':kt:' .. t end
local function key_new(t, k) return PB .. ':kp:' .. t .. ':' .. k end
local function key_new_keys(t) return PB .. ':kn:' .. t end
-- On a Cluster a fair topic's new jobs are parked by key in their own
-- shard, whose scripts cannot reach the prefix's slot: kp:<t>:<key> and
-- kn:<t> of the shard (base), which a fair claim's peek reads by key.
local function key_snew(t, k) return base .. ':kp:' .. t .. ':' .. k end
local function key_snew_keys(t) return base .. ':kn:' .. t end

-- unnew takes job id of topic t, key k, out of its shard's new jobs (a
-- Cluster's), and the key out of the shard's kn once it has none left:
-- whether it was there.
local function unnew(id, t, k)
  local kp = key_snew(t, k)
  if redis.call('ZREM', kp, id) == 0 then return false end
  if redis.call('EXISTS', kp) == 0 then redis.call('ZREM', key_snew_keys(t), k) end
  return true
end

-- Shards. A parked job goes back to the queue of its own shard, which
-- its id gives: crc32 (IEEE) of it, masked (keys.shardOf).
local shard_count, crc_table

-- shards returns the prefix's shard count.
local function shards()
  if not shard_count then
    shard_count = tonumber(redis.call('HGET', PB .. ':meta', 'shards') or 1)
  end
  return shard_count
end

local function shard_of(id)
  if shards() == 1 then return 0 end
  if not crc_table then
    crc_table = {}
    for i = 0, 255 do
      local c = i
      for _ = 1, 8 do
        if bit.band(c, 1) == 1 then c = bit.bxor(bit.rshift(c, 1), 0xEDB88320) else c = bit.rshift(c, 1) end
      end
      crc_table[i] = c
    end
  end
  local c = -1
  for i = 1, #id do
    c = bit.bxor(bit.rshift(c, 8), crc_table[bit.band(bit.bxor(c, string.byte(id, i)), 255)])
  end
  return bit.band(bit.bnot(c), shard_count - 1)
end

-- shard_base returns the base of shard n.
local function shard_base(n) return string.sub(PB, 1, -2) .. ':' .. int(n) .. '}' end

-- in_shard runs fn() with the keys of shard n, announcing the queue heads
-- it makes earlier there (q_elsewhere), and comes back to the current
-- shard.
local function in_shard(n, fn)
  n = tostring(n)
  if n == shard then return fn() end
  local b0, n0 = base, shard
  local h, l, ts = q_head, q_low, q_topics
  q_head, q_low, q_topics = {}, {}, {}
  use_shard(shard_base(n), n)
  local r = fn()
  q_elsewhere = announced()
  use_shard(b0, n0)
  q_head, q_low, q_topics = h, l, ts
  return r
end

-- in_chunks runs command cmd on key with the arguments of args, flat,
-- up to 2000 to a call (Lua's unpack bounds how many).
local function in_chunks(cmd, key, args)
  for i = 1, #args, 2000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 1999, #args)))
  end
end

-- kq_score is the place in its key's queue of a job due at r of priority y.
local function kq_score(r, y) return ((y or 0) + 10) * KQ_LEVEL + r end

-- job_key returns the key of job id ('' for none), read alone from a
-- hash; nil when there is no such job.
local function job_key(id)
  local kj = key_job(id)
  if JOB_FORM == 'hash' then
    local k = redis.pcall('HGET', kj, 'k')
    if type(k) ~= 'table' then return k or '' end
  end
  local raw = redis.pcall('GET', kj)
  if type(raw) == 'string' then return cmsgpack.unpack(raw).k or '' end
  if not raw then return nil end
  return redis.call('HGET', kj, 'k') or ''
end

-- unqueue_key takes key k of topic t out of the ring and the keys waiting
-- for a token when its queue is empty, and out of the parked keys when it
-- has no new job either.
local function unqueue_key(t, k)
  if redis.call('EXISTS', key_kq(t, k)) == 1 then return end
  redis.call('ZREM', key_ring(t), k)
  redis.call('ZREM', key_waits(t), k)
  if redis.call('EXISTS', key_new(t, k)) == 1 then return end
  redis.call('ZREM', key_new_keys(t), k)
  redis.call('SREM', key_kkeys(t), k)
  if redis.call('SCARD', key_kkeys(t)) == 0 then redis.call('HDEL', key_kstate(t), 'u') end
end

-- unpark moves parked job id of topic t, key k, whose score in the key's
-- queue is score, back to its queue.
local function unpark(id, t, k, score)
  score = tonumber(score)
  local y = math.floor(score / KQ_LEVEL) - 10
  local r = score - (y + 10) * KQ_LEVEL
  in_shard(shard_of(id), function()
    redis.call('ZREM', key_parked(t), id)
    link_queue(id, t, r, y)
  end)
end

-- unparked takes queued job j (id), not in its queue, out of the parked
-- queues when it is parked. On a Cluster its key's queue, in another slot,
-- keeps its id until a freed slot wakes it (slots.lua), which finds it gone.
unparked = function(id, j)
  if redis.call('ZREM', key_parked(j.t), id) == 0 then return end
  local k = j.k or ''
  if CLUSTER then return unnew(id, j.t, k) end
  redis.call('ZREM', key_kq(j.t, k), id)
  redis.call('ZREM', key_new(j.t, k), id)
  unqueue_key(j.t, k)
end

-- park_new parks job id of topic t, key k ('' for none), due at r, put on
-- a topic whose claims are fair: in the shard's parked set and its key's
-- new jobs, the key in kn by its earliest. A job due earlier than the
-- topic's queue and new jobs held is announced as link_queue's are.
park_new = function(id, t, k, r)
  local kp, kn = key_new(t, k), key_new_keys(t)
  if CLUSTER then kp, kn = key_snew(t, k), key_snew_keys(t) end
  if q_head[t] == nil then
    local h = queue_head(t)
    local n = tonumber(redis.call('ZRANGE', kn, 0, 0, 'WITHSCORES')[2])
    if n and (not h or n < h) then h = n end
    q_head[t] = h
    q_topics[#q_topics + 1] = t
  end
  if not q_low[t] or r < q_low[t] then q_low[t] = r end
  redis.call('ZADD', key_parked(t), int(r), id)
  redis.call('ZADD', kp, int(r), id)
  redis.call('ZADD', kn, 'LT', int(r), k)
  if not CLUSTER then redis.call('SADD', key_kkeys(t), k) end
end

-- job_priority returns the priority of job id, in its own shard, or nil
-- when there is no such job.
local function job_priority(id)
  local kj = shard_base(shard_of(id)) .. ':j:' .. id
  if JOB_FORM == 'hash' then
    local v = redis.pcall('HMGET', kj, 's', 'y')
    if not v.err then
      if not v[1] then return nil end
      return tonumber(v[2]) or 0
    end
  end
  local raw = redis.pcall('GET', kj)
  if type(raw) == 'string' then return cmsgpack.unpack(raw).y or 0 end
  if not raw then return nil end
  local v = redis.call('HMGET', kj, 's', 'y')
  if not v[1] then return nil end
  return tonumber(v[2]) or 0
end

-- unpark_all moves every parked job of topic t back to its queue, the new
-- jobs of a fair topic too, and forgets the ring and the keys waiting for
-- a token.
local function unpark_all(t)
  for _, k in ipairs(redis.call('SMEMBERS', key_kkeys(t))) do
    local kq = key_kq(t, k)
    local got = redis.call('ZRANGE', kq, 0, -1, 'WITHSCORES')
    for i = 1, #got, 2 do unpark(got[i], t, k, got[i + 1]) end
    local kp = key_new(t, k)
    got = redis.call('ZRANGE', kp, 0, -1, 'WITHSCORES')
    for i = 1, #got, 2 do
      local id, y = got[i], job_priority(got[i])
      if y then unpark(id, t, k, kq_score(tonumber(got[i + 1]), y)) end
    end
    redis.call('DEL', kq, kp)
  end
  redis.call('DEL', key_kkeys(t), key_ring(t), key_waits(t), key_new_keys(t))
  redis.call('HDEL', key_kstate(t), 'u', 'f', 'l')
end

-- enter_ring puts key k of topic t at the back of the ring when it is out
-- of it, has parked jobs, fewer than limit slots held (0: no limit) and,
-- when rated (the claims have a rate per key), does not wait for a token.
local function enter_ring(t, k, limit, rated)
  if redis.call('ZSCORE', key_ring(t), k) or redis.call('EXISTS', key_kq(t, k)) == 0 then return false end
  if limit > 0 and k ~= '' and tonumber(redis.call('HGET', key_held(t), k) or 0) >= limit then return false end
  if rated and redis.call('ZSCORE', key_waits(t), k) then return false end
  redis.call('ZADD', key_ring(t), redis.call('HINCRBY', key_kstate(t), 's', 1), k)
  return true
end

-- The rate per key of the call's topic rate_t (Key limits above), nil for
-- none: {burst, per (ms a token)}, from use_rate. Its buckets,
-- kb:<t>:<key>, each "<tokens> <at ms>" (core.Bucket's arithmetic, as
-- rate.lua's), are read once per call (bucket) and written at its end
-- (flush_buckets) with an expiry at when they are full again: a missing
-- bucket is full.
local rate, rate_t
local buckets, bucket_keys

-- use_rate makes rate_s ("<limit> <period ms> <burst>", or empty for
-- none) the rate per key of topic t for the rest of the call.
local function use_rate(t, rate_s)
  rate_t, rate = t, nil
  local l, p, b = string.match(rate_s or '', '^(%S+) (%S+) (%S+)$')
  if l then rate = {burst = tonumber(b), per = tonumber(p) / tonumber(l)} end
end

local function key_bucket(k) return PB .. ':kb:' .. rate_t .. ':' .. k end

-- bucket returns key k's bucket as of now, {n tokens, at}.
local function bucket(k)
  local b = buckets[k]
  if b then return b end
  local n, at
  local v = redis.call('GET', key_bucket(k))
  if v then
    n, at = string.match(v, '^(%S+) (%S+)$')
    n, at = tonumber(n), tonumber(at)
  end
  if not n or not at then
    n, at = rate.burst, now
  elseif now > at then
    n, at = math.min(rate.burst, n + (now - at) / rate.per), now
  end
  b = {n = n, at = at}
  buckets[k] = b
  return b
end

-- tokens returns the whole tokens key k's bucket holds, n, and when it
-- holds a token again once those n are taken (ms).
local function tokens(k)
  local b = bucket(k)
  local n = math.floor(b.n)
  return n, now + math.ceil((n + 1 - b.n) * rate.per)
end

-- take_token takes a token of key k: true, or false and when its bucket
-- holds one again (ms).
local function take_token(k)
  local b = bucket(k)
  if b.n < 1 then return false, now + math.ceil((1 - b.n) * rate.per) end
  if not b.dirty then
    b.dirty = true
    bucket_keys[#bucket_keys + 1] = k
  end
  b.n = b.n - 1
  return true
end

local function flush_buckets()
  for _, k in ipairs(bucket_keys) do
    local b = buckets[k]
    redis.call('SET', key_bucket(k), string.format('%.17g', b.n) .. ' ' .. int(b.at), 'PX',
      int(math.ceil((rate.burst - b.n) * rate.per) + 1000))
  end
end

-- wait_token makes key k wait for its bucket's token at at, unless it
-- waits for an earlier one.
local function wait_token(k, at) redis.call('ZADD', key_waits(rate_t), 'LT', int(at), k) end

-- released are the slots of a Cluster the call gave back, flat {topic,
-- key, id, grant} (the job's K): the holders the caller then frees in the
-- prefix's slot (slots.lua), which wakes their keys' parked jobs. A
-- script that ends leases returns them.
local released

-- by_id is the answer of a script on one job: {code, job, queued,
-- released} (Store.byID).
local function by_id(code, job) return {code, job, announced(), released} end

-- release_slot gives back the slot reserved job j (id) holds, ending its
-- lease: the first parked job of its key goes back to its queue, or, fair,
-- the key back into the ring; on a Cluster it is recorded in released.
-- j is saved after.
release_slot = function(id, j)
  local t, k = j.t, j.k
  if CLUSTER then
    released[#released + 1] = t
    released[#released + 1] = k
    released[#released + 1] = id
    released[#released + 1] = j.K
  end
  j.K = nil
  if not packed_ids[id] then redis.call('HDEL', key_job(id), 'K') end
  if CLUSTER then return end
  if redis.call('HINCRBY', key_held(t), k, -1) <= 0 then redis.call('HDEL', key_held(t), k) end
  local st = redis.call('HMGET', key_kstate(t), 'f', 'l', 'r')
  if st[1] then
    if enter_ring(t, k, tonumber(st[2]) or 0, st[3]) then
      -- A job to take: fair claims read every shard, so shard 0 says it.
      redis.call('PUBLISH', chan, 'q 0 ' .. now_s .. ' ' .. t)
      q_elsewhere[#q_elsewhere + 1] = t
      q_elsewhere[#q_elsewhere + 1] = now_s
      q_elsewhere[#q_elsewhere + 1] = '0'
    end
    return
  end
  local first = redis.call('ZPOPMIN', key_kq(t, k))
  if first[1] then
    unpark(first[1], t, k, first[2])
    unqueue_key(t, k)
  end
end

-- begin starts a call of KEYS and ARGV: every per-call value above is set
-- here, since a function library (scripts.go) keeps them from one call to
-- the next.
local function begin()
  base = ARGV[1]
  -- now is the server's time unless the caller gave one (a test's clock):
  -- every instance then judges due times and leases by one clock. now_us
  -- orders deaths within a millisecond.
  if ARGV[2] == '' then
    local t = redis.call('TIME')
    now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    now = math.floor(now_us / 1000)
  else
    now = tonumber(ARGV[2])
    now_us = now * 1000
  end
  now_s = int(now)
  chan, shard, retention = ARGV[3], ARGV[4], ARGV[5]
  retention_ms = tonumber(retention)
  K_LEASE, K_COUNT, K_FIN, K_FINQ = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  FIN_WIDTH = math.ceil(retention_ms / 64)
  PB = string.match(base, '^({.*):%d+}$') .. '}'
  fin_log, packed_ids, released, prefetched = {}, {}, {}, {}
  put_sets, put_ids, put_zadds, put_zkeys, now_p = {}, {}, {}, {}, nil
  q_head, q_low, q_topics, q_elsewhere = {}, {}, {}, {}
  lease_head0, lease_low = nil, nil
  shard_count, rate, rate_t = nil, nil, nil
  buckets, bucket_keys = {}, {}
end
