-- requeue.lua: make a dead job ready now with a fresh attempt count, its
-- changes gaining requeued.
--
-- ARGV[6] id.
--
-- Returns by_id's {code, job, queued, released}: 0 requeued, 1 not found, 2 conflict (not
-- dead) with the job (job_all); the queue heads the call made earlier.
local id = ARGV[6]
local j = load(id)
if not j then return by_id(1, false) end
settle(id, j)
if j.s ~= 'dead' then return by_id(2, job_all(id)) end
unlink(id, j)
local before = j.C
if not packed_ids[id] then before = redis.call('HGET', key_job(id), 'C') end
j.s, j.a, j.r, j.u, j.C = 'ready', 0, now, now, appended_change(before, 'q', ',')
save(id, j, 's', 'a', 'r', 'u', 'C')
link_queue(id, j.t, now, j.y)
return by_id(0, false)
