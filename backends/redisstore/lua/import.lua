-- import.lua: store exported jobs of one shard, in order, each only if its
-- id is not in use.
--
-- ARGV[6] the longest body kept in the job (as put.lua); [7...] 20 per
-- job, stored in the form JOB_FORM names (lib.lua): id, topic, key, body, run_at (ms), ttr (ms),
-- max_attempts, traceparent, state, attempt, last_error, created_at (ms),
-- updated_at (ms, 0 for none), retry delays, priority, url, history (the
-- H field, every attempt ended), expires_at (ms), retention (ms), changes
-- (the C field); empty strings for none.
--
-- A job whose key exists, in any state (finished ones within retention
-- included), is skipped. Otherwise it is placed as put.lua places a new
-- job, keeping its attempt, last error and creation time: scheduled or
-- ready by its run_at, dead in its topic's dead set (its updated_at,
-- or now, as its time of death), reserved ready at once with no lease (its lease went with the
-- old store; its run_at is kept, and a later one does not delay it).
--
-- Returns {results, queued}: one result per job, 1 imported, 0 skipped;
-- the queue heads the call made earlier (announced).
local inline_body = tonumber(ARGV[6])
local out = {}
for i = 7, #ARGV, 20 do
  local id, t, k, b = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local r, d, m, p = tonumber(ARGV[i + 4]), ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
  local st, a, e, c = ARGV[i + 8], ARGV[i + 9], ARGV[i + 10], tonumber(ARGV[i + 11])
  local u, w, y = tonumber(ARGV[i + 12]), ARGV[i + 13], tonumber(ARGV[i + 14])
  local h, hist, z, kept = ARGV[i + 15], ARGV[i + 16], ARGV[i + 17], tonumber(ARGV[i + 18])
  local changes = ARGV[i + 19]
  local kj = key_job(id)
  if redis.call('EXISTS', kj) == 1 then
    out[#out + 1] = 0
  else
    local state = 'dead'
    if st ~= 'dead' or u <= 0 then u = now end
    local score = r
    if st == 'reserved' then
      state = 'ready'
      if r > now then score = now end
    elseif st ~= 'dead' then
      state = 'scheduled'
      if r <= now then state = 'ready' end
    end
    redis.call('DEL', key_body(id))
    local j = {s = state, t = t, r = r, d = tonumber(d), m = tonumber(m), a = tonumber(a), c = c, u = u, y = y}
    if k ~= '' then j.k = k end
    if #b > inline_body then
      redis.call('SET', key_body(id), b)
    elseif b ~= '' then
      j.b = b
    end
    if p ~= '' then j.p = p end
    if e ~= '' then j.e = e end
    if w ~= '' then j.w = w end
    if h ~= '' then j.h = h end
    if hist ~= '' then j.H = hist end
    if changes ~= '' then j.C = changes end
    if z ~= '' then j.z = tonumber(z) end
    if kept then j.R = kept end
    packed_ids[id] = JOB_FORM == 'packed' or nil
    save(id, j)
    if k ~= '' then index_key(id, t, k, false) end
    if state ~= 'dead' then
      link_queue(id, t, score, y)
    else
      local us = now_us
      if u ~= now then us = u * 1000 end
      link_dead(id, t, us)
    end
    out[#out + 1] = 1
  end
end
return {out, announced()}
