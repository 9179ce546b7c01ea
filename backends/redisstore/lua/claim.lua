-- claim.lua: reserve due jobs of one topic straight from its queues.
--
-- ARGV[6] topic; [7] the mode; [8] the claim's random token, which each
-- job's lease token starts with (the rest is the job's place in the
-- claim, so that a claim of many sends one token, not one per job); [9]
-- the via of the attempts it starts (encodeVia's: a letter, with the
-- instance and consumer when the claim names them; kept as field v, see
-- History in lib.lua); then, for "take" (a standalone server): [10] max,
-- [11] count of shards, their bases and numbers: the first max due jobs
-- of the shards' queues, by priority, run_at then id, are reserved. For
-- "ids" (a Cluster, one shard per call, whose candidates the caller read
-- and merged with peek.lua): [10] base, [11] number, then pairs of id and
-- priority; an id no longer due in its queue (another claim took it, or
-- it was cancelled) is skipped.
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
-- Per job reserved: of a packed job one GET and one SET; of a hash one
-- HGETALL, which also gives the fields returned, and one HSET (the
-- attempt's start is its u and v); a GET only for a body that is not in
-- the job. The queue and
-- the lease set change in bulk, one ZREM and one ZADD per shard.
local t = ARGV[6]
local mode = ARGV[7]
local token = ARGV[8]
local via = ARGV[9]

-- taken counts the jobs the call reserved, for their lease tokens.
local taken = 0

-- reserve reserves the jobs of picks ({id, run_at, priority}: due
-- members of the shard's queues, each to be taken once).
local function reserve(picks)
  local out, leases = {}, {}
  local ids, by_level = {}, {}
  for k, c in ipairs(picks) do
    ids[k] = c[1]
    local y = c[3]
    if not by_level[y] then by_level[y] = {} end
    local l = by_level[y]
    l[#l + 1] = c[1]
  end
  for y, l in pairs(by_level) do redis.call('ZREM', key_queue(t, y), unpack(l)) end
  for k, id in ipairs(ids) do
    local kj = key_job(id)
    -- The job is returned as read (job_all's forms): the caller applies
    -- the claim's changes (state, attempt, lease, expiry, updated)
    -- itself, which spares Redis, the bottleneck of a burst, patching
    -- them here.
    local got, x, inline
    local lease = token .. (taken + 1)
    local h = fetch(id)
    if #h == 1 then
      local raw = h[1]
      local j = packed_job(id, raw)
      x = now + j.d
      j.s, j.a, j.l, j.x, j.u, j.v = 'reserved', (j.a or 0) + 1, lease, x, now, via
      redis.call('SET', kj, cmsgpack.pack(j))
      got, inline = {raw}, j.b
    elseif #h > 0 then
      local d, a
      for f = 1, #h, 2 do
        local name = h[f]
        if name == 'd' then d = h[f + 1] elseif name == 'a' then a = h[f + 1] elseif name == 'b' then inline = true end
      end
      x = now + tonumber(d)
      packed_ids[id] = nil
      save(id, {s = 'reserved', a = tonumber(a) + 1, l = lease, x = x, u = now, v = via}, 's', 'a', 'l', 'x', 'u', 'v')
      got = h
    end
    if got then
      taken = taken + 1
      if not inline then with_body(id, got) end
      leases[#leases + 1] = int(x)
      leases[#leases + 1] = id
      note_lease(x)
      out[#out + 1] = {id, got, lease}
    end
  end
  if #leases > 0 then
    redis.call('ZADD', K_LEASE, unpack(leases))
    add_count('x:' .. t, #out)
  end
  return {out, lease_announced(), queue_head(t) or -1}
end

-- paused reports whether topic t is paused, by the current shard's set.
local function paused() return redis.call('SISMEMBER', base .. ':paused', t) == 1 end

local results = {}
if mode == 'take' then
  local max, count = tonumber(ARGV[10]), tonumber(ARGV[11])
  use_shard(ARGV[12], ARGV[13])
  if paused() then return {now_s, {}, 1} end
  local groups = {}
  for g = 1, count do
    local b, n = ARGV[10 + 2 * g], ARGV[11 + 2 * g]
    use_shard(b, n)
    groups[g] = {b = b, n = n, due = due_candidates(t, max), picks = {}}
  end
  -- The first max of all shards, by priority, run_at then id: with one
  -- shard, its first max; with several, a merge of their sorted heads.
  local picked = 0
  local pos = {}
  for g = 1, count do pos[g] = 1 end
  while picked < max do
    local best, bc
    for g = 1, count do
      local c = groups[g].due[pos[g]]
      if c and (not best or c[3] < bc[3] or (c[3] == bc[3] and (c[2] < bc[2] or (c[2] == bc[2] and c[1] < bc[1])))) then
        best, bc = g, c
      end
    end
    if not best then break end
    local grp = groups[best]
    grp.picks[#grp.picks + 1] = bc
    pos[best] = pos[best] + 1
    picked = picked + 1
  end
  for g = 1, count do
    local grp = groups[g]
    use_shard(grp.b, grp.n)
    results[g] = reserve(grp.picks)
  end
elseif mode == 'ids' then
  use_shard(ARGV[10], ARGV[11])
  if paused() then return {now_s, {}, 1} end
  local picks, seen = {}, {}
  for k = 12, #ARGV, 2 do
    local id, y = ARGV[k], tonumber(ARGV[k + 1])
    if not seen[id] then
      seen[id] = true
      local s = redis.call('ZSCORE', key_queue(t, y), id)
      if s and tonumber(s) <= now then
        picks[#picks + 1] = {id, tonumber(s), y}
      end
    end
  end
  results[1] = reserve(picks)
else
  return redis.error_reply('redisstore: unknown claim mode ' .. tostring(mode))
end
return {now_s, results}
