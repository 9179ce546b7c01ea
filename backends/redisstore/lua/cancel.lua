-- cancel.lua: cancel a scheduled, ready or dead job.
--
-- ARGV[6] id.
--
-- Returns {code, job, queued}: 0 cancelled, 1 not found (unknown or already
-- finished), 2 conflict (reserved) with the job (job_all); the queue heads
-- the call made earlier (an expired lease settled here).
local id = ARGV[6]
local j = load(id)
if not j then return {1, false, announced()} end
settle(id, j)
if j.s == 'done' or j.s == 'cancelled' then return {1, false, announced()} end
if j.s == 'reserved' then return {2, job_all(id), announced()} end
unlink(id, j)
finish(id, j, 'cancelled')
return {0, false, announced()}
