-- prune.lua: forget topics of the registry that were last seen before a
-- cutoff. It runs on the registry's own slot, without lib.lua.
--
-- KEYS[1] the registry (zset: topic -> last put, ms); ARGV[1] the cutoff
-- (ms); ARGV[2...] the topics that looked empty and unconfigured. A topic
-- seen again since the caller looked (score at or after the cutoff) stays.
local n = 0
for i = 2, #ARGV do
  local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]))
  if score and score < tonumber(ARGV[1]) then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n
