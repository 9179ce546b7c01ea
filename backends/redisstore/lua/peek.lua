-- peek.lua: the due jobs a claim on a Cluster may take from one shard.
--
-- ARGV[6] topic; [7] limit; [8] "1" for each job's key and ttr too (a
-- claim with a key_concurrency, which asks for their slots first), "2"
-- for those of a fair claim, which also reads the shard's new jobs of
-- the topic by key (park_new in lib.lua): up to [9] due ones of each key,
-- keys by their earliest, limit in all, so that a key's backlog does not
-- hold up another key's entry into the ring.
--
-- Returns {now, head, candidates}: the server's now; the run_at of the
-- topic's first queued (or, fair, new) job in the shard, or -1 when none
-- is; up to limit due jobs of the queues, flat as id, run_at, priority
-- (and key, ttr in ms), most urgent first and by run_at then id within a
-- priority (due_candidates), then, fair, the new ones by key. The caller
-- merges the shards' candidates and reserves its picks with claim.lua's
-- "ids" mode.
local t, limit, keyed, fair = ARGV[6], tonumber(ARGV[7]), ARGV[8] ~= '0', ARGV[8] == '2'
local flat = {}
local function add(id, r, y, j)
  flat[#flat + 1] = id
  flat[#flat + 1] = int(r)
  flat[#flat + 1] = int(y)
  if keyed then
    j = j or load(id) or {}
    flat[#flat + 1] = j.k or ''
    flat[#flat + 1] = int(j.d or 0)
  end
end
for _, c in ipairs(due_candidates(t, limit)) do add(c[1], c[2], c[3]) end
local head = queue_head(t) or -1
if fair then
  local kn, per_key, n = key_snew_keys(t), tonumber(ARGV[9]), 0
  for _, k in ipairs(redis.call('ZRANGE', kn, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, limit)) do
    if n >= limit then break end
    local kp = key_snew(t, k)
    local due = redis.call('ZRANGE', kp, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, math.min(per_key, limit - n), 'WITHSCORES')
    for i = 1, #due, 2 do
      local j = load(due[i])
      if j and (j.s == 'scheduled' or j.s == 'ready') then
        add(due[i], due[i + 1], j.y or 0, j)
        n = n + 1
      else
        unnew(due[i], t, k) -- taken or gone meanwhile
      end
    end
    if #due == 0 then
      -- kn's score was early (a job cancelled): its first job's now.
      local first = redis.call('ZRANGE', kp, 0, 0, 'WITHSCORES')[2]
      if first then redis.call('ZADD', kn, first, k) else redis.call('ZREM', kn, k) end
    end
  end
  local first = tonumber(redis.call('ZRANGE', kn, 0, 0, 'WITHSCORES')[2])
  if first and (head == -1 or first < head) then head = first end
end
return {now_s, head, flat}
