-- migrate.lua: move one shard's waiting jobs from the layout of earlier
-- versions (one schedule of every topic, "sched", and a ready set per
-- topic, "ready:<topic>") into the topics' queues, a page at a time.
--
-- ARGV[6] the page size; ARGV[7...] the topics whose ready sets to fold
-- in (every configured or registered topic: a topic with ready jobs is
-- registered).
--
-- Returns how many jobs it moved; 0 once nothing is left, when it also
-- drops the scheduled counts ("s:<topic>" of the counts hash), which the
-- queues replace.
local page = tonumber(ARGV[6])
local ks = base .. ':sched'
local rows = redis.call('ZRANGE', ks, 0, page - 1, 'WITHSCORES')
if #rows > 0 then
  local ids = {}
  for i = 1, #rows, 2 do
    local id, r = rows[i], rows[i + 1]
    local j = load(id)
    if j then redis.call('ZADD', key_queue(j.t), r, id) end
    ids[#ids + 1] = id
  end
  redis.call('ZREM', ks, unpack(ids))
  return #ids
end
local moved = 0
for i = 7, #ARGV do
  local kr = base .. ':ready:' .. ARGV[i]
  local n = redis.call('ZCARD', kr)
  if n > 0 then
    redis.call('ZUNIONSTORE', key_queue(ARGV[i]), 2, key_queue(ARGV[i]), kr, 'AGGREGATE', 'MIN')
    redis.call('DEL', kr)
    moved = moved + n
  end
end
if moved > 0 then return moved end
local fields = redis.call('HKEYS', K_COUNT)
for _, f in ipairs(fields) do
  if string.sub(f, 1, 2) == 's:' then redis.call('HDEL', K_COUNT, f) end
end
return 0
