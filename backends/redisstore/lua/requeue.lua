-- requeue.lua: make a dead job ready now with a fresh attempt count.
--
-- ARGV[7] id.
--
-- Returns {code, job, woke}: 0 requeued, 1 not found, 2 conflict (not dead)
-- with the job (job_all).
local id = ARGV[7]
local j = load(id)
if not j then return {1, false, woke} end
settle(id, j)
local kj = key_job(id)
if j.s ~= 'dead' then return {2, job_all(id), woke} end
unlink(id, j)
redis.call('HSET', kj, 's', 'ready', 'a', '0', 'r', now_s, 'u', now_s)
link_ready(id, j.t, now)
return {0, false, woke}
