-- rate.lua: take tokens from a topic's rate limit, a token bucket shared by
-- every instance (core.Bucket's arithmetic, in Redis). It runs on the
-- bucket's own key, without lib.lua.
--
-- KEYS[1] the bucket (hash: n tokens, t when, ms); ARGV[1] now (Unix ms),
-- or empty for the server's clock; [2] limit, [3] period (ms), [4] burst,
-- [5] want (negative: give back).
--
-- Returns {granted, next}: the tokens taken, and the ms until the bucket
-- holds a token again when it is empty (else 0). A missing bucket is full;
-- one expires once it would be full again, so idle limits cost nothing.
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
local limit, period, burst, want = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local per = period / limit
local v = redis.call('HMGET', KEYS[1], 'n', 't')
local tokens, at = tonumber(v[1]), tonumber(v[2])
if not tokens or not at then
  tokens, at = burst, now
elseif now > at then
  tokens = math.min(burst, tokens + (now - at) / per)
  at = now
end
local granted = 0
if want < 0 then
  tokens = math.min(burst, tokens - want)
else
  granted = math.min(want, math.floor(tokens))
  tokens = tokens - granted
end
redis.call('HSET', KEYS[1], 'n', string.format('%.17g', tokens), 't', string.format('%d', at))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * per) + 1000)
local next = 0
if tokens < 1 then next = math.ceil((1 - tokens) * per) end
return {granted, next}
