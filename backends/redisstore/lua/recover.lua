-- recover.lua: the jobs a claim reserved whose answer was lost.
--
-- ARGV[6] the claim's token; [7] "1" on a standalone server, whose
-- claim may reserve jobs of several shards, else "" (a Cluster: the
-- call's shard only). claim.lua keeps the ids it reserved under the
-- token, in the shard of its call, for a minute; this reads and drops
-- them.
--
-- Returns {now, jobs}: for each job still reserved under a lease of the
-- claim (its lease token starts with the claim's) whose lease holds, {id,
-- the job as job_all returns it}.
local token = ARGV[6]
local ck = base .. ':ct:' .. token
local v = redis.call('GET', ck)
local out = {}
if v then
  redis.call('DEL', ck)
  local function found(id)
    local j = load(id)
    if j and j.s == 'reserved' and j.l and string.sub(j.l, 1, #token) == token and tonumber(j.x) > now then
      out[#out + 1] = {id, job_all(id)}
    end
  end
  for id in string.gmatch(v, '%S+') do
    if ARGV[7] == '1' then
      in_shard(shard_of(id), function() found(id) end)
    else
      found(id)
    end
  end
end
return {now_s, out}
