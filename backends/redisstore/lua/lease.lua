-- lease.lua: end or extend a delivery, given its lease.
--
-- ARGV[7] op: ack, retry, bury or touch; [8] id; [9] lease; [10] run_at (ms)
-- for retry; [11] last error for retry and bury.
--
-- Returns {code, job, head, woke}: 0 done, 1 not found, 3 lease lost (not the
-- current lease, or expired); touch returns the job (job_all); head is the
-- shard's new next due time or -1.
local op, id, lease = ARGV[7], ARGV[8], ARGV[9]
if op ~= 'ack' and op ~= 'retry' and op ~= 'bury' and op ~= 'touch' then
  return redis.error_reply('redisstore: unknown lease op ' .. op)
end
local j = load(id)
if not j then return {1, false, -1, woke} end
settle(id, j)
if j.s ~= 'reserved' or lease == '' or j.l ~= lease then return {3, false, -1, woke} end
local kj = key_job(id)
if op == 'touch' then
  local x = now + j.d
  redis.call('ZADD', K_LEASE, int(x), id)
  redis.call('HSET', kj, 'x', int(x))
  return {0, job_all(id), -1, woke}
end
unlink(id, j)
if op == 'ack' then
  finish(id, j, 'done')
elseif op == 'retry' then
  head0 = head()
  local r = tonumber(ARGV[10])
  redis.call('HDEL', kj, 'l', 'x')
  redis.call('HSET', kj, 'e', ARGV[11], 'u', int(now), 'r', int(r))
  if r <= now then
    redis.call('HSET', kj, 's', 'ready')
    link_ready(id, j.t, r)
  else
    redis.call('HSET', kj, 's', 'scheduled')
    link_sched(id, j.t, r)
  end
else -- bury
  redis.call('HDEL', kj, 'l', 'x')
  redis.call('HSET', kj, 's', 'dead', 'e', ARGV[11], 'u', int(now))
  link_dead(id, j.t, now_us)
end
return {0, false, publish_head(), woke}
