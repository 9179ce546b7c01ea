-- put.lua: store a batch of jobs of one shard, in order.
--
-- ARGV[6] "1" to replace, "2" to create only ids the store keeps in no
-- state (PutJobsParams.IfAbsent), else "0"; [7] the longest body kept in the job (a
-- longer one gets a key of its own: see Store.inlineBody); [8] a count m,
-- then m topics that are fair (core.PutJobsParams.Fair): their jobs are
-- parked by key (park_new), and on one server ks:<t>'s f set (Key limits
-- in lib.lua); then 8 per job: id, topic, key, the body when it gets a key
-- of its own (longer than ARGV[7]) else empty, run_at (ms), priority
-- (empty for 0), how the put came as the new job's change log starts
-- ("c,<via>,<token>": Changes in lib.lua), packed, and the part the caller
-- packed of the job (Packed puts in lib.lua), the body in it when the job
-- keeps it, its header counting the fields the script appends (PUT_ADDED).
--
-- New jobs take the form JOB_FORM names (lib.lua): a hash gets the part's
-- fields, unpacked. Eight arguments a job rather than one for each field:
-- the server parses each argument of a call and makes it a Lua string.
--
-- Returns {results, queued, released}: one result per job, 0 created, 1
-- replaced, or the existing job (job_all) on a conflict; the queue heads
-- the call made earlier (announced); the key slots of a Cluster that the
-- leases it ended gave back (a job whose lease had expired, settled:
-- lib.lua's released), for the caller to free.
--
-- A new id costs a share of one EXISTS, one MSET and one ZADD per queue
-- (packed; a hash costs an HSET and a ZADD), a SET for a long body, and with a key three more (index_key): every
-- write a script makes is also written to the AOF, which costs the server more than most commands themselves.
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
-- One EXISTS of every key the call's jobs may have: when none exists (new
-- ids, the usual put), no job needs one of its own.
local keys = {}
for i = 9 + m, #ARGV, 8 do
  keys[#keys + 1] = key_job(ARGV[i])
  keys[#keys + 1] = key_body(ARGV[i])
end
local fresh = true
for i = 1, #keys, 2000 do
  if redis.call('EXISTS', unpack(keys, i, math.min(i + 1999, #keys))) > 0 then
    fresh = false
    break
  end
end
local out = {}
for i = 9 + m, #ARGV, 8 do
  out[#out + 1] = put_job(replace, inline_body, i, absent, fair, fresh)
end
flush_puts()
return {out, announced(), released}
