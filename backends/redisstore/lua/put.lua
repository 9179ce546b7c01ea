-- put.lua: store a batch of jobs of one shard, in order.
--
-- ARGV[6] "1" to replace, "2" to create only ids the store keeps in no
-- state (PutJobsParams.IfAbsent), else "0"; [7] the longest body kept in the job (a
-- longer one gets a key of its own: see Store.inlineBody); [8] a count m,
-- then m topics that are fair (core.PutJobsParams.Fair): their jobs are
-- parked by key (park_new), and on one server ks:<t>'s f set (Key limits
-- in lib.lua); then 15 per job: id, topic, key, body, run_at (ms), ttr
-- (ms), max_attempts,
-- traceparent, retry delays, priority, url, expires_at (ms), retention
-- (ms), then (the next step's JSON) (empty strings for none), and how the
-- put came ("<via>,<token>": Changes in lib.lua).
--
-- New jobs take the form JOB_FORM names (lib.lua).
--
-- Returns {results, queued, released}: one result per job, 0 created, 1
-- replaced, or the existing job (job_all) on a conflict; the queue heads
-- the call made earlier (announced); the key slots of a Cluster that the
-- leases it ended gave back (a job whose lease had expired, settled:
-- lib.lua's released), for the caller to free.
--
-- A new id costs one EXISTS (of the job and its body key), one SET or HSET (and a SET for a long body) and one
-- ZADD, and with a key three more (index_key): every write a script makes is also written to the AOF, which costs
-- the server more than most commands themselves.
local replace, absent = ARGV[6] == '1', ARGV[6] == '2'
local inline_body = tonumber(ARGV[7])
local m = tonumber(ARGV[8])
local fair = {}
for i = 9, 8 + m do
  local t = ARGV[i]
  fair[t] = true
  -- On a Cluster ks is in the prefix's slot, which this script cannot
  -- reach: the claims' flag alone says fair there (slots.lua's "fair").
  if not CLUSTER then
    local ks = key_kstate(t)
    if not redis.call('HGET', ks, 'f') then redis.call('HSET', ks, 'f', '1') end
  end
end
local out = {}
for i = 9 + m, #ARGV, 15 do
  out[#out + 1] = put_job(replace, inline_body, i, absent, fair)
end
return {out, announced(), released}
