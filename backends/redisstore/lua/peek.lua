-- peek.lua: the due jobs a claim on a Cluster may take from one shard.
--
-- ARGV[6] topic; [7] limit.
--
-- Returns {now, head, candidates}: the server's now; the run_at of the
-- topic's first queued job in the shard, or -1 when none is; up to limit
-- due jobs, flat as id, run_at, priority, most urgent first and by run_at
-- then id within a priority (due_candidates). The caller merges the
-- shards' candidates and reserves its picks with claim.lua's "ids" mode.
local t, limit = ARGV[6], tonumber(ARGV[7])
local flat = {}
for _, c in ipairs(due_candidates(t, limit)) do
  flat[#flat + 1] = c[1]
  flat[#flat + 1] = int(c[2])
  flat[#flat + 1] = int(c[3])
end
return {now_s, queue_head(t) or -1, flat}
