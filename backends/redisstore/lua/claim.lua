-- claim.lua: reserve ready jobs of one topic in one shard.
--
-- ARGV[7] topic; then pairs of id and the lease token to give it. An id no
-- longer ready (another claim took it, or it was cancelled) is skipped.
--
-- Returns {jobs, head, left}: for each job reserved, its id followed by its
-- fields (job_all); the shard's new next due time or -1; how many ready jobs of the
-- topic the shard still holds.
local t = ARGV[7]
local kr = key_ready(t)
head0 = head()
local out, leases = {}, {}
for i = 8, #ARGV, 2 do
  local id, lease = ARGV[i], ARGV[i + 1]
  if redis.call('ZREM', kr, id) == 1 then
    local kj = key_job(id)
    local v = redis.call('HMGET', kj, 'd', 'a')
    if v[1] then
      local x = now + tonumber(v[1])
      redis.call('HSET', kj, 's', 'reserved', 'a', int(tonumber(v[2]) + 1), 'l', lease, 'x', int(x), 'u', int(now))
      leases[#leases + 1] = int(x)
      leases[#leases + 1] = id
      note_time(x)
      out[#out + 1] = {id, job_all(id)}
    end
  end
end
if #leases > 0 then
  -- In bulk: link_lease for every job reserved.
  redis.call('ZADD', K_LEASE, unpack(leases))
  add_count('x:' .. t, #out)
end
return {out, publish_head(), redis.call('ZCARD', kr)}
