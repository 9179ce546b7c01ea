-- cancel.lua: cancel a scheduled, ready or dead job, or with ARGV[7] "1"
-- a reserved one (core.CancelJobParams.Running), whose attempt in progress
-- ends cancelled.
--
-- ARGV[6] id, [7] "1" to cancel a reserved job too, else "0".
--
-- Returns {code, job, queued}: 0 cancelled, 1 not found (unknown or already
-- finished), 2 conflict (reserved, without [7]) with the job (job_all); the
-- queue heads the call made earlier (an expired lease settled here).
local id, running = ARGV[6], ARGV[7] == '1'
local j = load(id)
if not j then return {1, false, announced()} end
settle(id, j)
if j.s == 'done' or j.s == 'cancelled' then return {1, false, announced()} end
if j.s == 'reserved' and not running then return {2, job_all(id), announced()} end
unlink(id, j)
if j.s == 'reserved' then
  j.H = ended_attempt(j, 'c', now, '')
  finish(id, j, 'cancelled', 'H')
else
  finish(id, j, 'cancelled')
end
return {0, false, announced()}
