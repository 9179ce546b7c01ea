-- fire.lua: fire a slot of a schedule (Store.FireSchedule) in the shard of
-- the slot's job.
--
-- ARGV[6] the cursor hash (name -> last slot fired, ms): the prefix's on
-- a standalone server, the shard's on a Cluster; [7] the schedules hash,
-- checked for the schedule, or '' on a Cluster (another slot); [8] the
-- schedule's name; [9] the slot (ms); [10] the longest inline body; then
-- the job's 11 fields as put.lua takes them, or none.
--
-- Returns {result, queued}: -2 no such schedule, -1 the cursor at or past
-- the slot, 0 no job created (none given, or its id names a job the store
-- keeps, finished ones too), 1 created.
local kc, ks, name, slot = ARGV[6], ARGV[7], ARGV[8], tonumber(ARGV[9])
if ks ~= '' and redis.call('HEXISTS', ks, name) == 0 then return {-2, announced()} end
local cur = redis.call('HGET', kc, name)
if cur and tonumber(cur) >= slot then return {-1, announced()} end
redis.call('HSET', kc, name, int(slot))
if #ARGV < 11 or redis.call('EXISTS', key_job(ARGV[11])) == 1 then return {0, announced()} end
put_job(false, tonumber(ARGV[10]), 11)
return {1, announced()}
