-- put.lua: store a batch of jobs of one shard, in order.
--
-- ARGV[7] "1" to replace; then 8 per job: id, topic, key, body, run_at (ms),
-- ttr (ms), max_attempts, traceparent (empty strings for none).
--
-- Returns {results, head, woke}: one result per job, 0 created, 1 replaced,
-- or the existing job (job_all) on a conflict; the shard's new next due time
-- or -1 when it did not get earlier; the topics that got ready jobs.
local replace = ARGV[7] == '1'
head0 = head()
local out = {}
for i = 8, #ARGV, 8 do
  local id, t, k, b = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local r, d, m, p = tonumber(ARGV[i + 4]), ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
  local kj = key_job(id)
  local created = now
  local res = 0
  local j = load(id)
  if j then
    settle(id, j)
    if j.s == 'done' or j.s == 'cancelled' then
      -- finished: overwritten by a fresh job, and no longer counted
      fin_forget(id, j)
    elseif not replace or j.s == 'reserved' then
      res = job_all(id)
    else
      res = 1
      created = tonumber(redis.call('HGET', kj, 'c'))
      unlink(id, j)
    end
  end
  if type(res) ~= 'table' then
    redis.call('DEL', kj, key_body(id)) -- also drops a finished job's expiry
    local state = 'scheduled'
    if r <= now then state = 'ready' end
    local f = {'s', state, 't', t, 'r', int(r), 'd', d, 'm', m, 'a', '0', 'c', int(created), 'u', now_s}
    if k ~= '' then f[#f + 1] = 'k'; f[#f + 1] = k end
    if #b > INLINE_BODY then
      redis.call('SET', key_body(id), b)
    elseif b ~= '' then
      f[#f + 1] = 'b'; f[#f + 1] = b
    end
    if p ~= '' then f[#f + 1] = 'p'; f[#f + 1] = p end
    redis.call('HSET', kj, unpack(f))
    if state == 'ready' then link_ready(id, t, r) else link_sched(id, t, r) end
  end
  out[#out + 1] = res
end
return {out, publish_head(), woke}
