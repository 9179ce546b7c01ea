-- claim.lua: reserve due jobs of one topic straight from its queues.
--
-- ARGV[6] topic; [7] the mode; [8] the claim's random token, which each
-- job's lease token starts with (the rest is the job's place in the
-- claim, so that a claim of many sends one token, not one per job); then,
-- for "take" (a standalone server): [9] max, [10] count of shards, their
-- bases and numbers: the earliest max due jobs of the shards' queues, by
-- run_at then id, are reserved. For "ids" (a Cluster, one shard per call,
-- whose candidates the caller read and merged): [9] base, [10] number,
-- then the ids; an id no longer due in the queue (another claim took it,
-- or it was cancelled) is skipped.
--
-- A topic paused in the (first) shard takes nothing: the answer is then
-- {now, {}, 1}.
--
-- Returns {now, groups}: the server's now, and per shard {jobs, lease,
-- head}: for each job reserved {id, its fields (as job_all) as they were
-- before the claim, its lease token}; the shard's earliest lease expiry when the
-- call made it earlier, or -1; the run_at of the queue's first job after
-- the claim, or -1 when it is empty.
--
-- Per job reserved: one HGETALL, which also gives the fields returned, and
-- one HSET; a GET only for a body that is not in the hash. The queue and
-- the lease set change in bulk, one ZREM and one ZADD per shard.
local t = ARGV[6]
local mode = ARGV[7]
local token = ARGV[8]

-- taken counts the jobs the call reserved, for their lease tokens.
local taken = 0

-- reserve reserves ids (due members of the shard's queue, each to be taken
-- once).
local function reserve(ids)
  local kq = key_queue(t)
  local out, leases = {}, {}
  if #ids > 0 then redis.call('ZREM', kq, unpack(ids)) end
  for k, id in ipairs(ids) do
    local kj = key_job(id)
    local h = redis.call('HGETALL', kj)
    if #h > 0 then
      -- The fields are returned as read: the caller applies the claim's
      -- changes (state, attempt, lease, expiry, updated) itself, which
      -- spares Redis, the bottleneck of a burst, patching them here.
      local d, a, inline
      for f = 1, #h, 2 do
        local name = h[f]
        if name == 'd' then d = h[f + 1] elseif name == 'a' then a = h[f + 1] elseif name == 'b' then inline = true end
      end
      local x = now + tonumber(d)
      taken = taken + 1
      local lease = token .. taken
      redis.call('HSET', kj, 's', 'reserved', 'a', int(tonumber(a) + 1), 'l', lease, 'x', int(x), 'u', now_s)
      if not inline then
        local body = redis.call('GET', key_body(id))
        if body then
          h[#h + 1] = 'b'
          h[#h + 1] = body
        end
      end
      leases[#leases + 1] = int(x)
      leases[#leases + 1] = id
      note_lease(x)
      out[#out + 1] = {id, h, lease}
    end
  end
  if #leases > 0 then
    redis.call('ZADD', K_LEASE, unpack(leases))
    add_count('x:' .. t, #out)
  end
  local h = redis.call('ZRANGE', kq, 0, 0, 'WITHSCORES')
  return {out, lease_announced(), h[2] and tonumber(h[2]) or -1}
end

-- paused reports whether topic t is paused, by the current shard's set.
local function paused() return redis.call('SISMEMBER', base .. ':paused', t) == 1 end

local results = {}
if mode == 'take' then
  local max, count = tonumber(ARGV[9]), tonumber(ARGV[10])
  use_shard(ARGV[11], ARGV[12])
  if paused() then return {now_s, {}, 1} end
  local groups = {}
  for g = 1, count do
    local b, n = ARGV[9 + 2 * g], ARGV[10 + 2 * g]
    use_shard(b, n)
    local due = redis.call('ZRANGE', key_queue(t), '-inf', now_s, 'BYSCORE', 'LIMIT', 0, max, 'WITHSCORES')
    groups[g] = {b = b, n = n, due = due, ids = {}}
  end
  -- The earliest max of all shards, by run_at then id: with one shard, its
  -- first max; with several, a merge of their sorted heads.
  local picked = 0
  local pos = {}
  for g = 1, count do pos[g] = 1 end
  while picked < max do
    local best, bs, bid
    for g = 1, count do
      local due = groups[g].due
      local p = pos[g]
      if due[p] then
        local s, id = tonumber(due[p + 1]), due[p]
        if not best or s < bs or (s == bs and id < bid) then best, bs, bid = g, s, id end
      end
    end
    if not best then break end
    local grp = groups[best]
    grp.ids[#grp.ids + 1] = bid
    pos[best] = pos[best] + 2
    picked = picked + 1
  end
  for g = 1, count do
    local grp = groups[g]
    use_shard(grp.b, grp.n)
    results[g] = reserve(grp.ids)
  end
elseif mode == 'ids' then
  use_shard(ARGV[9], ARGV[10])
  if paused() then return {now_s, {}, 1} end
  local kq = key_queue(t)
  local ids, seen = {}, {}
  for k = 11, #ARGV do
    local id = ARGV[k]
    if not seen[id] then
      seen[id] = true
      local s = redis.call('ZSCORE', kq, id)
      if s and tonumber(s) <= now then
        ids[#ids + 1] = id
      end
    end
  end
  results[1] = reserve(ids)
else
  return redis.error_reply('redisstore: unknown claim mode ' .. tostring(mode))
end
return {now_s, results}
