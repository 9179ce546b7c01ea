-- stats.lua: one shard's counts of the topics named in ARGV[6...].
--
-- It first drops the finished-count buckets past the retention (see
-- fin_expire), all of them, so that the totals it reads count only jobs
-- within it. A queued or parked job (Key limits in lib.lua) counts as
-- scheduled until its run_at, ready from then on.
--
-- Returns, per topic, {scheduled, ready, reserved, dead, done, cancelled}.
while fin_expire(1000) == 1000 do end
local out = {}
for i = 6, #ARGV do
  local t = ARGV[i]
  local fin = redis.call('HMGET', K_FIN, 'd:' .. t, 'c:' .. t)
  local scheduled, ready = 0, 0
  for _, y in ipairs(levels(t)) do
    scheduled = scheduled + redis.call('ZCOUNT', key_queue(t, y), '(' .. now_s, '+inf')
    ready = ready + redis.call('ZCOUNT', key_queue(t, y), '-inf', now_s)
  end
  local parked = redis.call('ZCARD', key_parked(t))
  if parked > 0 then
    local due = redis.call('ZCOUNT', key_parked(t), '-inf', now_s)
    scheduled, ready = scheduled + parked - due, ready + due
  end
  out[#out + 1] = {
    scheduled,
    ready,
    tonumber(redis.call('HGET', K_COUNT, 'x:' .. t) or 0),
    redis.call('ZCARD', key_dead(t)),
    tonumber(fin[1] or 0),
    tonumber(fin[2] or 0),
  }
end
return out
