package redisstore

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	scriptGet       = newReadOnlyScript("get.lua")
	scriptImport    = newShardScript("import.lua")
	scriptExport    = newReadOnlyScript("export.lua")
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

// libLua is lib.lua, read once for every shard script and the library.
var libLua = mustRead("lib.lua")

func mustRead(name string) string {
	b, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic("redisstore: missing script " + name)
	}
	return string(b)
}

// shardScript is a shard script: its own file (its main), run after
// lib.lua, in four variants: for a store that creates packed jobs or hashes
// (Config.JobForm), which sets lib.lua's JOB_FORM, on one server or on a
// Redis Cluster, which sets its CLUSTER. Each reads the form its store
// creates first, so that a prefix of either form pays no failed read per
// job for the other. Each variant is a function of the store's library
// (FCALL), and, for a server without functions (before Redis 7, or with
// FUNCTION renamed away), a script of its own (EVALSHA), which runs
// lib.lua's definitions again at every call.
type shardScript struct {
	name string
	// readOnly is set for a script that writes nothing: its functions are
	// flagged no-writes, so that a server at its maxmemory still runs
	// them, as it runs such a script.
	readOnly bool
	scripts  [4]*redis.Script // by variant
	fns      [4]string        // function names, by variant
}

// The variants of a shard script, with JOB_FORM and CLUSTER as lib.lua
// reads them.
var variants = [4]struct{ suffix, form, cluster string }{
	{"p", JobFormPacked, "false"}, {"h", JobFormHash, "false"},
	{"pc", JobFormPacked, "true"}, {"hc", JobFormHash, "true"},
}

// variant returns the index of the variant for a store that creates jobs
// of form, on a Redis Cluster or not.
func variant(form string, cluster bool) int {
	v := 0
	if form == JobFormHash {
		v = 1
	}
	if cluster {
		v += 2
	}
	return v
}

// mainOf is the Lua of a shard script's own file as a function of no
// arguments, for lib.lua's begin to be called before it.
func mainOf(name string) string {
	return "function()\n" + mustRead(name) + "\nend"
}

func newShardScript(name string) *shardScript {
	sc := &shardScript{name: strings.TrimSuffix(name, ".lua")}
	for v, vr := range variants {
		sc.scripts[v] = redis.NewScript("local JOB_FORM, CLUSTER, KEYS, ARGV = '" + vr.form + "', " + vr.cluster +
			", KEYS, ARGV\n" + libLua + "\nlocal main = " + mainOf(name) + "\nbegin()\nreturn main()\n")
	}
	return sc
}

func newReadOnlyScript(name string) *shardScript {
	sc := newShardScript(name)
	sc.readOnly = true
	return sc
}

// of returns the variant of sc for a store that creates jobs of form, on a
// Redis Cluster or not, as a script.
func (sc *shardScript) of(form string, cluster bool) *redis.Script {
	return sc.scripts[variant(form, cluster)]
}

// library is the function library of every shard script and variant,
// loaded with FUNCTION LOAD: lib.lua runs once, when the library loads,
// instead of at every call (about 20 µs of the server's time a call,
// measured with a script of lib.lua alone), and each call runs lib.lua's
// begin and the script's main. Its name and its functions' carry a hash of
// its code, so that instances of different versions sharing a server each
// call their own.
var library = newLibrary(shardScripts)

type functionLibrary struct {
	name, code string
}

func newLibrary(scripts []*shardScript) functionLibrary {
	var body strings.Builder
	body.WriteString("local JOB_FORM, CLUSTER, KEYS, ARGV\n")
	body.WriteString(libLua)
	body.WriteString("\nlocal mains = {}\n" +
		"local function register(suffix, main, form, cluster, flags)\n" +
		"  redis.register_function{function_name = LIBRARY .. '_' .. suffix, flags = flags, callback = function(keys, args)\n" +
		"    JOB_FORM, CLUSTER, KEYS, ARGV = form, cluster, keys, args\n" +
		"    begin()\n" +
		"    return main()\n" +
		"  end}\n" +
		"end\n")
	for _, sc := range scripts {
		flags := "{}"
		if sc.readOnly {
			flags = "{'no-writes'}"
		}
		fmt.Fprintf(&body, "mains[%q] = %s\n", sc.name, mainOf(sc.name+".lua"))
		for _, vr := range variants {
			fmt.Fprintf(&body, "register('%s_%s', mains[%q], '%s', %s, %s)\n", sc.name, vr.suffix, sc.name, vr.form, vr.cluster, flags)
		}
	}
	// The name is of everything after it.
	sum := sha1.Sum([]byte(body.String()))
	name := "delayq_" + hex.EncodeToString(sum[:6])
	for _, sc := range scripts {
		for v, vr := range variants {
			sc.fns[v] = name + "_" + sc.name + "_" + vr.suffix
		}
	}
	return functionLibrary{name: name, code: "#!lua name=" + name + "\nlocal LIBRARY = '" + name + "'\n" + body.String()}
}

