-- put.lua: store a batch of jobs of one shard, in order.
--
-- ARGV[6] "1" to replace; [7] the longest body kept in the job hash (a
-- longer one gets a key of its own: see Store.inlineBody); then 11 per
-- job: id, topic, key, body, run_at (ms), ttr (ms), max_attempts,
-- traceparent, retry delays, priority, url (empty strings for none).
--
-- Returns {results, queued}: one result per job, 0 created, 1 replaced, or
-- the existing job (job_all) on a conflict; the queue heads the call made
-- earlier (announced).
--
-- A new id costs one EXISTS (of the job and its body key), one HSET (and a SET for a long body) and one
-- ZADD, and with a key three more (index_key): every write a script makes is also written to the AOF, which costs
-- the server more than most commands themselves.
local replace = ARGV[6] == '1'
local inline_body = tonumber(ARGV[7])
local out = {}
for i = 8, #ARGV, 11 do
  local id, t, k, b = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local r, d, m, p = tonumber(ARGV[i + 4]), ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
  local w, y, h = ARGV[i + 8], tonumber(ARGV[i + 9]), ARGV[i + 10]
  local kj = key_job(id)
  local created = now
  local res = 0
  -- The body key too: a finished job's two keys expire apart, and a stale
  -- body must not outlive it into a new job of the same id.
  if redis.call('EXISTS', kj, key_body(id)) > 0 then
    local j = load(id)
    if j then settle(id, j) end
    if not j then
      -- only a stale body key
    elseif j.s == 'done' or j.s == 'cancelled' then
      -- finished: overwritten by a fresh job, and no longer counted
      fin_forget(id, j)
    elseif not replace or j.s == 'reserved' then
      res = job_all(id)
    else
      res = 1
      created = tonumber(redis.call('HGET', kj, 'c'))
      unlink(id, j)
    end
    if type(res) ~= 'table' then
      redis.call('DEL', kj, key_body(id)) -- also drops a finished job's expiry
      if j and j.k and (j.k ~= k or j.t ~= t) then unindex_key(id, j.t, j.k) end
    end
  end
  if type(res) ~= 'table' then
    local state = 'scheduled'
    if r <= now then state = 'ready' end
    local f = {'s', state, 't', t, 'r', int(r), 'd', d, 'm', m, 'a', '0', 'c', int(created), 'u', now_s}
    if k ~= '' then f[#f + 1] = 'k'; f[#f + 1] = k end
    if #b > inline_body then
      redis.call('SET', key_body(id), b)
    elseif b ~= '' then
      f[#f + 1] = 'b'; f[#f + 1] = b
    end
    if p ~= '' then f[#f + 1] = 'p'; f[#f + 1] = p end
    if w ~= '' then f[#f + 1] = 'w'; f[#f + 1] = w end
    if y then f[#f + 1] = 'y'; f[#f + 1] = int(y) end
    if h ~= '' then f[#f + 1] = 'h'; f[#f + 1] = h end
    redis.call('HSET', kj, unpack(f))
    link_queue(id, t, r, y)
    if k ~= '' then index_key(id, t, k, false) end
  end
  out[#out + 1] = res
end
return {out, announced()}
