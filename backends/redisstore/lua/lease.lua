-- lease.lua: end or extend deliveries of one shard, given their leases.
--
-- ARGV[7...] 5 per delivery: op (ack, retry, bury or touch), id, lease,
-- run_at (ms) for retry, last error for retry and bury. Several stores'
-- calls are coalesced into one run (see leaseBatcher), so each delivery is
-- handled on its own: one that fails (a Redis error) is answered with its
-- error and the others go on.
--
-- Returns {results, head, woke}: per delivery {code, job}: 0 done, 1 not
-- found, 3 lease lost (not the current lease, or expired), -1 failed (job
-- is then the error text); touch returns the job (job_all). head is the
-- shard's new next due time or -1.
local acked = {}    -- topic -> finished jobs, for one K_FIN update per topic
local acked_topics = {}
local fin_topic

local function one(op, id, lease, r, etext)
  local j = load(id)
  if not j then return {1, false} end
  settle(id, j)
  if j.s ~= 'reserved' or lease == '' or j.l ~= lease then return {3, false} end
  local kj = key_job(id)
  if op == 'touch' then
    local x = now + j.d
    redis.call('ZADD', K_LEASE, int(x), id)
    redis.call('HSET', kj, 'x', int(x))
    return {0, job_all(id)}
  end
  unlink(id, j)
  if op == 'ack' then
    -- finish(id, j, 'done'), with the topic's finish time set once below.
    redis.call('HDEL', kj, 'l', 'x')
    redis.call('HSET', kj, 's', 'done', 'u', int(now))
    redis.call('PEXPIRE', kj, retention)
    if not j.b then
      -- The body is not in the hash: it may have a key of its own.
      redis.call('PEXPIRE', key_body(id), retention)
    end
    if not acked[j.t] then
      acked[j.t] = true
      acked_topics[#acked_topics + 1] = j.t
    end
  elseif op == 'retry' then
    if head0 == nil then head0 = head() end
    redis.call('HDEL', kj, 'l', 'x')
    redis.call('HSET', kj, 'e', etext, 'u', int(now), 'r', int(r))
    if r <= now then
      redis.call('HSET', kj, 's', 'ready')
      link_ready(id, j.t, r)
    else
      redis.call('HSET', kj, 's', 'scheduled')
      link_sched(id, j.t, r)
    end
  else -- bury
    redis.call('HDEL', kj, 'l', 'x')
    redis.call('HSET', kj, 's', 'dead', 'e', etext, 'u', int(now))
    link_dead(id, j.t, now_us)
  end
  return {0, false}
end

local out = {}
for i = 7, #ARGV, 5 do
  local op = ARGV[i]
  if op ~= 'ack' and op ~= 'retry' and op ~= 'bury' and op ~= 'touch' then
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
end
for _, t in ipairs(acked_topics) do
  local last = tonumber(redis.call('HGET', K_FIN, t))
  if not last or last < now then
    redis.call('HSET', K_FIN, t, int(now))
  end
end
return {out, publish_head(), woke}
