-- index.lua: file unfinished jobs of one shard under their business keys,
-- for a prefix that jobs were put in before the index of keys existed
-- (Store.indexKeys).
--
-- ARGV[6...] ids. A job gone, finished or without a key by now is left
-- out. Returns how many it filed.
local n = 0
for i = 6, #ARGV do
  local id = ARGV[i]
  local v = redis.call('HMGET', key_job(id), 's', 't', 'k')
  if v[1] and v[3] and v[1] ~= 'done' and v[1] ~= 'cancelled' then
    index_key(id, v[2], v[3], false)
    n = n + 1
  end
end
return n
