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
if j.s ~= 'dead' then return {2, job_all(id), announced()} end
unlink(id, j)
j.s, j.a, j.r, j.u = 'ready', 0, now, now
save(id, j, 's', 'a', 'r', 'u')
link_queue(id, j.t, now, j.y)
return {0, false, announced()}
