-- requeue.lua: make a dead job ready now with a fresh attempt count, its
-- changes gaining requeued.
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
local before = j.C
if not packed_ids[id] then before = redis.call('HGET', key_job(id), 'C') end
j.s, j.a, j.r, j.u, j.C = 'ready', 0, now, now, appended_change(before, 'q', ',')
save(id, j, 's', 'a', 'r', 'u', 'C')
link_queue(id, j.t, now, j.y)
return {0, false, announced()}
