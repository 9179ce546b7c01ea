-- slots.lua: the slots of keys on a Redis Cluster (Key limits in lib.lua),
-- in the prefix's own slot: KEYS[1] is its kx, which routes the call.
--
-- A slot is held by a holder of kx, "<topic>\n<id>\n<grant>\n<key>" scored
-- by when it lapses (ms): the lease expiry its job got, capped at it
-- (claim.lua's "ids" mode), so that a holder never ends before its lease.
-- kh:<t> counts the holders per key. Whatever frees a holder (a lease
-- ended: "release"; a grant a claim did not use; its score passed, for
-- a dead instance or a lost release: sweep) pops the first parked job of
-- its key (kq:<t>:<key>) to wake: the caller moves it back to its queue
-- (claim.lua's "unpark" mode), or, when it is not queued any more, pops
-- the next ("pop"). A job enters its key's queue as a registration, a
-- number of the topic's (ks's v, the job's in kv:<t>) that the claim parks
-- it under and the wake names: the shard keeps the last one a job was
-- parked or woken under (its field W), so that a park and a wake that
-- cross, or two claims that park one job, leave it parked exactly while
-- its key's queue holds it. A job woken waits in kw,
-- "<topic>\n<id>\n<registration>\n<key>" by a deadline, until its store
-- says it is back in its queue (the next call's confirmations); past the
-- deadline (a store that died in between) it is woken again, so that no
-- parked job is left out of its key's queue.
--
-- Fair (ks's f, set by the "fair" mode, dropped by "mode" without it):
-- the keys with registered jobs take turns in the ring kr:<t> (Key limits
-- in lib.lua), a key going to its back once served, out of it at its
-- limit; a freed holder then puts its key back in the ring instead of
-- waking its first job. A job the ring serves waits in kw as a woken job
-- does, until its store says it was reserved: a job that was not (its
-- store died, or its put's script came after) is woken again, back to its
-- queue, where the next fair claim registers it anew. kd:<t> holds the
-- TTR of each registered job (ms), for the slot of a served one.
--
-- A rate per key (ks's r, the claims' last): each key's bucket kb:<t>:<key>
-- is here too (lib.lua's), shared by the instances as on one server. A
-- candidate whose key has no token is refused and registered as for a
-- slot, its key waiting in kt:<t> by when its bucket holds one again;
-- grant and fair first end the waits whose time came (refill), waking as
-- many of each key's first jobs as it has tokens (fair: back in the
-- ring), and answer the earliest wait left, which the store waits for. A
-- token is taken when granted: a granted job another claim took first
-- costs its key a token.
--
-- ARGV[6] mode, [7] the count n of woken jobs confirmed, then n times
-- topic, key, id, registration; then from i0 = 8 + 4n by mode:
--   grant   [i0] topic, [+1] limit (0: none), [+2] grant token, [+3] the rate
--           per key ("<limit> <period ms> <burst>", or empty), then per
--           candidate, in claim order: id, key, ttr (ms), its place in its
--           key's queue (kq_score). A candidate with a key whose key holds
--           fewer than limit slots gets one until now + ttr, and with a rate
--           a token of its key's bucket; the others join their key's queue,
--           or are in it already, a key without a token waiting in kt:<t>.
--           The keys whose token came first wake as many parked jobs as
--           they have tokens (refill). Answers {now, wake, granted (flat id,
--           until, "" when it holds no slot), refused (flat id,
--           registration), when the first waiting key gets its token (ms)
--           or -1}, or {now, wake, "count"} while the topic's reserved jobs
--           with a key are not counted as holding slots (ks's c): the
--           caller counts them ("count" of claim.lua, then "hold") and asks
--           again.
--   release then per holder: topic, key, id, grant. Answers {now, wake,
--           the topics whose keys went back in their rings}.
--   pop     then per woken job not queued: topic, key, id, registration.
--   hold    [i0] topic, then per holder: key, id, grant, until: holders the
--           topic's reserved jobs became (claim.lua's "count"); then c.
--   extend  [i0] topic, key, id, grant, ttr: a touch extends its holder to
--           now + ttr first; answers {now, wake, until}, or -1 when the
--           holder lapsed.
--   fair    [i0] topic, [+1] limit (0: none), [+2] grant token, [+3] max, [+4]
--           the rate per key (as grant's), then per candidate (a fair
--           claim's walk of the due queues), in claim order: id, key, ttr
--           (ms), its place in its key's queue. Each joins its key's queue
--           unless in it, its key entering the ring in that order; then up
--           to max jobs are served from the ring, one of each key in turn,
--           a slot of its key granted with each under a limit and a token
--           taken with a rate (a key without one leaves the ring until its
--           refill). Answers {now, wake, served (flat id, key,
--           registration, slot's end or "", place in its key's queue),
--           parked (flat id, registration: the candidates left queued, to
--           park), 1 when the ring holds keys still, else 0, when the first
--           key waiting for a token gets it or -1}, or "count" as grant
--           does.
--   mode    [i0] topic, limit, fair ("1"), rate per key: a store's claims
--           changed: the jobs parked under a lower limit wake, without a
--           limit c goes (its reserved jobs hold no slot), without fair the
--           ring goes, and without fair or with another rate every parked
--           job wakes.
--   sweep   only the sweep that every mode makes first.
-- Answers start {now, wake}, wake flat topic, key, id, registration.
local KX = KEYS[1]
local KW = PB .. ':kw'
local mode = ARGV[6]
local i0 = 8 + 4 * tonumber(ARGV[7])
-- SKEW (ms): a holder lapses this long after its score, so that a master
-- whose clock is behind the prefix slot's still sees its lease end first.
local SKEW = 1000

-- WAKE_MS (ms) is how long a woken job waits in kw for its store's word:
-- a job woken again that is back in its queue already costs a script run,
-- one whose wake was lost (an answer cut) waits that long.
local WAKE_MS = 5000

local wake = {}

local function member(t, k, id, g) return t .. '\n' .. id .. '\n' .. g .. '\n' .. k end
local function woken(t, k, id, v) return t .. '\n' .. id .. '\n' .. v .. '\n' .. k end
local function key_kv(t) return PB .. ':kv:' .. t end
local function key_kd(t) return PB .. ':kd:' .. t end

-- wake_job wakes job id of key k of topic t, parked under registration v.
local function wake_job(t, k, id, v)
  wake[#wake + 1] = t
  wake[#wake + 1] = k
  wake[#wake + 1] = id
  wake[#wake + 1] = v
  redis.call('ZADD', KW, int(now + WAKE_MS), woken(t, k, id, v))
end

-- unregister takes job id out of topic t's registrations: its number.
local function unregister(t, id)
  local v = redis.call('HGET', key_kv(t), id) or '0'
  redis.call('HDEL', key_kv(t), id)
  redis.call('HDEL', key_kd(t), id)
  return v
end

-- register puts job id (key k, ttr ms, place score) in its key's queue of
-- topic t, unless it is in it: its registration.
local function register(t, k, id, ttr, score)
  local v = redis.call('HGET', key_kv(t), id)
  if v then return v end
  v = redis.call('HINCRBY', key_kstate(t), 'v', 1)
  redis.call('HSET', key_kv(t), id, v)
  redis.call('HSET', key_kd(t), id, ttr)
  redis.call('ZADD', key_kq(t, k), score, id)
  redis.call('SADD', key_kkeys(t), k)
  return v
end

local function held_of(t, k) return tonumber(redis.call('HGET', key_held(t), k) or 0) end

-- pop wakes the first parked job of key k of topic t.
local function pop(t, k)
  local first = redis.call('ZPOPMIN', key_kq(t, k))
  if first[1] then wake_job(t, k, first[1], unregister(t, first[1])) end
  unqueue_key(t, k)
end

-- rung are the topics whose keys free put back in their rings.
local rung = {}

-- free frees holder m when it still holds, and pops its key, or, fair,
-- puts it back in the ring (saying so to the claims: shard 0's wake-up,
-- and rung).
local function free(m)
  if redis.call('ZREM', KX, m) == 0 then return end
  local t, k = string.match(m, '^([^\n]*)\n[^\n]*\n[^\n]*\n(.*)$')
  if redis.call('HINCRBY', key_held(t), k, -1) <= 0 then redis.call('HDEL', key_held(t), k) end
  local st = redis.call('HMGET', key_kstate(t), 'f', 'l', 'r')
  if not st[1] then return pop(t, k) end
  if enter_ring(t, k, tonumber(st[2]) or 0, st[3]) then
    redis.call('PUBLISH', chan, 'q 0 ' .. now_s .. ' ' .. t)
    rung[#rung + 1] = t
  end
end

-- wake_all wakes every parked job of topic t.
local function wake_all(t)
  for _, k in ipairs(redis.call('SMEMBERS', key_kkeys(t))) do
    for _, id in ipairs(redis.call('ZRANGE', key_kq(t, k), 0, -1)) do wake_job(t, k, id, unregister(t, id)) end
    redis.call('DEL', key_kq(t, k))
  end
  redis.call('DEL', key_kkeys(t), key_ring(t), key_waits(t))
  redis.call('HDEL', key_kstate(t), 'u', 'f', 'l')
end

-- set_rate makes rate_s the rate per key of topic t's claims (use_rate):
-- when they had another (ks's r), every parked job wakes, to go out under
-- the new one.
local function set_rate(t, rate_s)
  use_rate(t, rate_s)
  local ks = key_kstate(t)
  local was = redis.call('HGET', ks, 'r') or ''
  if was == rate_s then return end
  if was ~= '' then wake_all(t) end
  if rate_s == '' then redis.call('HDEL', ks, 'r') else redis.call('HSET', ks, 'r', rate_s) end
end

-- refill ends the wait of topic t's keys whose token came by now: fair,
-- they go back in the ring; else as many first jobs of each wake as its
-- bucket holds tokens, the key waiting again for its next token when jobs
-- are left. A key at limit waits for a slot instead, whose freeing wakes
-- its first job.
local function refill(t, limit, fair)
  local kt = key_waits(t)
  local due = redis.call('ZRANGE', kt, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, 1000)
  if #due == 0 then return end
  redis.call('ZREM', kt, unpack(due))
  for _, k in ipairs(due) do
    if fair then
      enter_ring(t, k, limit, rate)
    elseif limit == 0 or k == '' or held_of(t, k) < limit then
      local kq = key_kq(t, k)
      local n, at = tokens(k)
      for _ = 1, n do
        local first = redis.call('ZPOPMIN', kq)[1]
        if not first then break end
        wake_job(t, k, first, unregister(t, first))
      end
      if redis.call('EXISTS', kq) == 1 then wait_token(k, at) else unqueue_key(t, k) end
    end
  end
end

-- soonest returns when topic t's first key waiting for a token gets it
-- (ms), or -1.
local function soonest(t) return tonumber(redis.call('ZRANGE', key_waits(t), 0, 0, 'WITHSCORES')[2]) or -1 end

for i = 8, i0 - 1, 4 do redis.call('ZREM', KW, woken(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])) end
-- The sweep: holders whose score passed and woken jobs past their
-- deadline, of every topic, 1000 at most of each.
for _, m in ipairs(redis.call('ZRANGE', KX, '-inf', int(now - SKEW), 'BYSCORE', 'LIMIT', 0, 1000)) do free(m) end
for _, m in ipairs(redis.call('ZRANGE', KW, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, 1000)) do
  local t, id, v, k = string.match(m, '^([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$')
  wake_job(t, k, id, v)
end

local out = {now_s, wake}
if mode == 'grant' then
  local t, limit, g = ARGV[i0], tonumber(ARGV[i0 + 1]), ARGV[i0 + 2]
  local ks = key_kstate(t)
  local st = redis.call('HMGET', ks, 'u', 'c')
  if limit > 0 and not st[2] then
    out[3] = 'count'
    return out
  end
  set_rate(t, ARGV[i0 + 3])
  local under = tonumber(st[1])
  if under and limit > under then
    wake_all(t)
    under = nil
  end
  if rate then refill(t, limit, false) end
  local held, granted, refused, for_slots = {}, {}, {}, 0
  for i = i0 + 4, #ARGV, 4 do
    local id, k, ttr, score = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
    local slotted = limit > 0 and k ~= ''
    if slotted and held[k] == nil then held[k] = held_of(t, k) end
    local ok, at = not slotted or held[k] < limit, nil
    if not ok then
      for_slots = for_slots + 1
    elseif rate then
      ok, at = take_token(k)
      if not ok then wait_token(k, at) end
    end
    if not ok then
      refused[#refused + 1] = id
      refused[#refused + 1] = register(t, k, id, ttr, score)
    else
      local til = ''
      if slotted then
        held[k] = held[k] + 1
        redis.call('HINCRBY', key_held(t), k, 1)
        til = int(now + ttr)
        redis.call('ZADD', KX, til, member(t, k, id, g))
      end
      granted[#granted + 1] = id
      granted[#granted + 1] = til
    end
  end
  if for_slots > 0 and (not under or limit < under) then redis.call('HSET', ks, 'u', limit) end
  if rate then flush_buckets() end
  out[3], out[4], out[5] = granted, refused, soonest(t)
elseif mode == 'release' then
  for i = i0, #ARGV, 4 do free(member(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])) end
  out[3] = rung
elseif mode == 'pop' then
  for i = i0, #ARGV, 4 do
    redis.call('ZREM', KW, woken(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]))
    pop(ARGV[i], ARGV[i + 1])
  end
elseif mode == 'hold' then
  local t = ARGV[i0]
  for i = i0 + 1, #ARGV, 4 do
    local k = ARGV[i]
    if redis.call('ZADD', KX, 'NX', ARGV[i + 3], member(t, k, ARGV[i + 1], ARGV[i + 2])) == 1 then
      redis.call('HINCRBY', key_held(t), k, 1)
    end
  end
  redis.call('HSET', key_kstate(t), 'c', '1')
elseif mode == 'extend' then
  local m = member(ARGV[i0], ARGV[i0 + 1], ARGV[i0 + 2], ARGV[i0 + 3])
  local score = tonumber(redis.call('ZSCORE', KX, m))
  out[3] = -1
  if score and score > now then
    out[3] = int(now + tonumber(ARGV[i0 + 4]))
    redis.call('ZADD', KX, 'XX', out[3], m)
  end
elseif mode == 'fair' then
  local t, limit, g, max = ARGV[i0], tonumber(ARGV[i0 + 1]), ARGV[i0 + 2], tonumber(ARGV[i0 + 3])
  local ks = key_kstate(t)
  if limit > 0 and not redis.call('HGET', ks, 'c') then
    out[3] = 'count'
    return out
  end
  set_rate(t, ARGV[i0 + 4])
  local st = redis.call('HMGET', ks, 'f', 'l')
  if not st[1] then
    -- Fair from now: the keys parked under a limit take turns too.
    redis.call('HSET', ks, 'f', '1')
    for _, k in ipairs(redis.call('SMEMBERS', key_kkeys(t))) do enter_ring(t, k, limit, rate) end
  end
  if tonumber(st[2]) ~= limit then redis.call('HSET', ks, 'l', limit) end
  if rate then refill(t, limit, true) end
  local cands, seen = {}, {}
  for i = i0 + 5, #ARGV, 4 do
    local id, k = ARGV[i], ARGV[i + 1]
    register(t, k, id, ARGV[i + 2], ARGV[i + 3])
    cands[#cands + 1] = id
    if not seen[k] then
      seen[k] = true
      enter_ring(t, k, limit, rate)
    end
  end
  local ring, served, n = key_ring(t), {}, 0
  local function at_limit(k) return limit > 0 and k ~= '' and held_of(t, k) >= limit end
  while n < max do
    local k = redis.call('ZRANGE', ring, 0, 0)[1]
    if not k then break end
    local kq = key_kq(t, k)
    local head, ok, at = {}, not at_limit(k), nil
    if ok and rate then ok, at = take_token(k) end
    if ok then
      head = redis.call('ZPOPMIN', kq)
    elseif at then
      -- Out of the ring until its token, back at its end then (refill).
      redis.call('ZREM', ring, k)
      wait_token(k, at)
    else
      redis.call('ZREM', ring, k)
    end
    local id = head[1]
    if id then
      local ttr = redis.call('HGET', key_kd(t), id)
      local v = unregister(t, id)
      local til = ''
      if limit > 0 and k ~= '' then
        if ttr then
          til = int(now + tonumber(ttr))
          redis.call('HINCRBY', key_held(t), k, 1)
          redis.call('ZADD', KX, til, member(t, k, id, g))
        else
          -- Registered before TTRs were kept: back to its queue, to be
          -- registered again with its TTR.
          wake_job(t, k, id, v)
          id = nil
        end
      end
      if id then
        redis.call('ZADD', KW, int(now + WAKE_MS), woken(t, k, id, v))
        n = n + 1
        for _, x in ipairs({id, k, v, til, int(tonumber(head[2]))}) do served[#served + 1] = x end
      end
      if redis.call('EXISTS', kq) == 0 then
        unqueue_key(t, k)
      elseif at_limit(k) then
        redis.call('ZREM', ring, k)
      else
        redis.call('ZADD', ring, redis.call('HINCRBY', ks, 's', 1), k)
      end
    elseif ok then
      unqueue_key(t, k) -- an empty queue
    end
  end
  if rate then flush_buckets() end
  local parks = {}
  for _, id in ipairs(cands) do
    local v = redis.call('HGET', key_kv(t), id)
    if v then
      parks[#parks + 1] = id
      parks[#parks + 1] = v
    end
  end
  out[3], out[4], out[5], out[6] = served, parks, redis.call('EXISTS', ring), soonest(t)
elseif mode == 'mode' then
  local t, limit, fair = ARGV[i0], tonumber(ARGV[i0 + 1]), ARGV[i0 + 2] == '1'
  local ks = key_kstate(t)
  set_rate(t, ARGV[i0 + 3])
  local st = redis.call('HMGET', ks, 'u', 'f')
  local under = tonumber(st[1])
  if under and (limit == 0 or limit > under) or st[2] and not fair then wake_all(t) end
  if limit == 0 then redis.call('HDEL', ks, 'c') end
elseif mode ~= 'sweep' then
  return redis.error_reply('redisstore: unknown slots mode ' .. tostring(mode))
end
return out
