-- lib.lua: prepended to every script of redisstore (see doc.go).
--
-- Every script runs on one shard: all the keys it touches carry the shard's
-- hash tag, the base "{<prefix>:<shard>}" in ARGV[1], so each runs on one
-- Redis Cluster slot. KEYS holds the shard's fixed keys (KEYS[1] routes the
-- call); job and per-topic keys are built here from the base, under the
-- same tag. The exception: on a standalone server (no slots) the lease and
-- claim scripts may handle several shards in one run, switching with
-- use_shard, since each run costs the server far more than its commands.
--
-- Common ARGV: [1] base, [2] now (Unix ms), [3] now (Unix µs), [4] the
-- wake-up channel, [5] the shard number, [6] retention (ms). Script
-- arguments start at ARGV[7].
local base = ARGV[1]
local now = tonumber(ARGV[2])
-- now_s is now as the caller sent it (an integer): formatting it again for
-- every write (int) showed in the server's profile.
local now_s = ARGV[2]
local now_us = tonumber(ARGV[3])
local chan = ARGV[4]
local shard = ARGV[5]
local retention = ARGV[6]

local K_SCHED = KEYS[1] -- zset: scheduled job ids by run_at (ms), all topics
local K_LEASE = KEYS[2] -- zset: reserved job ids by lease expiry (ms), all topics
local K_COUNT = KEYS[3] -- hash: "s:<topic>" scheduled and "x:<topic>" reserved counts
local K_FIN = KEYS[4]   -- hash: counts of finished jobs, per topic and time bucket
local K_FINQ = KEYS[5]  -- zset: the bucket fields of K_FIN by the end of their bucket (ms)

local function key_job(id) return base .. ':j:' .. id end
local function key_body(id) return base .. ':b:' .. id end
local function key_ready(t) return base .. ':ready:' .. t end
local function key_dead(t) return base .. ':dead:' .. t end

-- INLINE_BODY is the longest body kept in the job hash. A longer one lives
-- in its own string key, so that the hash keeps every value within Redis's
-- default hash-max-listpack-value (64) and its compact encoding: a hash
-- with one longer value becomes a hash table of about twice the memory.
local INLINE_BODY = 64

