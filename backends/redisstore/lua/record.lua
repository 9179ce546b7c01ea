-- record.lua: put or delete a metadata record (Store.PutRecord,
-- DeleteRecord) in KEYS[1], the hash of its kind (name -> "<revision>:<value>"),
-- if it has the revision ARGV[3] (0: if there is none). The field '' counts
-- the kind's revisions, so that a record made again never gets a revision it
-- had, in the same key: a Cluster needs no other slot.
--
-- ARGV[1] 'put' or 'del'; [2] the name; [3] the revision; [4] put's value.
-- Returns the new revision (put), 0 (delete), -1 when the record has another
-- revision, -2 when a delete finds none.
local f = redis.call('HGET', KEYS[1], ARGV[2])
local rev = 0
if f then rev = tonumber(string.match(f, '^(%d+):')) end
if not f and ARGV[1] == 'del' then return -2 end
if rev ~= tonumber(ARGV[3]) then return -1 end
if ARGV[1] == 'del' then
  redis.call('HDEL', KEYS[1], ARGV[2])
  return 0
end
local new = redis.call('HINCRBY', KEYS[1], '', 1)
redis.call('HSET', KEYS[1], ARGV[2], new .. ':' .. ARGV[4])
return new
