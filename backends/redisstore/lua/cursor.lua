-- cursor.lua: move a schedule's cursor in KEYS[1] (name -> ms) to ARGV[2]
-- unless it is already there or past it: on a Cluster, after fire.lua
-- moved the cursor of the job's shard.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and tonumber(cur) >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
