-- cancel.lua: cancel a scheduled, ready or dead job.
--
-- ARGV[7] id.
--
-- Returns {code, job, woke}: 0 cancelled, 1 not found (unknown or already
-- finished), 2 conflict (reserved) with the job (job_all).
local id = ARGV[7]
local j = load(id)
if not j then return {1, false, woke} end
settle(id, j)
if j.s == 'done' or j.s == 'cancelled' then return {1, false, woke} end
if j.s == 'reserved' then return {2, job_all(id), woke} end
unlink(id, j)
finish(id, j, 'cancelled')
return {0, false, woke}
