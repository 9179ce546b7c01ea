package redisstore

import (
	"context"
	"embed"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/core"
)

//go:embed lua/*.lua
var luaFS embed.FS

// The scripts. Shard scripts start with lib.lua; see doc.go for their
// invariants.
var (
	scriptPut       = newShardScript("put.lua")
	scriptClaim     = newShardScript("claim.lua")
	scriptPeek      = newShardScript("peek.lua")
	scriptExpire    = newShardScript("expire.lua")
	scriptCancel    = newShardScript("cancel.lua")
	scriptExpireJob = newShardScript("expirejob.lua")
	scriptLease     = newShardScript("lease.lua")
	scriptRequeue   = newShardScript("requeue.lua")
	scriptStats     = newShardScript("stats.lua")
	scriptGet       = newShardScript("get.lua")
	scriptImport    = newShardScript("import.lua")
	scriptExport    = newShardScript("export.lua")
	scriptMigrate   = newShardScript("migrate.lua")
	scriptIndex     = newShardScript("index.lua")
	scriptList      = newShardScript("list.lua")
	scriptRewrite   = newShardScript("rewrite.lua")
	scriptRecover   = newShardScript("recover.lua")
	scriptSlots     = newShardScript("slots.lua")
	scriptPrune     = redis.NewScript(mustRead("prune.lua"))
	scriptRate      = redis.NewScript(mustRead("rate.lua"))
	scriptRecord    = redis.NewScript(mustRead("record.lua"))

	shardScripts = []*shardScript{scriptPut, scriptClaim, scriptPeek, scriptExpire, scriptCancel, scriptExpireJob, scriptLease,
		scriptRequeue, scriptStats, scriptGet, scriptImport, scriptExport, scriptMigrate, scriptIndex, scriptList, scriptRewrite, scriptRecover,
		scriptSlots}
	plainScripts = []*redis.Script{scriptPrune, scriptRate, scriptRecord}
)

func mustRead(name string) string {
	b, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic("redisstore: missing script " + name)
	}
	return string(b)
}

// shardScript is a shard script, lib.lua and its own, in four variants: for
// a store that creates packed jobs or hashes (Config.JobForm), which sets
// lib.lua's JOB_FORM, on one server or on a Redis Cluster, which sets its
// CLUSTER. Each reads the form its store creates first, so that a prefix
// of either form pays no failed read per job for the other.
type shardScript struct {
	packed, hash               *redis.Script
	packedCluster, hashCluster *redis.Script
}

func newShardScript(name string) *shardScript {
	body := mustRead("lib.lua") + mustRead(name)
	return &shardScript{
		packed:        redis.NewScript("local JOB_FORM, CLUSTER = 'packed', false\n" + body),
		hash:          redis.NewScript("local JOB_FORM, CLUSTER = 'hash', false\n" + body),
		packedCluster: redis.NewScript("local JOB_FORM, CLUSTER = 'packed', true\n" + body),
		hashCluster:   redis.NewScript("local JOB_FORM, CLUSTER = 'hash', true\n" + body),
	}
}

// of returns the variant of sc for a store that creates jobs of form, on a
// Redis Cluster or not.
func (sc *shardScript) of(form string, cluster bool) *redis.Script {
	switch {
	case form == JobFormHash && cluster:
		return sc.hashCluster
	case form == JobFormHash:
		return sc.hash
	case cluster:
		return sc.packedCluster
	}
	return sc.packed
}

// scriptsFor returns the scripts a store on a Redis Cluster (cluster) or
// one server runs: the plain ones and both job forms of each shard script.
func scriptsFor(cluster bool) []*redis.Script {
	out := slices.Clone(plainScripts)
	for _, sc := range shardScripts {
		out = append(out, sc.of(JobFormPacked, cluster), sc.of(JobFormHash, cluster))
	}
	return out
}

