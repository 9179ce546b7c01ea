-- get.lua: read jobs of one shard as they are stored.
--
-- ARGV[6...] ids.
--
-- Returns, per id, the job's fields (job_all), or an empty list when there
-- is no such job. It changes nothing: callers report settled states
-- themselves.
local out = {}
for i = 6, #ARGV do
  out[#out + 1] = job_all(ARGV[i])
end
return out
