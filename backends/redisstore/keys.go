package redisstore

import (
	"hash/crc32"
	"strconv"
)

// keys names the Redis keys of one prefix; doc.go describes the layout.
type keys struct {
	prefix  string
	shards  int
	mask    uint32
	channel string // wake-up channel
	meta    string // hash: shards
	topics  string // hash: topic -> configuration JSON (LegacyTopics)
	seen    string // zset: topic -> when last put (ms), the topic registry
	sched   string // hash: schedule name -> definition JSON (LegacySchedules)
	cursors string // hash: schedule name -> last slot fired, ms (LegacySchedules)
	holders string // zset: the holders of key slots on a Cluster (slots.lua)
	shard   []shardKeys
}

// shardKeys are the fixed keys of one shard, all under its hash tag.
type shardKeys struct {
	base  string   // "{<prefix>:<n>}", the hash tag and head of every key
	fixed []string // KEYS of every shard script: lease, counts, fin, finq
	num   string   // the shard number, as scripts get it
}

func newKeys(prefix string, shards int) keys {
	meta := "{" + prefix + "}"
	k := keys{
		prefix:  prefix,
		shards:  shards,
		mask:    uint32(shards - 1),
		channel: prefix + ":wake",
		meta:    meta + ":meta",
		topics:  meta + ":topics",
		seen:    meta + ":seen",
		sched:   meta + ":sched",
		cursors: meta + ":scur",
		holders: meta + ":kx",
		shard:   make([]shardKeys, shards),
	}
	for i := range shards {
		base := "{" + prefix + ":" + strconv.Itoa(i) + "}"
		k.shard[i] = shardKeys{
			base:  base,
			fixed: []string{base + ":lease", base + ":n", base + ":fin", base + ":finq"},
			num:   strconv.Itoa(i),
		}
	}
	return k
}

// shardOf returns the shard of a job id: crc32 (IEEE) of the id, masked to
// the shard count. Every operation after a put knows only the id, so the id
// alone decides.
func (k *keys) shardOf(id string) int {
	return int(crc32.ChecksumIEEE([]byte(id)) & k.mask)
}

// job returns the key of job id's hash.
func (k *keys) job(id string) string { return k.shard[k.shardOf(id)].base + ":j:" + id }

// queue returns the key of topic's queue in shard n.
func (k *keys) queue(n int, topic string) string { return k.shard[n].base + ":q:" + topic }

// levels returns the key of topic's priorities other than 0 whose queues
// in shard n may hold jobs (lib.lua's key_levels).
func (k *keys) levels(n int, topic string) string { return k.shard[n].base + ":lv:" + topic }

// paused returns the key of shard n's set of paused topics.
func (k *keys) paused(n int) string { return k.shard[n].base + ":paused" }

// finishLog is shard n's record of finished jobs (a stream).
func (k *keys) finishLog(n int) string { return k.shard[n].base + ":finlog" }

// byKey returns the key of the zset of topic's jobs with business key key
// in shard n (lib.lua, index_key).
func (k *keys) byKey(n int, topic, key string) string {
	return k.shard[n].base + ":k:" + topic + ":" + key
}

// rate returns the key of topic's rate limit bucket: in the slot of the
// prefix's own keys, since it counts the topic's deliveries of every
// shard.
func (k *keys) rate(topic string) string { return "{" + k.prefix + "}:rate:" + topic }

// counts returns the key of shard n's counts hash (x:<topic> reserved
// counts), the second of its fixed keys.
func (k *keys) counts(n int) string { return k.shard[n].fixed[1] }

// shardCursors returns the key of shard n's schedule cursors, which the
// release before records moved on a Cluster (LegacySchedules).
func (k *keys) shardCursors(n int) string { return k.shard[n].base + ":scur" }

// dead returns the key of topic's dead set in shard n.
func (k *keys) dead(n int, topic string) string { return k.shard[n].base + ":dead:" + topic }

// record returns the key of the hash of kind's metadata records: in the
// slot of the prefix's own keys, one key per kind, so that record.lua
// touches one key.
func (k *keys) record(kind string) string { return "{" + k.prefix + "}:rec:" + kind }
