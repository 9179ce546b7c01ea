-- export.lua: read one page of a structure of one shard, for ExportJobs.
--
-- ARGV[6] the structure: queue, lease, dead, parked (Key limits in
-- lib.lua) or levels; [7] the topic (queue, dead, parked and levels); [8] and [9] the cursor, the score and id of
-- the last member of the previous page (empty for the first page); [10]
-- the page size; [11] the priority of the queue (empty for 0). "levels"
-- answers the priorities whose queues may hold the topic's jobs.
--
-- Members come in the set's order (score, then id); a page starts after the
-- cursor even when the cursor's member left the set meanwhile, so a job that
-- stays put is read once however the set changes around it.
--
-- Returns, per member, its id, its score and the job's fields (job_all;
-- empty when the hash is gone).
local which, t, cs, cm, count = ARGV[6], ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10])
if which == 'levels' then
  local out = {}
  for i, y in ipairs(levels(t)) do out[i] = int(y) end
  return out
end
local key
if which == 'queue' then key = key_queue(t, tonumber(ARGV[11]))
elseif which == 'lease' then key = K_LEASE
elseif which == 'dead' then key = key_dead(t)
elseif which == 'parked' then key = key_parked(t)
else return redis.error_reply('redisstore: unknown structure ' .. which) end
local rows
if cm == '' then
  rows = redis.call('ZRANGE', key, 0, count - 1, 'WITHSCORES')
else
  local score = tonumber(cs)
  local now_score = redis.call('ZSCORE', key, cm)
  if now_score and tonumber(now_score) == score then
    local rank = redis.call('ZRANK', key, cm)
    rows = redis.call('ZRANGE', key, rank + 1, rank + count, 'WITHSCORES')
  else
    -- The cursor's member moved: skip the members tied with its old score
    -- that sort before it, a page at a time.
    rows = {}
    local offset = 0
    while true do
      local got = redis.call('ZRANGE', key, cs, '+inf', 'BYSCORE', 'LIMIT', offset, count, 'WITHSCORES')
      for i = 1, #got, 2 do
        if #rows < 2 * count and (tonumber(got[i + 1]) > score or got[i] > cm) then
          rows[#rows + 1] = got[i]
          rows[#rows + 1] = got[i + 1]
        end
      end
      if #rows > 0 or #got < 2 * count then break end
      offset = offset + count
    end
  end
end
local out = {}
for i = 1, #rows, 2 do
  out[#out + 1] = {rows[i], rows[i + 1], job_all(rows[i])}
end
return out
