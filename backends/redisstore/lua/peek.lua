-- peek.lua: the due jobs a claim on a Cluster may take from one shard.
--
-- ARGV[6] topic; [7] limit; [8] "1" for each job's key and ttr too (a
-- claim with a key_concurrency, which asks for their slots first).
--
-- Returns {now, head, candidates}: the server's now; the run_at of the
-- topic's first queued job in the shard, or -1 when none is; up to limit
-- due jobs, flat as id, run_at, priority (and key, ttr in ms), most urgent
-- first and by run_at then id within a priority (due_candidates). The
-- caller merges the shards' candidates and reserves its picks with
-- claim.lua's "ids" mode.
local t, limit, keyed = ARGV[6], tonumber(ARGV[7]), ARGV[8] == '1'
local flat = {}
for _, c in ipairs(due_candidates(t, limit)) do
  flat[#flat + 1] = c[1]
  flat[#flat + 1] = int(c[2])
  flat[#flat + 1] = int(c[3])
  if keyed then
    local j = load(c[1]) or {}
    flat[#flat + 1] = j.k or ''
    flat[#flat + 1] = int(j.d or 0)
  end
end
return {now_s, queue_head(t) or -1, flat}