// loadScripts loads scripts (on every master of a cluster), so that
// EVALSHA finds them, in pipelines too.
func loadScripts(ctx context.Context, rdb redis.Scripter, scripts []*redis.Script) error {
	for _, sc := range scripts {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}

// call is one script run.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
}

// shardCall returns a call of a shard script on shard n, with the common
// arguments lib.lua expects before the script's own: the shard's base, now
// (empty: the script reads the server's clock; with Config.TimeFromClock,
// the store's clock in ms), the wake-up channel, the shard number and the
// retention.
func (s *Store) shardCall(sc *shardScript, n int, extra ...any) call {
	sk := &s.keys.shard[n]
	args := make([]any, 0, 5+len(extra))
	now := ""
	if s.cfg.TimeFromClock {
		now = strconv.FormatInt(s.clock.Now().UnixMilli(), 10)
	}
	args = append(args, sk.base, now, s.keys.channel, sk.num, s.retentionMS)
	args = append(args, extra...)
	return call{script: sc.of(s.jobForm, !s.multiShard), keys: sk.fixed, args: args}
}

// run runs calls, several in one pipeline, and returns their commands, each
// with its own result or error. A script missing from the server's cache (it
// restarted or failed over) is loaded and its call run again: a call that
// got NOSCRIPT did nothing.
func (s *Store) run(ctx context.Context, calls []call) []*redis.Cmd {
	return runOn(ctx, s.rdb, calls)
}

// runOn is run on rdb: the store's client, or one of its connections.
func runOn(ctx context.Context, rdb redis.Cmdable, calls []call) []*redis.Cmd {
	if len(calls) == 1 {
		c := calls[0]
		return []*redis.Cmd{c.script.Run(ctx, rdb, c.keys, c.args...)}
	}
	cmds := pipeline(ctx, rdb, calls)
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	retry := make([]call, len(again))
	scripts := make([]*redis.Script, len(again))
	for i, j := range again {
		retry[i], scripts[i] = calls[j], calls[j].script
	}
	if loadScripts(ctx, rdb, scripts) == nil {
		for i, cmd := range pipeline(ctx, rdb, retry) {
			cmds[again[i]] = cmd
		}
	}
	return cmds
}

func pipeline(ctx context.Context, rdb redis.Cmdable, calls []call) []*redis.Cmd {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	return cmds
}

// write runs calls that change jobs for a client's request, as run does.
// With Config.WaitReplicas it runs them on one connection of the pool,
// pinned, and then WAIT there: WAIT counts the replicas that have every
// write of its connection, and cannot run inside a script. The calls that
// succeeded get core.ErrNotReplicated instead of their answer when fewer
// replicas confirmed them within Config.WaitTimeout (or WAIT failed).
func (s *Store) write(ctx context.Context, calls []call) []*redis.Cmd {
	if s.cfg.WaitReplicas <= 0 {
		return s.run(ctx, calls)
	}
	conn := s.rdb.(*redis.Client).Conn()
	defer conn.Close()
	cmds := runOn(ctx, conn, calls)
	if !slices.ContainsFunc(cmds, func(c *redis.Cmd) bool { return c.Err() == nil }) {
		return cmds // nothing was written
	}
	// WAIT's own read timeout is its timeout (go-redis adds it to the
	// connection's): a pipeline would cut it at the client's read timeout.
	got, err := conn.Wait(ctx, s.cfg.WaitReplicas, s.cfg.WaitTimeout).Result()
	if err == nil && got >= int64(s.cfg.WaitReplicas) {
		return cmds
	}
	if err == nil {
		err = fmt.Errorf("WAIT %d %s: %d confirmed", s.cfg.WaitReplicas, s.cfg.WaitTimeout, got)
	}
	nr := fmt.Errorf("%w: %w", core.ErrNotReplicated, err)
	for _, c := range cmds {
		if c.Err() == nil {
			c.SetErr(nr)
		}
	}
	return cmds
}
