-- lease.lua: end or extend deliveries, given their leases.
--
-- ARGV[6...] groups of one shard each (one group on a Cluster; several on a
-- standalone server, see use_shard): the shard's base and number, the count
-- of deliveries, then 5 per delivery: op (ack, retry, release, bury or
-- touch), id, lease, run_at (ms; 0 for now) for retry and release, or for
-- touch the most its lease may be extended to (ms, 0 for no cap: see
-- below), last error for retry, release and bury. Release is a retry
-- whose attempt is given back (core.Job.Release).
-- Several callers' deliveries are coalesced into one run (see
-- leaseBatcher), so each is handled on its own: one that fails (a Redis
-- error) is answered with its error and the others go on.
--
-- Returns per group {results, lease, queued, released}: per delivery
-- {code, job}: 0 done, 1 not found, 3 lease lost (not the current lease,
-- or expired), -1 failed (job is then the error text); touch returns the
-- job (job_all), or for a job that holds a slot of a Cluster and no cap
-- {4, topic, key, grant (K), ttr}: its holder is extended first
-- (slots.lua's "extend"), whose time the touch then gives as the cap.
-- Ack, retry and bury return {0, topic, attempt, state after the call}
-- instead, fields load read already (core.SettleResult), so that a burst
-- of acks costs no job to encode nor decode.
-- lease is the shard's earliest lease expiry when a touch made it earlier,
-- or -1; queued the queue heads the call made earlier; released the slots
-- of a Cluster it gave back (release_slot).
--
-- An ack writes the job hash once (state, time and the attempt's end in
-- its history; the lease fields stay, meaningless once the job is not
-- reserved), sets its expiry and records it (log_finish); the lease set
-- and the counts change once per call. Retry and bury end the attempt in
-- the history too.

-- acked are the acknowledged jobs per topic and shift of their retention
-- (shift_of), {t, shift, n, ids}, ids flat {score, id, ...}: for one
-- update of the topic's done count (fin_add) and one ZADD of its finished
-- jobs per shard and call. acked_order keeps them in the order first
-- acknowledged.
local acked, acked_order
-- Acked jobs leave K_LEASE and the reserved counts in bulk, at flush: one
-- ZREM per call and one HINCRBY per topic instead of one of each per job.
local unleased, unleased_n

local function flush()
  if #unleased > 0 then
    redis.call('ZREM', K_LEASE, unpack(unleased))
    unleased = {}
  end
  for t, n in pairs(unleased_n) do add_count('x:' .. t, -n) end
  unleased_n = {}
end

local function one(op, id, lease, r, etext)
  local j = load(id)
  if not j then return {1, false} end
  settle(id, j)
  if j.s ~= 'reserved' or lease == '' or j.l ~= lease then return {3, false} end
  if op == 'touch' then
    j.x = now + j.d
    if j.K and CLUSTER then
      if r == 0 then return {4, j.t, j.k, j.K, int(j.d)} end
      j.x = math.min(j.x, r)
    end
    note_lease(j.x)
    redis.call('ZADD', K_LEASE, int(j.x), id)
    save(id, j, 'x')
    return {0, job_all(id)}
  end
  if op == 'ack' then
    -- finish(id, j, 'done'), with the lease set and the counts updated
    -- once per call below.
    j.H = ended_attempt(j, 'a', now, '')
    if j.K then release_slot(id, j) end
    j.s, j.u = 'done', now
    save_kept(id, j, 's', 'u', 'H')
    if j.k then index_key(id, j.t, j.k, kept_for(j)) end
    local shift = shift_of(j)
    local group = j.t
    if shift ~= 0 then group = j.t .. '\n' .. int(shift) end
    local a = acked[group]
    if not a then
      a = {t = j.t, shift = shift, n = 0, ids = {}, score = int(now + shift)}
      acked[group] = a
      acked_order[#acked_order + 1] = a
    end
    a.n = a.n + 1
    a.ids[#a.ids + 1] = a.score
    a.ids[#a.ids + 1] = id
    unleased[#unleased + 1] = id
    unleased_n[j.t] = (unleased_n[j.t] or 0) + 1
    log_finish(id, j, 'd', now_s, j.e)
    return {0, j.t, j.a or 0, 'done'}
  end
  unlink(id, j)
  local state = 'dead'
  if op == 'retry' or op == 'release' then
    if r == 0 then r = now end
    state = 'scheduled'
    if r <= now then state = 'ready' end
    if op == 'release' then
      -- core.Job.Release: the attempt ends released and is given back.
      j.H = ended_attempt(j, 'l', now, etext)
      j.a = math.max((j.a or 0) - 1, 0)
      j.s, j.e, j.u, j.r = state, etext, now, r
      save(id, j, 's', 'e', 'u', 'r', 'a', 'H')
    else
      j.H = ended_attempt(j, 'r', now, etext)
      j.s, j.e, j.u, j.r = state, etext, now, r
      save(id, j, 's', 'e', 'u', 'r', 'H')
    end
    link_queue(id, j.t, r, j.y)
  else -- bury
    j.H = ended_attempt(j, 'b', now, etext)
    j.s, j.e, j.u = 'dead', etext, now
    save(id, j, 's', 'e', 'u', 'H')
    link_dead(id, j.t, now_us)
    log_finish(id, j, 'x', now_s, etext)
  end
  return {0, j.t, j.a or 0, state}
end

local results = {}
local i = 6
while i <= #ARGV do
  use_shard(ARGV[i], ARGV[i + 1])
  local count = tonumber(ARGV[i + 2])
  i = i + 3
  acked, acked_order, unleased, unleased_n = {}, {}, {}, {}
  local ids = {}
  for k = 1, count do ids[k] = ARGV[i + 5 * (k - 1) + 1] end
  prefetch(ids)
  local out = {}
  for _ = 1, count do
    local op = ARGV[i]
    if op ~= 'ack' and op ~= 'retry' and op ~= 'release' and op ~= 'bury' and op ~= 'touch' then
      out[#out + 1] = {-1, 'redisstore: unknown lease op ' .. op}
    else
      local ok, res = pcall(one, op, ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), ARGV[i + 4])
      if ok then
        out[#out + 1] = res
      else
        if type(res) == 'table' then res = res.err end
        out[#out + 1] = {-1, tostring(res)}
      end
    end
    i = i + 5
  end
  prefetched = {}
  flush()
  -- One ZADD per topic of the ids acknowledged (key_finished), before
  -- fin_add, which may set the zset's expiry.
  for _, a in ipairs(acked_order) do redis.call('ZADD', key_finished(a.t, 'd'), unpack(a.ids)) end
  for _, a in ipairs(acked_order) do fin_add('d', a.t, a.n, a.shift) end
  results[#results + 1] = {out, lease_announced(), announced(), released}
  released = {}
end
return results
