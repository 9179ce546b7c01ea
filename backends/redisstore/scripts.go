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
	scriptPut       = shardScript("put.lua")
	scriptClaim     = shardScript("claim.lua")
	scriptPeek      = shardScript("peek.lua")
	scriptExpire    = shardScript("expire.lua")
	scriptCancel    = shardScript("cancel.lua")
	scriptExpireJob = shardScript("expirejob.lua")
	scriptLease     = shardScript("lease.lua")
	scriptRequeue   = shardScript("requeue.lua")
	scriptStats     = shardScript("stats.lua")
	scriptGet       = shardScript("get.lua")
	scriptImport    = shardScript("import.lua")
	scriptExport    = shardScript("export.lua")
	scriptMigrate   = shardScript("migrate.lua")
	scriptIndex     = shardScript("index.lua")
	scriptList      = shardScript("list.lua")
	scriptPrune     = redis.NewScript(mustRead("prune.lua"))
	scriptRate      = redis.NewScript(mustRead("rate.lua"))
	scriptRecord    = redis.NewScript(mustRead("record.lua"))

	allScripts = []*redis.Script{scriptPut, scriptClaim, scriptPeek, scriptExpire, scriptCancel, scriptExpireJob, scriptLease,
		scriptRequeue, scriptStats, scriptGet, scriptImport, scriptExport, scriptMigrate, scriptIndex, scriptList, scriptPrune, scriptRate, scriptRecord}
)

func mustRead(name string) string {
	b, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic("redisstore: missing script " + name)
	}
	return string(b)
}

func shardScript(name string) *redis.Script {
	return redis.NewScript(mustRead("lib.lua") + mustRead(name))
}

// loadScripts loads every script (on every master of a cluster), so that
// EVALSHA finds them, in pipelines too.
func loadScripts(ctx context.Context, rdb redis.Scripter) error {
	for _, sc := range allScripts {
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
func (s *Store) shardCall(sc *redis.Script, n int, extra ...any) call {
	sk := &s.keys.shard[n]
	args := make([]any, 0, 5+len(extra))
	now := ""
	if s.cfg.TimeFromClock {
		now = strconv.FormatInt(s.clock.Now().UnixMilli(), 10)
	}
	args = append(args, sk.base, now, s.keys.channel, sk.num, s.retentionMS)
	args = append(args, extra...)
	return call{script: sc, keys: sk.fixed, args: args}
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
	if len(again) > 0 && loadScripts(ctx, rdb) == nil {
		retry := make([]call, len(again))
		for i, j := range again {
			retry[i] = calls[j]
		}
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
