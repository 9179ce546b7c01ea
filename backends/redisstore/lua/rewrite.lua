-- rewrite.lua: change the body of a job, and nothing else
-- (core.BodyRewriter): not its state, times, history, lease or expiry.
--
-- ARGV[6] id, [7] the body it must have, [8] the new body, [9] the
-- longest body kept in the job (as put.lua).
--
-- Returns {code, false, queued}: 0 rewritten, 1 not found, 3 conflict (the
-- body is not [7]); queued is always empty (byID's form).
local id, old, new, inline_body = ARGV[6], ARGV[7], ARGV[8], tonumber(ARGV[9])
local j = load(id)
if not j then return {1, false, {}} end
local kj, kb = key_job(id), key_body(id)
local body = j.b
if not body then body = redis.call('GET', kb) or '' end
if body ~= old then return {3, false, {}} end
-- keep writes the job back with its expiry, if it has one (finished).
local function keep()
  if packed_ids[id] then
    redis.call('SET', kj, cmsgpack.pack(j), 'KEEPTTL')
  elseif j.b then
    redis.call('HSET', kj, 'b', j.b)
  else
    redis.call('HDEL', kj, 'b')
  end
end
if not j.b and body ~= '' then
  -- In a key of its own, which keeps its expiry.
  redis.call('SET', kb, new, 'KEEPTTL')
elseif #new <= inline_body then
  j.b = new
  keep()
else
  -- Too long for the job now: moved to a key of its own, expiring with it.
  redis.call('SET', kb, new)
  local ttl = redis.call('PTTL', kj)
  if ttl > 0 then redis.call('PEXPIRE', kb, ttl) end
  j.b = nil
  keep()
end
return {0, false, {}}
