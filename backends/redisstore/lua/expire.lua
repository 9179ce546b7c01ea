-- expire.lua: end expired leases: each job is ready again in its queue, or
-- dead on its last attempt.
--
-- ARGV[6] the most leases to end per shard; then groups of one shard each
-- (one on a Cluster; several on a standalone server, see use_shard): the
-- shard's base and number.
--
-- Returns {now, groups}: the server's now, and per shard {head, more,
-- queued, released}: the shard's earliest lease expiry after the call, or
-- -1; 1 when the limit was reached and more may have expired; the queue
-- heads the call made earlier (announced); the slots of a Cluster it gave
-- back (release_slot).
local limit = tonumber(ARGV[6])
local results = {}
for i = 7, #ARGV, 2 do
  use_shard(ARGV[i], ARGV[i + 1])
  local expired = redis.call('ZRANGE', K_LEASE, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, limit)
  for _, id in ipairs(expired) do
    local j = load(id)
    if j and j.s == 'reserved' then
      expire_lease(id, j)
    else
      redis.call('ZREM', K_LEASE, id)
    end
  end
  local more = 0
  if #expired == limit then more = 1 end
  results[#results + 1] = {lease_head() or -1, more, announced(), released}
  released = {}
end
return {now_s, results}
