-- promote.lua: move one shard's due jobs to their topics' ready sets and
-- end its expired leases (ready again, or dead on the last attempt).
--
-- ARGV[7] the most jobs of each kind to handle in this call.
--
-- Returns {head, more, woke}: the shard's next due time or -1; 1 when the
-- limit was reached and more may be due; the topics that got ready jobs.
local limit = tonumber(ARGV[7])
local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', int(now), 'LIMIT', 0, limit)
for _, id in ipairs(due) do
  local j = load(id)
  if j and j.s == 'scheduled' then
    promote_one(id, j)
  else
    redis.call('ZREM', K_SCHED, id)
  end
end
local expired = redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', int(now), 'LIMIT', 0, limit)
for _, id in ipairs(expired) do
  local j = load(id)
  if j and j.s == 'reserved' then
    expire_lease(id, j)
  else
    redis.call('ZREM', K_LEASE, id)
  end
end
local more = 0
if #due == limit or #expired == limit then more = 1 end
return {head() or -1, more, woke}
