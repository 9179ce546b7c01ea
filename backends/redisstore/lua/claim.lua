-- claim.lua: reserve due jobs of one topic straight from its queues.
--
-- ARGV[6] topic; [7] the mode; [8] the claim's random token, which each
-- job's lease token starts with (the rest is the job's place in the
-- claim, so that a claim of many sends one token, not one per job); [9]
-- the via of the attempts it starts (encodeVia's: a letter, with the
-- instance and consumer when the claim names them; kept as field v, see
-- History in lib.lua); then, for "take" (a standalone server): [10] max,
-- [11] the key limit, [12] fair ("1"), [13] count of shards, their bases
-- and numbers, then the rate per key, "<limit> <period ms> <burst>" or
-- empty: the first max due jobs of the shards' queues, by priority,
-- run_at then id, are reserved. For
-- "ids" (a Cluster, one shard per call, whose candidates the caller read
-- and merged with peek.lua): [10] base, [11] number, then triples of id,
-- priority and grant: empty, or with a key_concurrency (slots.lua) the
-- time (ms) until which the job's slot was granted, which caps its lease
-- and makes its K the claim's token, or "p<v>" when its key had no slot
-- free and slots.lua queued it in its key's queue as registration v: the
-- job is then parked into pk:<t> (park_granted), or "f<v>", "f<v> <until>"
-- when the ring of a fair topic served it (slots.lua's "fair"): it is
-- reserved from its queue when due there, or from the parked set when
-- parked under v or before, its lease capped at until when given. An id
-- no longer due in its queue (another claim took it, or it was cancelled)
-- is skipped. Three
-- more modes on a Cluster, [10] base, [11] number: "unpark", then pairs
-- of id and registration of parked jobs slots.lua woke: each goes back to
-- its queue unless parked under a later registration since, answered 0,
-- or answered 1 when it is not queued (taken, finished), and keeps the
-- registration as its W: {now, codes, queued}; "unnew": the shard's new
-- jobs of a fair topic's puts (park_new) go back to its queue, for a
-- claim that is not fair: {now, queued}; "count": the topic's
-- reserved jobs with a key that hold no slot get K, the token: {now, flat
-- key, id, token, lease expiry} for slots.lua's "hold".
--
-- A topic paused in the (first) shard takes nothing: the answer is then
-- {now, {}, 1}.
--
-- Returns {now, groups}: the server's now, and per shard {jobs, lease,
-- head, shard}: for each job reserved {id, its fields (as job_all) as they
-- were before the claim, its lease token}, and of a fair claim its place
-- in the claim's order; the shard's earliest lease expiry when the call
-- made it earlier, or -1; the run_at of the queue's first job after the
-- claim, or -1 when it is empty (now when the ring of a fair claim still
-- has keys to serve); the shard's number.
--
-- Per job reserved: of a packed job one GET and one SET; of a hash one
-- HGETALL, which also gives the fields returned, and one HSET (the
-- attempt's start is its u and v); a GET only for a body that is not in
-- the job. The queue and
-- the lease set change in bulk, one ZREM and one ZADD per shard.
local t = ARGV[6]
local mode = ARGV[7]
local token = ARGV[8]
-- CLAIM_KEEP is how long a claim's ids are kept for recover.lua (ms).
local CLAIM_KEEP = 60000
local via = ARGV[9]

-- taken counts the jobs the call reserved, for their lease tokens.
local taken = 0

-- grant is the K of the jobs an "ids" claim reserves holding a slot of a
-- Cluster (slots.lua): the claim's token; one server's are "1".
local grant

-- The key limit of the claim (0: none), the slots held per key as read
-- (held_n, with this call's) and those this call took (held_new, written
-- at the end).
local limit = 0
local held_n, held_new = {}, {}

local function held(k)
  local n = held_n[k]
  if n == nil then
    n = tonumber(redis.call('HGET', key_held(t), k) or 0)
    held_n[k] = n
  end
  return n
end

local function hold(k)
  held_n[k] = held(k) + 1
  held_new[k] = (held_new[k] or 0) + 1
end

local function at_limit(k) return limit > 0 and k ~= '' and held(k) >= limit end

-- parked counts the jobs the call parked, at most about PARK_MAX, so
-- that a burst does not hold the server in one script (nor past a
-- client's read timeout): the next claim parks the next ones.
local parked = 0
local PARK_MAX = 10000
-- parked_slots counts those parked for a slot of their key (not a token).
local parked_slots = 0

-- Parking (Key limits in lib.lua), in bulk per shard: park adds due job
-- id (key k, '' for none in a fair claim; run_at r, priority y), which the
-- caller took out of its queue, to the current shard's batch;
-- flush_parks writes it: one ZADD of the shard's parked set, one ZADD per
-- key of its queue, one SADD of the keys.
local pk_batch, kq_batch, kq_keys = {}, {}, {}

local function park(id, k, r, y)
  pk_batch[#pk_batch + 1] = int(r)
  pk_batch[#pk_batch + 1] = id
  add_pair(kq_batch, kq_keys, k, int(kq_score(r, y)), id)
  parked = parked + 1
end

local function flush_parks()
  if #pk_batch == 0 then return end
  in_chunks('ZADD', key_parked(t), pk_batch)
  for _, k in ipairs(kq_keys) do in_chunks('ZADD', key_kq(t, k), kq_batch[k]) end
  in_chunks('SADD', key_kkeys(t), kq_keys)
  pk_batch, kq_batch, kq_keys = {}, {}, {}
end

-- job_field returns field name of fetched job h (fetch): of j when packed,
-- else from the hash's fields.
local function job_field(h, j, name)
  if j then return j[name] end
  for f = 1, #h, 2 do
    if h[f] == name then return h[f + 1] end
  end
end

-- reserve reserves the jobs of picks ({id, run_at, priority, holds,
-- place, the lease's cap on a Cluster, decided}) in the current shard: due
-- members of its queues (queued), each to be taken once, a job whose key
-- is at the limit or has no token parked instead (unless hold_in_order
-- decided it already); or
-- parked jobs a fair claim took from their key's queue, holds saying they
-- take a slot of their key. It returns their rows.
local function reserve(picks, queued)
  local out, leases = {}, {}
  local ids, by_level = {}, {}
  for k, c in ipairs(picks) do
    ids[k] = c[1]
    local y = c[3]
    if not by_level[y] then by_level[y] = {} end
    local l = by_level[y]
    l[#l + 1] = c[1]
  end
  if queued then
    for y, l in pairs(by_level) do redis.call('ZREM', key_queue(t, y), unpack(l)) end
  elseif #ids > 0 then
    redis.call('ZREM', key_parked(t), unpack(ids))
  end
  -- The jobs as read, per pick: hs its fetched form (fetch), js the job
  -- when packed, ks its key when limited (arrays side by side, not a
  -- table per job); with a limit, the slots held of their keys read in
  -- one HMGET. A store of packed jobs reads them in one MGET of keys,
  -- which answers false for a hash (a job not yet packed) and a job gone:
  -- those are read alone (fetch).
  local hs, js, ks, want, raws, keys = {}, {}, {}, {}, {}, {}
  if JOB_FORM == 'packed' and #picks > 0 then
    for n, c in ipairs(picks) do keys[n] = key_job(c[1]) end
    for i = 1, #keys, 2000 do
      for _, raw in ipairs(redis.call('MGET', unpack(keys, i, math.min(i + 1999, #keys)))) do
        raws[#raws + 1] = raw
      end
    end
  end
  for n, c in ipairs(picks) do
    local h
    if raws[n] then h = {raws[n]} else h = fetch(c[1]) end
    hs[n] = h
    if #h == 1 then js[n] = packed_job(c[1], h[1]) end
    if queued and (limit > 0 or rate) and not c[7] and #h > 0 then
      local k = job_field(h, js[n], 'k') or ''
      ks[n] = k
      if limit > 0 and k ~= '' and held_n[k] == nil then
        held_n[k] = false
        want[#want + 1] = k
      end
    end
  end
  if #want > 0 then
    for n, v in ipairs(redis.call('HMGET', key_held(t), unpack(want))) do held_n[want[n]] = tonumber(v) or 0 end
  end
  -- The packed jobs reserved, written in one MSET at the end: {key,
  -- string, ...}.
  local sets = {}
  for n, c in ipairs(picks) do
    local id = c[1]
    local kj = keys[n] or key_job(id)
    -- The job is returned as read (job_all's forms): the caller applies
    -- the claim's changes (state, attempt, lease, expiry, updated)
    -- itself, which spares Redis, the bottleneck of a burst, patching
    -- them here.
    local got, x, inline
    local lease = token .. int(taken + 1)
    local h, j, k = hs[n], js[n], ks[n]
    local holds = c[4]
    if k then
      local ok, at = not at_limit(k), nil
      if not ok then
        parked_slots = parked_slots + 1
      elseif rate then
        ok, at = take_token(k)
        if not ok then wait_token(k, at) end
      end
      if not ok then
        park(id, k, c[2], c[3])
        h = {}
      elseif limit > 0 and k ~= '' then
        hold(k)
        holds = true
      end
    end
    if #h == 1 then
      local raw = h[1]
      x = now + j.d
      if c[6] then x = math.min(x, c[6]) end
      j.s, j.a, j.l, j.x, j.u, j.v = 'reserved', (j.a or 0) + 1, lease, x, now, via
      if holds then j.K = grant or 1 end
      sets[#sets + 1] = kj
      sets[#sets + 1] = cmsgpack.pack(j)
      got, inline = h, j.b -- {raw}, as read
    elseif #h > 0 then
      local d, a
      for f = 1, #h, 2 do
        local name = h[f]
        if name == 'd' then d = h[f + 1] elseif name == 'a' then a = h[f + 1] elseif name == 'b' then inline = true end
      end
      x = now + tonumber(d)
      if c[6] then x = math.min(x, c[6]) end
      packed_ids[id] = nil
      local fields = {s = 'reserved', a = tonumber(a) + 1, l = lease, x = x, u = now, v = via}
      if holds then
        fields.K = grant or '1'
        save(id, fields, 's', 'a', 'l', 'x', 'u', 'v', 'K')
      else
        save(id, fields, 's', 'a', 'l', 'x', 'u', 'v')
      end
      got = h
    end
    if got then
      taken = taken + 1
      if not inline then with_body(id, got) end
      leases[#leases + 1] = int(x)
      leases[#leases + 1] = id
      note_lease(x)
      out[#out + 1] = {id, got, lease, c[5]}
    end
  end
  for i = 1, #sets, 2000 do
    redis.call('MSET', unpack(sets, i, math.min(i + 1999, #sets)))
  end
  if #leases > 0 then
    redis.call('ZADD', K_LEASE, unpack(leases))
    add_count('x:' .. t, #out)
  end
  flush_parks()
  return out
end

-- paused reports whether topic t is paused, by the current shard's set.
local function paused() return redis.call('SISMEMBER', base .. ':paused', t) == 1 end

-- Groups: the shards the call answers for, {b, n, out, lease}, in order.
local groups, by_shard = {}, {}
local function group(b, n)
  local g = by_shard[n]
  if not g then
    g = {b = b, n = n, out = {}, lease = -1}
    by_shard[n] = g
    groups[#groups + 1] = g
  end
  return g
end

-- reserve_in reserves picks in the shard of group g (reserve).
local function reserve_in(g, picks, queued)
  use_shard(g.b, g.n)
  for _, r in ipairs(reserve(picks, queued)) do g.out[#g.out + 1] = r end
  local l = tonumber(lease_announced())
  if l ~= -1 and (g.lease == -1 or l < g.lease) then g.lease = l end
end

-- due_picks returns the first max due jobs of the groups' queues, by
-- priority, run_at then id: per group (by index) its picks, each {id,
-- run_at, priority, false, its place among all}, and how many in all.
local function due_picks(max)
  local due, pos, picks = {}, {}, {}
  for g, grp in ipairs(groups) do
    use_shard(grp.b, grp.n)
    due[g], pos[g], picks[g] = due_candidates(t, max), 1, {}
  end
  -- With one shard, its first max: due_candidates' own tables, completed;
  -- with several, a merge of their sorted heads.
  if #groups == 1 then
    for k, c in ipairs(due[1]) do c[4], c[5] = false, k end
    return {due[1]}, #due[1]
  end
  local picked = 0
  while picked < max do
    local best, bc
    for g = 1, #groups do
      local c = due[g][pos[g]]
      if c and (not best or c[3] < bc[3] or (c[3] == bc[3] and (c[2] < bc[2] or (c[2] == bc[2] and c[1] < bc[1])))) then
        best, bc = g, c
      end
    end
    if not best then break end
    picked = picked + 1
    local l = picks[best]
    l[#l + 1] = {bc[1], bc[2], bc[3], false, picked}
    pos[best] = pos[best] + 1
  end
  return picks, picked
end

-- hold_in_order decides, in claim order over the groups (reserve decides
-- within one), which of picks (due_picks') hold a slot of their key, take
-- a token of its rate, and which are parked; it returns the picks left to
-- reserve.
local function hold_in_order(picks, picked)
  local all = {}
  for g, l in ipairs(picks) do
    for _, c in ipairs(l) do all[c[5]] = {g, c} end
  end
  local left = {}
  for g = 1, #groups do left[g] = {} end
  for i = 1, picked do
    local g, c = all[i][1], all[i][2]
    local grp = groups[g]
    if grp.n ~= shard then flush_parks() end
    use_shard(grp.b, grp.n)
    local k = job_key(c[1])
    local ok, at = not (k and at_limit(k)), nil
    if not ok then
      parked_slots = parked_slots + 1
    elseif k and rate then
      ok, at = take_token(k)
      if not ok then wait_token(k, at) end
    end
    if not ok then
      redis.call('ZREM', key_queue(t, c[3]), c[1])
      park(c[1], k, c[2], c[3])
    else
      if k and limit > 0 and k ~= '' then
        hold(k)
        c[4] = true
      end
      c[7] = true
      local l = left[g]
      l[#l + 1] = c
    end
  end
  flush_parks()
  return left
end

-- mark_held makes every reserved job of the topic with a key in the
-- current shard that holds no slot (reserved by a claim without a limit)
-- hold one, its K mark, and returns them, {id, j}.
local function mark_held(mark)
  local out = {}
  for _, id in ipairs(redis.call('ZRANGE', K_LEASE, 0, -1)) do
    local j = load(id)
    if j and j.s == 'reserved' and j.t == t and j.k and j.k ~= '' and not j.K then
      j.K = mark
      save(id, j, 'K')
      out[#out + 1] = {id, j}
    end
  end
  return out
end

-- count_held makes every reserved job of the topic with a key that holds
-- no slot hold one: a pass over the lease sets of every shard, once, when
-- a limit comes after claims without.
local function count_held()
  for n = 0, shards() - 1 do
    in_shard(n, function()
      for _, h in ipairs(mark_held('1')) do hold(h[2].k) end
    end)
  end
end

-- park_granted parks due job id (priority y) of the current shard, which
-- slots.lua refused a slot of its key, or a fair claim registered, and
-- queued in its key's queue as registration v, unless it was parked or
-- woken under v already: another claim refused it too, or a freed slot
-- woke it before this park came. A fair topic's new job (park_new), parked
-- already, leaves the shard's new jobs instead, its key's queue having it.
local function park_granted(id, y, v)
  local r = redis.call('ZSCORE', key_queue(t, y), id)
  local j
  if not r then
    j = load(id)
    if not j or not unnew(id, t, j.k or '') then return end
  end
  j = j or load(id)
  if parked_under(id, j) >= v then return end
  j.W = v
  save(id, j, 'W')
  if r then
    redis.call('ZREM', key_queue(t, y), id)
    redis.call('ZADD', key_parked(t), r, id)
  end
end

-- all_groups makes every shard a group of the call.
local function all_groups()
  for n = 0, shards() - 1 do group(shard_base(n), tostring(n)) end
end

-- ripen moves the due new jobs (park_new in lib.lua) of the keys in kn,
-- earliest first, to their keys' queues: up to per of each key, and
-- PARK_MAX in all (parked), so that every key with due jobs gets some
-- however long the others' backlogs. It returns the keys it gave jobs to,
-- in that order.
local function ripen(per)
  local kn = key_new_keys(t)
  local out = {}
  for _, k in ipairs(redis.call('ZRANGE', kn, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, PARK_MAX)) do
    if parked >= PARK_MAX then break end
    local kp = key_new(t, k)
    local got = redis.call('ZRANGE', kp, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, math.min(per, PARK_MAX - parked), 'WITHSCORES')
    local ids, batch = {}, {}
    for i = 1, #got, 2 do
      local id = got[i]
      ids[#ids + 1] = id
      local y = job_priority(id)
      if y then
        batch[#batch + 1] = int(kq_score(tonumber(got[i + 1]), y))
        batch[#batch + 1] = id
      end
    end
    if #ids > 0 then in_chunks('ZREM', kp, ids) end
    if #batch > 0 then
      in_chunks('ZADD', key_kq(t, k), batch)
      out[#out + 1] = k
    end
    parked = parked + #ids
    local nxt = redis.call('ZRANGE', kp, 0, 0, 'WITHSCORES')[2]
    if nxt then
      redis.call('ZADD', kn, nxt, k)
    else
      unqueue_key(t, k)
      redis.call('ZREM', kn, k)
    end
  end
  return out
end

-- take_fair parks the due jobs of every shard's queues (up to PARK_MAX)
-- in their keys' queues, after the due new jobs of the keys (ripen), the
-- keys entering the ring in the order of their first job, and reserves up
-- to max jobs from the ring, one of each key in turn.
local function take_fair(max)
  for _, k in ipairs(ripen(math.max(max, 100))) do enter_ring(t, k, limit, rate) end
  local picks = due_picks(PARK_MAX - parked)
  local first, keys = {}, {}
  for g, grp in ipairs(groups) do
    if #picks[g] > 0 then
      use_shard(grp.b, grp.n)
      local by_level = {}
      for _, c in ipairs(picks[g]) do
        local id, r, y = c[1], c[2], c[3]
        local l = by_level[y]
        if not l then
          l = {}
          by_level[y] = l
        end
        l[#l + 1] = id
        local k = job_key(id)
        if k then
          park(id, k, r, y)
          if not first[k] then keys[#keys + 1] = k end
          if not first[k] or c[5] < first[k] then first[k] = c[5] end
        end
      end
      for y, l in pairs(by_level) do in_chunks('ZREM', key_queue(t, y), l) end
      flush_parks()
    end
  end
  table.sort(keys, function(a, b) return first[a] < first[b] end)
  for _, k in ipairs(keys) do enter_ring(t, k, limit, rate) end

  local ring = key_ring(t)
  local serve = {}
  local served = 0
  while served < max do
    local front = redis.call('ZRANGE', ring, 0, 0)[1]
    if not front then break end
    local k = front
    local kq = key_kq(t, k)
    local ok, at = true, nil
    if not at_limit(k) and rate then ok, at = take_token(k) end
    if not ok then
      -- Out of the ring until its token: back at its end then (refill).
      redis.call('ZREM', ring, k)
      wait_token(k, at)
    elseif not at_limit(k) then
      local head = redis.call('ZPOPMIN', kq)
      local score = tonumber(head[2])
      local y = math.floor(score / KQ_LEVEL) - 10
      local holds = limit > 0 and k ~= ''
      if holds then hold(k) end
      served = served + 1
      local n = tostring(shard_of(head[1]))
      if not serve[n] then serve[n] = {} end
      local l = serve[n]
      l[#l + 1] = {head[1], score - (y + 10) * KQ_LEVEL, y, holds, served}
    end
    if not ok then
    elseif redis.call('EXISTS', kq) == 0 then
      unqueue_key(t, k)
    elseif at_limit(k) then
      redis.call('ZREM', ring, k)
    else
      redis.call('ZADD', ring, redis.call('HINCRBY', key_kstate(t), 's', 1), k)
    end
  end
  for _, g in ipairs(groups) do
    if serve[g.n] then reserve_in(g, serve[g.n], false) end
  end
end

-- refill ends the wait of the keys whose token came by now: a fair claim
-- puts them back in the ring; another moves as many heads of each key's
-- queue back to their queues as its bucket holds tokens, the key waiting
-- again for its next token when jobs are left. A key at the limit waits
-- for a slot instead, whose release moves its head back. It returns
-- whether it moved a job back.
local function refill(fair)
  local kt = key_waits(t)
  local due = redis.call('ZRANGE', kt, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, PARK_MAX)
  if #due == 0 then return false end
  in_chunks('ZREM', kt, due)
  local moved = false
  for _, k in ipairs(due) do
    if fair then
      enter_ring(t, k, limit, rate)
    elseif not at_limit(k) then
      local kq = key_kq(t, k)
      local n, at = tokens(k)
      if n > 0 then
        local got = redis.call('ZPOPMIN', kq, n)
        for i = 1, #got, 2 do unpark(got[i], t, k, got[i + 1]) end
        moved = moved or #got > 0
        unqueue_key(t, k)
      end
      if redis.call('EXISTS', kq) == 1 then wait_token(k, at) end
    end
  end
  return moved
end

local results = {}
if mode == 'take' then
  local max, fair = tonumber(ARGV[10]), ARGV[12] == '1'
  limit = tonumber(ARGV[11])
  use_shard(ARGV[14], ARGV[15])
  if paused() then return {now_s, {}, 1} end
  local count = tonumber(ARGV[13])
  for g = 1, count do group(ARGV[12 + 2 * g], ARGV[13 + 2 * g]) end
  local rate_s = ARGV[14 + 2 * count] or ''
  use_rate(t, rate_s)

  -- The parked jobs of another claim's kind go back to their queues
  -- first: those of a fair topic (its claims', or its puts': f) for a
  -- claim that is not, those parked under a limit by claims that were not
  -- fair for a fair one or one with a higher limit or none, those that
  -- wait for a token under another rate per key; their queues are then
  -- read in every shard.
  local ks = key_kstate(t)
  local st = redis.call('HMGET', ks, 'u', 'f', 'l', 'c', 'r')
  local under, was_fair, ring_limit = tonumber(st[1]), st[2] == '1', tonumber(st[3])
  local was_rate = st[5] or ''
  -- c: every reserved job of the topic with a key holds a slot. A claim
  -- without a limit reserves jobs that hold none; the next with one counts
  -- them first, so that a bound set on a busy topic holds from its first
  -- claim.
  if limit == 0 and st[4] then
    redis.call('HDEL', ks, 'c')
  elseif limit > 0 and not st[4] then
    count_held()
    redis.call('HSET', ks, 'c', '1')
  end
  -- (u is only a claim's that is not fair: a fair one that finds it found
  -- f set by a put.)
  if not fair and was_fair or fair and under or not fair and under and (limit == 0 or limit > under) or
      was_rate ~= rate_s and was_rate ~= '' then
    unpark_all(t)
    announced() -- to the other stores; this claim reads every shard
    under, was_fair, ring_limit = nil, false, nil
    all_groups()
  end
  if was_rate ~= rate_s then
    if rate then redis.call('HSET', ks, 'r', rate_s) else redis.call('HDEL', ks, 'r') end
  end
  if rate and refill(fair) then all_groups() end

  if fair then
    all_groups()
    if not was_fair then redis.call('HSET', ks, 'f', '1') end
    if ring_limit ~= limit then
      if ring_limit and ring_limit ~= 0 and (limit == 0 or limit > ring_limit) then
        -- Raised: the keys out of the ring at the old limit come back.
        for _, k in ipairs(redis.call('SMEMBERS', key_kkeys(t))) do enter_ring(t, k, limit, rate) end
      end
      redis.call('HSET', ks, 'l', limit)
    end
    take_fair(max)
  else
    -- Rounds: a job parked leaves room for the next due one.
    repeat
      local picks, picked = due_picks(max - taken)
      if picked == 0 then break end
      local before = parked
      if (limit > 0 or rate) and #groups > 1 then picks = hold_in_order(picks, picked) end
      for g, grp in ipairs(groups) do
        if #picks[g] > 0 then reserve_in(grp, picks[g], true) end
      end
    until taken >= max or parked == before or parked >= PARK_MAX
    if parked_slots > 0 and (not under or limit < under) then redis.call('HSET', ks, 'u', limit) end
  end
  for k, n in pairs(held_new) do redis.call('HINCRBY', key_held(t), k, n) end
  if rate then flush_buckets() end

  -- The first group's head is also when the first key waiting for a
  -- token gets it (refill), and when the first new job of a fair topic
  -- comes due (ripen): a claim then looks again.
  local ringed = fair and redis.call('EXISTS', key_ring(t)) == 1
  local soon = {}
  if rate then soon[1] = redis.call('ZRANGE', key_waits(t), 0, 0, 'WITHSCORES')[2] end
  if fair then soon[#soon + 1] = redis.call('ZRANGE', key_new_keys(t), 0, 0, 'WITHSCORES')[2] end
  for g, grp in ipairs(groups) do
    use_shard(grp.b, grp.n)
    local head = queue_head(t) or -1
    if g == 1 then
      for _, at in ipairs(soon) do
        at = tonumber(at)
        if at and (head == -1 or at < head) then head = at end
      end
    end
    if ringed and g == 1 then head = now end
    results[g] = {grp.out, grp.lease, head, grp.n}
  end
elseif mode == 'ids' then
  use_shard(ARGV[10], ARGV[11])
  if paused() then return {now_s, {}, 1} end
  grant = token
  -- fair_call: a job served by a fair claim's ring or parked in its key's
  -- queue, whose answer includes the shard's new jobs in its head.
  local picks, parked_picks, seen, fair_call = {}, {}, {}, false
  -- The queue scores of the plain picks, one ZMSCORE per priority: a
  -- ZSCORE each cost the server more in the call than in the command.
  local by_y, scores = {}, {}
  for k = 12, #ARGV, 3 do
    local c = string.byte(ARGV[k + 2], 1)
    if c ~= 102 and c ~= 112 then -- neither 'f' nor 'p'
      local y = tonumber(ARGV[k + 1])
      local l = by_y[y]
      if not l then
        l = {}
        by_y[y] = l
      end
      l[#l + 1] = ARGV[k]
    end
  end
  for y, l in pairs(by_y) do
    for i = 1, #l, 2000 do
      local got = redis.call('ZMSCORE', key_queue(t, y), unpack(l, i, math.min(i + 1999, #l)))
      for n, sc in ipairs(got) do
        if sc then scores[l[i + n - 1]] = tonumber(sc) end
      end
    end
  end
  for k = 12, #ARGV, 3 do
    local id, y, til = ARGV[k], tonumber(ARGV[k + 1]), ARGV[k + 2]
    local form = string.sub(til, 1, 1)
    if form == 'f' or form == 'p' then fair_call = true end
    if seen[id] then
    elseif form == 'p' then
      park_granted(id, y, tonumber(string.sub(til, 2)))
    elseif form == 'f' then
      seen[id] = true
      local v, cap = string.match(til, '^f(%d+) ?(%d*)$')
      v, cap = tonumber(v), tonumber(cap)
      local s = tonumber(redis.call('ZSCORE', key_queue(t, y), id))
      local r = tonumber(redis.call('ZSCORE', key_parked(t), id))
      if s and s <= now then
        picks[#picks + 1] = {id, s, y, cap ~= nil, nil, cap, true}
      elseif r and r <= now then
        local j = load(id)
        if j and parked_under(id, j) <= v then
          parked_picks[#parked_picks + 1] = {id, r, y, cap ~= nil, nil, cap}
          unnew(id, t, j.k or '')
        end
      end
    else
      til = tonumber(til)
      seen[id] = true
      local s = scores[id]
      if s and s <= now then
        picks[#picks + 1] = {id, s, y, til ~= nil, nil, til}
      end
    end
  end
  local out = reserve(picks, true)
  for _, r in ipairs(reserve(parked_picks, false)) do out[#out + 1] = r end
  local head = queue_head(t) or -1
  if fair_call then
    -- A fair topic's new jobs (park_new) are the shard's too.
    local first = tonumber(redis.call('ZRANGE', key_snew_keys(t), 0, 0, 'WITHSCORES')[2])
    if first and (head == -1 or first < head) then head = first end
  end
  results[1] = {out, lease_announced(), head, ARGV[11]}
elseif mode == 'unpark' then
  use_shard(ARGV[10], ARGV[11])
  local codes = {}
  for k = 12, #ARGV, 2 do
    local id, v = ARGV[k], tonumber(ARGV[k + 1])
    local j = load(id)
    codes[#codes + 1] = 1
    -- A job taken meanwhile keeps v too, so that a park under it still
    -- to come finds it passed; a finished one, which keeps its expiry,
    -- never parks again.
    if j and j.t == t and j.s ~= 'done' and j.s ~= 'cancelled' then
      local w = parked_under(id, j)
      if j.s == 'scheduled' or j.s == 'ready' then
        codes[#codes] = 0
        if w <= v and redis.call('ZREM', key_parked(t), id) == 1 then
          unnew(id, t, j.k or '') -- a fair topic's new job served, its reservation lost
          link_queue(id, t, j.r, j.y)
        end
      end
      if w < v then
        j.W = v
        save(id, j, 'W')
      end
    end
  end
  return {now_s, codes, announced()}
elseif mode == 'unnew' then
  -- A claim that is not fair: the shard's new jobs of the topic (park_new)
  -- go back to its queue.
  use_shard(ARGV[10], ARGV[11])
  local kn = key_snew_keys(t)
  for _, k in ipairs(redis.call('ZRANGE', kn, 0, -1)) do
    local kp = key_snew(t, k)
    for _, id in ipairs(redis.call('ZRANGE', kp, 0, -1)) do
      local j = load(id)
      if j and redis.call('ZREM', key_parked(t), id) == 1 then link_queue(id, t, j.r, j.y) end
    end
    redis.call('DEL', kp)
  end
  redis.call('DEL', kn)
  return {now_s, announced()}
elseif mode == 'count' then
  use_shard(ARGV[10], ARGV[11])
  local flat = {}
  for _, h in ipairs(mark_held(token)) do
    flat[#flat + 1] = h[2].k
    flat[#flat + 1] = h[1]
    flat[#flat + 1] = token
    flat[#flat + 1] = int(h[2].x)
  end
  return {now_s, flat}
else
  return redis.error_reply('redisstore: unknown claim mode ' .. tostring(mode))
end
-- The ids reserved, under the claim's token for CLAIM_KEEP ms in the
-- call's own shard: a claim whose answer is lost (a connection cut) finds
-- them again with recover.lua rather than leave them to their leases.
if taken > 0 then
  local ids = {}
  for _, g in ipairs(results) do
    for _, r in ipairs(g[1]) do ids[#ids + 1] = r[1] end
  end
  local b0 = ARGV[10]
  if mode == 'take' then b0 = ARGV[14] end
  redis.call('SET', b0 .. ':ct:' .. token, table.concat(ids, ' '), 'PX', CLAIM_KEEP)
end
return {now_s, results}