// scriptsFor returns the scripts a store on a Redis Cluster (cluster) or
// one server runs without functions: the plain ones and both job forms of
// each shard script.
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

// loadLibrary loads the library on rdb's server, or on every master of a
// Cluster. A library of the same name has the same code: REPLACE makes
// loading it again harmless.
func loadLibrary(ctx context.Context, rdb redis.Cmdable) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.FunctionLoadReplace(ctx, library.code).Err()
		})
	}
	return rdb.FunctionLoadReplace(ctx, library.code).Err()
}

// loadCode loads what the store runs: the library, or on a server without
// functions the shard scripts, and the plain scripts.
func (s *Store) loadCode(ctx context.Context) error {
	err := loadLibrary(ctx, s.rdb)
	switch {
	case err == nil:
		s.functions = true
	case noFunctions(err):
		s.log.Info("redisstore: the server runs no functions (Redis 7); running scripts instead", "error", err)
	default:
		return unavailable("load functions", err)
	}
	scripts := plainScripts
	if !s.functions {
		scripts = scriptsFor(!s.multiShard)
	}
	if err := loadScripts(ctx, s.rdb, scripts); err != nil {
		return unavailable("load scripts", err)
	}
	return nil
}

// noFunctions reports whether err, of FUNCTION LOAD, says that the server
// has no such command (before Redis 7, or renamed away) or that the user
// may not run it. Any other error, such as one in the library's code, is
// the store's to report.
func noFunctions(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.Contains(msg, "unknown command") || strings.HasPrefix(msg, "NOPERM")
}

// isFunctionMissing reports whether err says FCALL found no such function:
// the server lost its functions (a new node, FUNCTION FLUSH, a restart
// without persistence), and the call did nothing.
func isFunctionMissing(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.Contains(re.Error(), "Function not found")
}

// call is one script run: of function fn when set (FCALL), else of script.
type call struct {
	script *redis.Script
	fn     string
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
	v := variant(s.jobForm, !s.multiShard)
	if s.functions {
		return call{fn: sc.fns[v], keys: sk.fixed, args: args}
	}
	return call{script: sc.scripts[v], keys: sk.fixed, args: args}
}

// run runs calls, several in one pipeline, and returns their commands, each
// with its own result or error. A script missing from the server's cache (it
// restarted or failed over), or a function from its library, is loaded and
// its call run again: a call that got NOSCRIPT or "Function not found" did
// nothing.
func (s *Store) run(ctx context.Context, calls []call) []*redis.Cmd {
	return runOn(ctx, s.rdb, calls)
}

// runOn is run on rdb: the store's client, or one of its connections.
func runOn(ctx context.Context, rdb redis.Cmdable, calls []call) []*redis.Cmd {
	cmds := pipeline(ctx, rdb, calls)
	var again []int
	var scripts []*redis.Script
	functions := false
	for i, cmd := range cmds {
		switch err := cmd.Err(); {
		case isFunctionMissing(err):
			functions = true
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			scripts = append(scripts, calls[i].script)
		default:
			continue
		}
		again = append(again, i)
	}
	if len(again) == 0 {
		return cmds
	}
	if functions && loadLibrary(ctx, rdb) != nil || len(scripts) > 0 && loadScripts(ctx, rdb, scripts) != nil {
		return cmds
	}
	retry := make([]call, len(again))
	for i, j := range again {
		retry[i] = calls[j]
	}
	for i, cmd := range pipeline(ctx, rdb, retry) {
		cmds[again[i]] = cmd
	}
	return cmds
}

// pipeline runs calls, one alone as itself, several in one pipeline.
func pipeline(ctx context.Context, rdb redis.Cmdable, calls []call) []*redis.Cmd {
	if len(calls) == 1 {
		return []*redis.Cmd{calls[0].on(ctx, rdb)}
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = c.on(ctx, pipe)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	return cmds
}

// on sends c on rdb (a client, or a pipeline that sends it at Exec).
func (c call) on(ctx context.Context, rdb redis.Cmdable) *redis.Cmd {
	if c.fn != "" {
		return rdb.FCall(ctx, c.fn, c.keys, c.args...)
	}
	return c.script.EvalSha(ctx, rdb, c.keys, c.args...)
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
