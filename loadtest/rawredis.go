package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/backends/redisstore/redistest"
)

// The rawredis phase is a baseline without delayq: what Redis itself
// allows on this machine for the burst, with the plainest schedule a
// client could keep in it that still does what delayq must. Jobs are
// hashes (field body) plus members of a sorted set scored by their due
// time in ms; consumers claim due jobs with one Lua script call each (up
// to rawClaimMax at a time, moved to a lease sorted set scored by the
// lease's expiry, each given a lease token in its hash) and acknowledge a
// claim's jobs with one call of another script, which checks each job's
// lease token and keeps a finished record, as delayq's ack does: the job's
// hash marked done and given its retention as a TTL, a count of done jobs,
// and one entry in a stream of finishes per call.

const (
	rawPushBatch = 1000 // jobs per push pipeline
	rawConsumers = 4    // like the burst phase's 4 WebSocket subscribers
	rawClaimMax  = 100  // jobs per claim script call
	rawLease     = 30 * time.Second
	// rawRetention is how long a finished job's hash stays, as delayq's
	// default retention keeps a finished job.
	rawRetention = time.Hour
)

// rawClaim moves up to ARGV[2] members of the due set KEYS[1] scored at
// most ARGV[1] (now, ms) to the lease set KEYS[2] scored ARGV[3] (the
// lease's expiry, ms), gives each the lease token ARGV[5]..i in its hash
// ARGV[4]..id, and returns id, body, lease, id, body, lease...
var rawClaim = redis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids == 0 then return {} end
redis.call('ZREM', KEYS[1], unpack(ids))
local z, out = {}, {}
for i, id in ipairs(ids) do
  local lease = ARGV[5] .. i
  z[2*i-1] = ARGV[3]
  z[2*i] = id
  out[3*i-2] = id
  out[3*i-1] = redis.call('HGET', ARGV[4] .. id, 'body')
  out[3*i] = lease
  redis.call('HSET', ARGV[4] .. id, 'lease', lease)
