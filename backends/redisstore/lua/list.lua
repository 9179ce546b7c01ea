-- list.lua: one shard's part of a listing of a topic's jobs in one state
-- (Store.ListJobs), from a cursor.
--
-- ARGV[6] topic, [7] state, [8] the cursor's score ('' for the start),
-- [9] the cursor's id, [10] n.
--
-- Returns {now, members, queued}: the server's now; up to n members after
-- the cursor in the listing's order, flat {id, score, ...}; the queue heads
-- the call made earlier (leases it ended). Orders: scheduled and ready by
-- run_at (ms) then id, merged over the topic's priority queues and its
-- parked set (Key limits in lib.lua); reserved by
-- lease expiry (ms) then id, read from the shard's lease set, every topic's,
-- keeping the topic's; dead by death (µs) then id; done and cancelled
-- newest first, by finish (ms) then id, from f:<t>:d and f:<t>:c, leaving
-- out members past retention. Members may name jobs that changed since they
-- were filed (a reused id): the caller reads each job and keeps those
-- still in the state.
local t, state, cs, cid, n = ARGV[6], ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10])

-- Before reading, leases that expired end (as the expirer would end them),
-- up to 1000, so that ready, reserved and dead agree with GetJob.
if state == 'ready' or state == 'reserved' or state == 'dead' then
  for _, id in ipairs(redis.call('ZRANGE', K_LEASE, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, 1000)) do
    local j = load(id)
    if j and j.s == 'reserved' then
      expire_lease(id, j)
    else
      redis.call('ZREM', K_LEASE, id)
    end
  end
end

-- le compares ids byte by byte, as a zset orders members (Lua's own
-- comparison follows the server's locale).
local function le(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end

-- rank returns how many members of zset key come before (s, id): those
-- with a lower score, and of score s those whose id is lower (or equal,
-- with equal set). A binary search over the members of score s, which
-- ZCOUNT bounds: O(log n) whatever the ties.
local function rank(key, s, id, equal)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. s)
  local hi = lo + redis.call('ZCOUNT', key, s, s)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZRANGE', key, mid, mid)[1]
    local before
    if equal then before = le(m, id) else before = m ~= id and le(m, id) end
    if before then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- from returns the index where a listing of key after the cursor starts.
local function from(key)
  if cs == '' then return 0 end
  return rank(key, cs, cid, true)
end

local out = {}
-- take appends up to n members of key from index i on whose score is at
-- most upto (nil: any) and for which keep (nil: all) holds.
local function take(key, i, upto, keep)
  local got, chunk = 0, math.max(n, 64)
  while got < n do
    local r = redis.call('ZRANGE', key, i, i + chunk - 1, 'WITHSCORES')
    for k = 1, #r, 2 do
      if upto and tonumber(r[k + 1]) > upto then return end
      if not keep or keep(r[k]) then
        out[#out + 1] = r[k]
        out[#out + 1] = r[k + 1]
        got = got + 1
        if got == n then return end
      end
    end
    if #r < 2 * chunk then return end
    i = i + chunk
  end
end

if state == 'scheduled' or state == 'ready' then
  local sets = {key_parked(t)} -- jobs held back by their key (Key limits in lib.lua)
  for _, y in ipairs(levels(t)) do sets[#sets + 1] = key_queue(t, y) end
  for _, kq in ipairs(sets) do
    if state == 'ready' then
      take(kq, from(kq), now)
    else
      take(kq, math.max(from(kq), redis.call('ZCOUNT', kq, '-inf', now_s)))
    end
  end
elseif state == 'reserved' then
  take(K_LEASE, math.max(from(K_LEASE), redis.call('ZCOUNT', K_LEASE, '-inf', now_s)), nil,
    function(id)
      local j = load(id)
      return j and j.t == t
    end)
elseif state == 'dead' then
  local kd = key_dead(t)
  take(kd, from(kd))
else
  local kind = 'd'
  if state == 'cancelled' then kind = 'c' end
  local kf = key_finished(t, kind)
  local stop = redis.call('ZCARD', kf)
  if cs ~= '' then stop = rank(kf, cs, cid, false) end
  local first = math.max(redis.call('ZCOUNT', kf, '-inf', '(' .. int(now - retention_ms)), stop - n)
  if stop > first then
    local r = redis.call('ZRANGE', kf, first, stop - 1, 'WITHSCORES')
    for k = #r - 1, 1, -2 do
      out[#out + 1] = r[k]
      out[#out + 1] = r[k + 1]
    end
  end
end
return {now_s, out, announced()}
