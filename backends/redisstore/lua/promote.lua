-- promote.lua: move due jobs to their topics' ready sets and end expired
-- leases (ready again, or dead on the last attempt).
--
-- ARGV[7] the most jobs of each kind to handle per shard; then groups of
-- one shard each (one on a Cluster; several on a standalone server, see
-- use_shard): the shard's base and number.
--
-- Returns per group {head, more, woke}: the shard's next due time or -1; 1
-- when the limit was reached and more may be due; the topics that got ready
-- jobs.
local limit = tonumber(ARGV[7])
local function promote_shard()
  local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', now_s, 'LIMIT', 0, limit)
  if #due > 0 then
    -- In bulk: one ZREM, and per topic one count update and one ZADD.
    local by_topic, topics = {}, {}
    for _, id in ipairs(due) do
      local kj = key_job(id)
      local v = redis.call('HMGET', kj, 's', 't', 'r')
      if v[1] == 'scheduled' then
        redis.call('HSET', kj, 's', 'ready', 'u', v[3])
        local add = by_topic[v[2]]
        if not add then
          add = {}
          by_topic[v[2]] = add
          topics[#topics + 1] = v[2]
        end
        add[#add + 1] = v[3]
        add[#add + 1] = id
      end
    end
    redis.call('ZREM', K_SCHED, unpack(due))
    for _, t in ipairs(topics) do
      local add = by_topic[t]
      add_count('s:' .. t, int(-#add / 2))
      local kr = key_ready(t)
      if redis.call('ZCARD', kr) == 0 then
        redis.call('PUBLISH', chan, 'r ' .. shard .. ' ' .. t)
      end
      redis.call('ZADD', kr, unpack(add))
      if not woke_set[t] then
        woke_set[t] = true
        woke[#woke + 1] = t
      end
    end
  end
  local expired = redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', now_s, 'LIMIT', 0, limit)
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
end

local results = {}
for i = 8, #ARGV, 2 do
  use_shard(ARGV[i], ARGV[i + 1])
  results[#results + 1] = promote_shard()
end
return results
