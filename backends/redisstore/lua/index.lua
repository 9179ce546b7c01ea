-- index.lua: file unfinished jobs of one shard under their business keys,
-- for a prefix that jobs were put in before the index of keys existed
-- (Store.indexKeys).
--
-- ARGV[6...] ids. A job gone, finished or without a key by now is left
-- out. Returns how many it filed.
local n = 0
for i = 6, #ARGV do
  local id = ARGV[i]
  local j = load(id)
  if j and j.k and j.s ~= 'done' and j.s ~= 'cancelled' then
    index_key(id, j.t, j.k, false)
    n = n + 1
  end
end
return n
