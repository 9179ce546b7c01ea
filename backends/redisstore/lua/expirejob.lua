-- expirejob.lua: end a scheduled or ready job whose expiry (field z) has
-- come: dead with last error "expired" (core.JobExpired), as a bury
-- without an attempt in progress (core.Store.ExpireJob).
--
-- ARGV[6] id.
--
-- Returns {code, job, queued}: 0 expired, 1 not found (unknown or already
-- finished), 2 conflict (reserved, dead or not expired) with the job
-- (job_all); the queue heads the call made earlier (an expired lease
-- settled here).
local id = ARGV[6]
local j = load(id)
if not j then return {1, false, announced()} end
settle(id, j)
if j.s == 'done' or j.s == 'cancelled' then return {1, false, announced()} end
if (j.s ~= 'scheduled' and j.s ~= 'ready') or not j.z or j.z > now then
  return {2, job_all(id), announced()}
end
unlink(id, j)
j.s, j.e, j.u = 'dead', 'expired', now
save(id, j, 's', 'e', 'u')
link_dead(id, j.t, now_us)
log_finish(id, j, 'x', now_s, 'expired')
return {0, false, announced()}
