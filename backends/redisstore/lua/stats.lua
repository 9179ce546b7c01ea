-- stats.lua: one shard's counts of the topics named in ARGV[7...].
--
-- Returns, per topic, {scheduled, ready, reserved, dead, last finish (ms)}.
local out = {}
for i = 7, #ARGV do
  local t = ARGV[i]
  out[#out + 1] = {
    tonumber(redis.call('HGET', K_COUNT, 's:' .. t) or 0),
    redis.call('ZCARD', key_ready(t)),
    tonumber(redis.call('HGET', K_COUNT, 'x:' .. t) or 0),
    redis.call('ZCARD', key_dead(t)),
    tonumber(redis.call('HGET', K_FIN, t) or 0),
  }
end
return out
