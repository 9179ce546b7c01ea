-- cancel.lua: cancel a scheduled, ready or dead job, or with ARGV[7] "1"
-- a reserved one (core.CancelJobParams.Running), whose attempt in progress
-- ends cancelled.
--
-- ARGV[6] id, [7] "1" to cancel a reserved job too, else "0".
--
-- Returns by_id's {code, job, queued, released}: 0 cancelled, 1 not found (unknown or already
-- finished), 2 conflict (reserved, without [7]) with the job (job_all); the
-- queue heads the call made earlier (an expired lease settled here).
local id, running = ARGV[6], ARGV[7] == '1'
local j = load(id)
if not j then return by_id(1, false) end
settle(id, j)
if j.s == 'done' or j.s == 'cancelled' then return by_id(1, false) end
if j.s == 'reserved' and not running then return by_id(2, job_all(id)) end
unlink(id, j)
if j.s == 'reserved' then
  j.H = ended_attempt(j, 'c', now, '')
  finish(id, j, 'cancelled', 'H')
else
  finish(id, j, 'cancelled')
end
return by_id(0, false)
