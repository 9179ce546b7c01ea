-- claim.lua: reserve ready jobs of one topic.
--
-- ARGV[7] topic; then groups of one shard each (one on a Cluster; several
-- on a standalone server, see use_shard): the shard's base and number, the
-- count of jobs, then per job its id and the lease token to give it. An id
-- no longer ready (another claim took it, or it was cancelled) is skipped.
--
-- Returns per group {jobs, head, left}: for each job reserved, its id
-- followed by its fields (as job_all) as they were before the claim; the
-- shard's new next due time or -1;
-- how many ready jobs of the topic the shard still holds.
--
-- Few commands per job, since a burst claims every job once: one ZMSCORE
-- and one ZREM per shard, then per job one HGETALL (which also gives the
-- fields returned) and one HSET; a GET only for a body that is not in the
-- hash.
local t = ARGV[7]

-- claim_head0 sets head0 (the shard's due time before the call) as far as
-- publish_head needs it, before the new leases are added: a claim changes
-- only the lease set, so an earlier lease expiry already known settles it
-- with one command instead of head()'s two.
local function claim_head0()
  local b = redis.call('ZRANGE', K_LEASE, 0, 0, 'WITHSCORES')
  if b[2] and lowest and tonumber(b[2]) <= lowest then
    head0 = tonumber(b[2])
  else
    head0 = head()
  end
end

local function claim_shard(ids, tokens)
  local kr = key_ready(t)
  local out, leases = {}, {}
  if #ids > 0 then
    -- Taken here only if still in the ready set: the script is atomic, so
    -- this is the ZREM-returned-1 rule for every id at once.
    local scores = redis.call('ZMSCORE', kr, unpack(ids))
    local take, lease_of = {}, {}
    for k, id in ipairs(ids) do
      if scores[k] and not lease_of[id] then
        take[#take + 1] = id
        lease_of[id] = tokens[k]
      end
    end
    if #take > 0 then redis.call('ZREM', kr, unpack(take)) end
    for _, id in ipairs(take) do
      local kj = key_job(id)
      local h = redis.call('HGETALL', kj)
      if #h > 0 then
        -- The fields are returned as read: the caller applies the claim's
        -- changes (state, attempt, lease, expiry, updated) itself, which
        -- spares Redis, the bottleneck of a burst, patching them here.
        local d, a, inline
        for f = 1, #h, 2 do
          local name = h[f]
          if name == 'd' then d = h[f + 1] elseif name == 'a' then a = h[f + 1] elseif name == 'b' then inline = true end
        end
        local x = now + tonumber(d)
        redis.call('HSET', kj, 's', 'reserved', 'a', int(tonumber(a) + 1), 'l', lease_of[id], 'x', int(x), 'u', now_s)
        if not inline then
          local body = redis.call('GET', key_body(id))
          if body then
            h[#h + 1] = 'b'
            h[#h + 1] = body
          end
        end
        leases[#leases + 1] = int(x)
        leases[#leases + 1] = id
        note_time(x)
        out[#out + 1] = {id, h}
      end
    end
  end
  if #leases > 0 then
    claim_head0()
    -- In bulk: link_lease for every job reserved.
    redis.call('ZADD', K_LEASE, unpack(leases))
    add_count('x:' .. t, #out)
  end
  return {out, publish_head(), redis.call('ZCARD', kr)}
end

local results = {}
local i = 8
while i <= #ARGV do
  use_shard(ARGV[i], ARGV[i + 1])
  local count = tonumber(ARGV[i + 2])
  i = i + 3
  local ids, tokens = {}, {}
  for _ = 1, count do
    ids[#ids + 1] = ARGV[i]
    tokens[#tokens + 1] = ARGV[i + 1]
    i = i + 2
  end
  results[#results + 1] = claim_shard(ids, tokens)
end
return results