-- job_all returns the job's fields as HGETALL does, its body included
-- wherever it lives.
local function job_all(id)
  local h = redis.call('HGETALL', key_job(id))
  local body = redis.call('GET', key_body(id))
  if body then
    h[#h + 1] = 'b'
    h[#h + 1] = body
  end
  return h
end

-- int formats an integral number without exponent: Redis would otherwise
-- turn large Lua numbers into "1.8e+15".
local function int(n) return string.format('%d', n) end

-- woke lists the topics this call made jobs ready in, for the caller to
-- wake its own claims; other instances learn through the channel.
local woke, woke_set = {}, {}

-- head0 is the shard's next due time (earliest run_at or lease expiry)
-- before the call, lowest the earliest time the call added.
local head0, lowest = nil, nil

local function head()
  local h = false
  local a = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  if a[2] then h = tonumber(a[2]) end
  local b = redis.call('ZRANGE', K_LEASE, 0, 0, 'WITHSCORES')
  if b[2] then
    local v = tonumber(b[2])
    if not h or v < h then h = v end
  end
  return h
end

local function note_time(at)
  if lowest == nil or at < lowest then lowest = at end
end

-- publish_head tells every instance when the call made the shard due
-- earlier than before, and returns that time, or -1.
local function publish_head()
  if lowest ~= nil and (not head0 or lowest < head0) then
    redis.call('PUBLISH', chan, 's ' .. shard .. ' ' .. int(lowest))
    return int(lowest)
  end
  return -1
end

local function add_count(field, by)
  if redis.call('HINCRBY', K_COUNT, field, by) == 0 then
    redis.call('HDEL', K_COUNT, field)
  end
end

-- load returns the fields of job id that scripts act on, or nil. b, the
-- body when the hash holds it, tells that no body key exists: put and import
-- keep a body in one place only.
local function load(id)
  local v = redis.call('HMGET', key_job(id), 's', 't', 'r', 'x', 'a', 'm', 'l', 'd', 'b')
  if not v[1] then return nil end
  return {s = v[1], t = v[2], r = tonumber(v[3]), x = tonumber(v[4]), a = tonumber(v[5]),
    m = tonumber(v[6]), l = v[7], d = tonumber(v[8]), b = v[9]}
end

-- unlink takes job id out of the structure its state puts it in.
local function unlink(id, j)
  if j.s == 'scheduled' then
    redis.call('ZREM', K_SCHED, id)
    add_count('s:' .. j.t, -1)
  elseif j.s == 'ready' then
    redis.call('ZREM', key_ready(j.t), id)
  elseif j.s == 'reserved' then
    redis.call('ZREM', K_LEASE, id)
    add_count('x:' .. j.t, -1)
  elseif j.s == 'dead' then
    redis.call('ZREM', key_dead(j.t), id)
  end
end

-- link_ready adds job id to its topic's ready set; the first job of an
-- empty set is announced, so claims waiting anywhere wake up.
local function link_ready(id, t, r)
  local kr = key_ready(t)
  if redis.call('ZCARD', kr) == 0 then
    redis.call('PUBLISH', chan, 'r ' .. shard .. ' ' .. t)
  end
  redis.call('ZADD', kr, int(r), id)
  if not woke_set[t] then
    woke_set[t] = true
    woke[#woke + 1] = t
  end
end

local function link_sched(id, t, r)
  redis.call('ZADD', K_SCHED, int(r), id)
  add_count('s:' .. t, 1)
  note_time(r)
end

local function link_lease(id, t, x)
  redis.call('ZADD', K_LEASE, int(x), id)
  add_count('x:' .. t, 1)
  note_time(x)
end

-- link_dead adds job id to its topic's dead set, scored by time of death
-- in µs so that deaths close together keep their order.
local function link_dead(id, t, us)
  redis.call('ZADD', key_dead(t), int(us), id)
end

-- promote_one makes a scheduled job whose run_at has come ready.
local function promote_one(id, j)
  unlink(id, j)
  redis.call('HSET', key_job(id), 's', 'ready', 'u', int(j.r))
  link_ready(id, j.t, j.r)
  j.s = 'ready'
end

-- expire_lease ends a reserved job's expired lease: the job is ready again,
-- or dead when it used its last attempt, with last error "lease expired".
local function expire_lease(id, j)
  unlink(id, j)
  local kj = key_job(id)
  redis.call('HDEL', kj, 'l', 'x')
  if j.a >= j.m then
    redis.call('HSET', kj, 's', 'dead', 'u', int(j.x), 'e', 'lease expired')
    link_dead(id, j.t, j.x * 1000)
    j.s = 'dead'
  else
    redis.call('HSET', kj, 's', 'ready', 'u', int(j.x), 'e', 'lease expired')
    link_ready(id, j.t, j.r)
    j.s = 'ready'
  end
  j.l = false
end

-- settle brings job id up to now: due when its run_at passed, ready or dead
-- when its lease expired, whether or not a promoter got to it yet.
local function settle(id, j)
  if j.s == 'scheduled' and j.r <= now then
    promote_one(id, j)
  elseif j.s == 'reserved' and j.x <= now then
    expire_lease(id, j)
  end
end

-- Finished counts. K_FIN holds "d:<topic>" and "c:<topic>", the topic's
-- done and cancelled jobs in the shard that count now, and the same per
-- time bucket, "d:<topic>:<end>" and "c:<topic>:<end>": the jobs that
-- finished within the bucket that ends at <end> (Unix ms, inclusive),
-- FIN_WIDTH wide. K_FINQ lists the bucket fields by <end>. Once <end> is at or before now
-- minus the retention, every job of the bucket is past its retention: the
-- bucket leaves K_FIN and its count leaves the topic's total (fin_expire),
-- so a finished job stops counting less than FIN_WIDTH after its retention
-- ends, and reads sum nothing. Each total is the sum of its topic's bucket
-- fields.
local retention_ms = tonumber(retention)
-- FIN_WIDTH is the bucket width: a 64th of the retention, so that a topic
-- has at most 65 buckets of each kind in a shard, whatever the retention.
local FIN_WIDTH = math.ceil(retention_ms / 64)
-- fin_end is the end of the bucket of a job finishing now.
local fin_end = (math.floor(now / FIN_WIDTH) + 1) * FIN_WIDTH - 1

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

-- fin_add counts n jobs of topic t that finished now, kind 'd' (done) or
-- 'c' (cancelled). A new bucket is listed in K_FINQ, and the first job of
-- a bucket drops buckets that expired meanwhile, so that K_FIN stays
-- bounded even if nothing reads the counts; it also drops the topic's last
-- finish time, a field earlier versions kept in K_FIN.
local function fin_add(kind, t, n)
  local f = kind .. ':' .. t .. ':' .. int(fin_end)
  if redis.call('HINCRBY', K_FIN, f, n) == n then
    redis.call('ZADD', K_FINQ, int(fin_end), f)
    redis.call('HDEL', K_FIN, t)
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
  local u = tonumber(redis.call('HGET', key_job(id), 'u'))
  if not u then return end
  local f = kind .. ':' .. j.t .. ':' .. int(fin_end_of(u))
  local c = tonumber(redis.call('HGET', K_FIN, f))
  if c and c > 0 then
    add_fin(f, -1)
    add_fin(kind .. ':' .. j.t, -1)
  end
end

-- finish makes job id done or cancelled: it expires after the retention
-- period, and counts as finished until then.
local function finish(id, j, state)
  local kj = key_job(id)
  redis.call('HDEL', kj, 'l', 'x')
  redis.call('HSET', kj, 's', state, 'u', now_s)
  redis.call('PEXPIRE', kj, retention)
  if not j.b then redis.call('PEXPIRE', key_body(id), retention) end
  if state == 'done' then fin_add('d', j.t, 1) else fin_add('c', j.t, 1) end
end

-- use_shard makes the rest of the script act on shard n (base b): its keys,
-- and fresh woke, head0 and lowest. Only for a standalone server, whose
-- scripts may touch keys of several hash tags.
local function use_shard(b, n)
  base, shard = b, n
  K_SCHED, K_LEASE, K_COUNT, K_FIN, K_FINQ = b .. ':sched', b .. ':lease', b .. ':n', b .. ':fin', b .. ':finq'
  woke, woke_set = {}, {}
  head0, lowest = nil, nil
end
