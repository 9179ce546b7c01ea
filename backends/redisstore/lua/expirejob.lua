-- expirejob.lua: end a scheduled or ready job whose expiry (field z) has
-- come: dead with last error "expired" (core.JobExpired), as a bury
-- without an attempt in progress (core.Store.ExpireJob).
--
-- ARGV[6] id.
--
-- Returns by_id's {code, job, queued, released}: 0 expired, 1 not found (unknown or already
-- finished), 2 conflict (reserved, dead or not expired) with the job
-- (job_all); the queue heads the call made earlier (an expired lease
-- settled here).
local id = ARGV[6]
local j = load(id)
if not j then return by_id(1, false) end
settle(id, j)
if j.s == 'done' or j.s == 'cancelled' then return by_id(1, false) end
if (j.s ~= 'scheduled' and j.s ~= 'ready') or not j.z or j.z > now then
  return by_id(2, job_all(id))
end
unlink(id, j)
j.s, j.e, j.u = 'dead', 'expired', now
save(id, j, 's', 'e', 'u')
link_dead(id, j.t, now_us)
log_finish(id, j, 'x', now_s, 'expired')
return by_id(0, false)
