-- get.lua: read jobs of one shard as they are stored.
--
-- ARGV[6...] ids.
--
-- Returns, per id, the job's fields (job_all), or an empty list when there
-- is no such job, then the server's time (Unix ms), as of which callers
-- show the jobs: an instance whose clock moved since its last script reads
-- leases by the server's clock, not its own. It changes nothing: callers
-- report settled states themselves.
local out = {}
for i = 6, #ARGV do
  out[#out + 1] = job_all(ARGV[i])
end
out[#out + 1] = now_s
return out