end
redis.call('ZADD', KEYS[2], unpack(z))
return out
`)

// rawAck acknowledges the deliveries id, lease, id, lease... of ARGV[3..]:
// each whose hash ARGV[1]..id still holds that lease token leaves the lease
// set KEYS[1] and is marked done, its hash kept ARGV[2] ms; the count of
// done jobs KEYS[2] grows by those, and the stream KEYS[3] gets one entry
// naming them. It returns how many it acknowledged.
var rawAck = redis.NewScript(`
local done = {}
for i = 3, #ARGV, 2 do
  local id, lease = ARGV[i], ARGV[i+1]
  local kj = ARGV[1] .. id
  if redis.call('HGET', kj, 'lease') == lease then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HSET', kj, 'state', 'done', 'lease', '')
    redis.call('PEXPIRE', kj, ARGV[2])
    done[#done+1] = id
  end
end
if #done > 0 then
  redis.call('INCRBY', KEYS[2], #done)
  redis.call('XADD', KEYS[3], '*', 'ids', table.concat(done, ','))
end
return #done
`)

// rawRedisResult is the raw Redis baseline.
type rawRedisResult struct {
	baseline
	ClaimMax int   `json:"claim_max"`
	Acked    int64 `json:"acked"`
	Claims   int64 `json:"claims"`
}

// rawRedis runs the raw Redis baseline on cfg.RedisURL, or on a
// redis-server of its own (append-only file, fsync every second, as
// delayq's Redis backend is measured) in a temporary directory.
func rawRedis(ctx context.Context, cfg *config, logf func(string, ...any)) (*rawRedisResult, error) {
	res := &rawRedisResult{baseline: newBaseline(cfg.Burst, rawConsumers), ClaimMax: rawClaimMax}
	var (
		opts *redis.Options
		pid  int
	)
	if cfg.RedisURL != "" {
		var err error
		if opts, err = redis.ParseURL(cfg.RedisURL); err != nil {
			return nil, fmt.Errorf("rawredis: -redis-url: %w", err)
		}
	} else {
		if err := redistest.Available(); err != nil {
			return nil, fmt.Errorf("rawredis: %w: %s", err, redistest.Install)
		}
		dir, err := os.MkdirTemp("", "delayq-rawredis-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		logf("rawredis: starting redis-server (appendonly, appendfsync everysec) %s", strings.Join(cfg.RedisArgs, " "))
		rs, err := redistest.StartServer(redistest.Options{Dir: filepath.Join(dir, "redis"), AppendFsync: "everysec", Args: cfg.RedisArgs})
		if err != nil {
			return nil, err
		}
		defer rs.Kill()
		opts = &redis.Options{Addr: rs.Addr}
		pid = rs.PID()
	}
	opts.PoolSize = 2 * rawConsumers
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server", "persistence").Result()
	if err != nil {
		return nil, fmt.Errorf("rawredis: %w", err)
	}
	fields := infoFields(info)
	res.Server = fmt.Sprintf("redis-server %s, appendonly %s", fields["redis_version"], map[string]string{"1": "yes", "0": "no"}[fields["aof_enabled"]])
	if fsync, err := rdb.ConfigGet(ctx, "appendfsync").Result(); err == nil && fsync["appendfsync"] != "" {
		res.Server += ", appendfsync " + fsync["appendfsync"]
	}
	if pid == 0 && isLoopback(opts.Addr) {
		// A server of this machine: its process is readable.
		pid, _ = strconv.Atoi(fields["process_id"])
	}
	if cfg.RedisURL != "" {
		res.Server += " at " + redactURLs(cfg.RedisURL)
	}

	// Keys under one hash tag, unique to the run, so that a shared server
	// keeps its own and a cluster would hold them in one slot.
	prefix := fmt.Sprintf("{delayq-rawredis-%d}:", time.Now().UnixNano())
	dueKey, leaseKey, jobPrefix := prefix+"due", prefix+"lease", prefix+"job:"
	doneKey, finKey := prefix+"done", prefix+"finished"
	defer func() { // leave nothing behind on a shared server
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rdb.Del(cctx, dueKey, leaseKey, doneKey, finKey)
		var keys []string
		for i := range cfg.Burst {
			if keys = append(keys, jobPrefix+rawID(i)); len(keys) == rawPushBatch || i == cfg.Burst-1 {
				rdb.Del(cctx, keys...)
				keys = keys[:0]
			}
		}
	}()

	// Push, due at one instant ahead: at an assumed 100 000 jobs/s.
	lead := burstLead(cfg.Burst, 100_000)
	due := time.Now().Add(lead).Truncate(time.Millisecond)
	logf("rawredis: %s; pushing %d jobs due at %s (in %s)", res.Server, cfg.Burst, due.Format("15:04:05.000"), lead.Round(time.Millisecond))
	start := time.Now()
	for i := 0; i < cfg.Burst; i += rawPushBatch {
		n := min(rawPushBatch, cfg.Burst-i)
		pipe := rdb.Pipeline()
		zs := make([]redis.Z, n)
		for k := range n {
			id := rawID(i + k)
			pipe.HSet(ctx, jobPrefix+id, "body", []byte(sampleBody))
			zs[k] = redis.Z{Score: float64(due.UnixMilli()), Member: id}
		}
		pipe.ZAdd(ctx, dueKey, zs...)
		if _, err := pipe.Exec(ctx); err != nil {
			return res, fmt.Errorf("rawredis: push: %w", err)
		}
	}
	res.PushSeconds = time.Since(start).Seconds()
	if time.Now().After(due) {
		return res, fmt.Errorf("rawredis: pushing took %.1fs, past the due instant: lower -burst", res.PushSeconds)
	}

	// Drain from the due instant.
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(time.Until(due)):
	}
	meter := startServerCPU(pid)
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var (
		acked, claims atomic.Int64
		errs          errRecorder
		wg            sync.WaitGroup
		end           time.Time
		endOnce       sync.Once
	)
	fail := func(err error) {
		if dctx.Err() == nil {
			errs.add(err)
		}
	}
	for range rawConsumers {
		wg.Go(func() {
			for dctx.Err() == nil {
				now := time.Now()
				out, err := rawClaim.Run(dctx, rdb, []string{dueKey, leaseKey},
					now.UnixMilli(), rawClaimMax, now.Add(rawLease).UnixMilli(), jobPrefix, rand.Text()+":").Slice()
				if err != nil {
					fail(fmt.Errorf("claim: %w", err))
					time.Sleep(time.Millisecond)
					continue
				}
				if len(out) == 0 {
					// The rest is claimed by the others: wait for their
					// acks, or for a job to come due.
					time.Sleep(time.Millisecond)
					continue
				}
				claims.Add(1)
				args := make([]any, 0, 2+2*len(out)/3)
				args = append(args, jobPrefix, rawRetention.Milliseconds())
				for i := 0; i+2 < len(out); i += 3 {
					id, _ := out[i].(string)
					if body, _ := out[i+1].(string); len(body) != len(sampleBody) {
						fail(fmt.Errorf("job %s: body of %d bytes", id, len(body)))
					}
					args = append(args, id, out[i+2])
				}
				n, err := rawAck.Run(dctx, rdb, []string{leaseKey, doneKey, finKey}, args...).Int64()
				if err != nil {
					fail(fmt.Errorf("ack: %w", err))
					continue
				}
				if want := int64(len(out) / 3); n != want {
					fail(fmt.Errorf("ack: %d of %d acknowledged", n, want))
				}
				if acked.Add(n) >= int64(cfg.Burst) {
					endOnce.Do(func() { end = time.Now(); cancel() })
				}
			}
		})
	}
	wg.Wait()
	if end.IsZero() {
		end = time.Now()
	}
	res.serverFigures = meter.figures(end.Sub(due), cfg.Burst)
	res.AckedAll = end.Sub(due).Seconds()
	res.Acked, res.Claims = acked.Load(), claims.Load()
	res.PerSecond = float64(res.Acked) / res.AckedAll
	res.Errors, res.FirstErr = errs.n.Load(), errs.first

	// Nothing may be left: the sets are empty, and every job is counted
	// done and kept.
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	pipe := rdb.Pipeline()
	dueN, leaseN, doneN := pipe.ZCard(cctx, dueKey), pipe.ZCard(cctx, leaseKey), pipe.Get(cctx, doneKey)
	var exists []*redis.IntCmd
	for i := 0; i < cfg.Burst; i += rawPushBatch {
		keys := make([]string, min(rawPushBatch, cfg.Burst-i))
		for k := range keys {
			keys[k] = jobPrefix + rawID(i+k)
		}
		exists = append(exists, pipe.Exists(cctx, keys...))
	}
	if _, err := pipe.Exec(cctx); err != nil {
		return res, fmt.Errorf("rawredis: count what is left: %w", err)
	}
	res.Left = dueN.Val() + leaseN.Val()
	kept := int64(0)
	for _, e := range exists {
		kept += e.Val()
	}
	if done, _ := doneN.Int64(); done != res.Acked || kept != int64(cfg.Burst) {
		errs.add(fmt.Errorf("%d jobs counted done and %d kept of %d acknowledged", done, kept, res.Acked))
		res.Errors, res.FirstErr = errs.n.Load(), errs.first
	}
	switch {
	case res.Acked < int64(res.Jobs):
		return res, fmt.Errorf("rawredis: acknowledged %d of %d jobs in 2 min (first error: %s)", res.Acked, res.Jobs, res.FirstErr)
	case res.Left > 0:
		return res, fmt.Errorf("rawredis: %d due or leased jobs left after the last ack", res.Left)
	case res.Errors > 0:
		return res, fmt.Errorf("rawredis: %d errors, the first: %s", res.Errors, res.FirstErr)
	}
	return res, nil
}

func rawID(i int) string { return "j" + strconv.Itoa(i) }

// infoFields parses INFO's name:value lines.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// isLoopback reports whether addr (host:port) is on this machine's
// loopback interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
