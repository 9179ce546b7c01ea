-- requeue.lua: make a dead job ready now with a fresh attempt count.
--
-- ARGV[6] id.
--
-- Returns {code, job, queued}: 0 requeued, 1 not found, 2 conflict (not
-- dead) with the job (job_all); the queue heads the call made earlier.
local id = ARGV[6]
local j = load(id)
if not j then return {1, false, announced()} end
settle(id, j)
local kj = key_job(id)
if j.s ~= 'dead' then return {2, job_all(id), announced()} end
unlink(id, j)
redis.call('HSET', kj, 's', 'ready', 'a', '0', 'r', now_s, 'u', now_s)
link_queue(id, j.t, now, j.y)
return {0, false, announced()}
