package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no client", Config{}, "Client"},
		{"prefix with a brace", Config{Client: client, Prefix: "a{b}"}, "Prefix"},
		{"prefix with a colon", Config{Client: client, Prefix: "a:b"}, "Prefix"},
		{"long prefix", Config{Client: client, Prefix: strings.Repeat("p", 65)}, "Prefix"},
		{"shards not a power of two", Config{Client: client, Shards: 12}, "Shards"},
		{"too many shards", Config{Client: client, Shards: 2048}, "Shards"},
		{"negative shards", Config{Client: client, Shards: -4}, "Shards"},
		{"short retention", Config{Client: client, Retention: time.Millisecond}, "Retention"},
	} {
		err := tc.cfg.WithDefaults().Validate()
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.field, tc.name)
	}
	require.NoError(t, Config{Client: client, Prefix: "delayq.prod-1_a", Shards: 1}.WithDefaults().Validate())
	d := Config{Client: client}.WithDefaults()
	require.Equal(t, PrefixDefault, d.Prefix)
	require.Zero(t, d.Shards, "New reads the shard count from Redis")
	require.Equal(t, RetentionDefault, d.Retention)
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url   string
		kind  string // standalone, cluster
		addrs []string
		check func(t *testing.T, c redis.UniversalClient)
	}{
		// No retries unless the URL asks (maxRetries): 0 once go-redis
		// has read -1.
		{url: "redis://localhost", kind: "standalone", addrs: []string{"localhost:6379"},
			check: func(t *testing.T, c redis.UniversalClient) {
				require.Equal(t, 0, c.(*redis.Client).Options().MaxRetries)
			}},
		{url: "redis://localhost?max_retries=2", kind: "standalone", addrs: []string{"localhost:6379"},
			check: func(t *testing.T, c redis.UniversalClient) {
				require.Equal(t, 2, c.(*redis.Client).Options().MaxRetries)
			}},
		{url: "redis://:s3cret@10.0.0.1:6380/2?dial_timeout=3s&pool_size=7", kind: "standalone", addrs: []string{"10.0.0.1:6380"},
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				require.Equal(t, "s3cret", o.Password)
				require.Equal(t, 2, o.DB)
				require.Equal(t, 3*time.Second, o.DialTimeout)
				require.Equal(t, 7, o.PoolSize)
				require.Nil(t, o.TLSConfig)
			}},
		{url: "rediss://cache.example:6380", kind: "standalone", addrs: []string{"cache.example:6380"},
			check: func(t *testing.T, c redis.UniversalClient) {
				require.NotNil(t, c.(*redis.Client).Options().TLSConfig)
			}},
		{url: "redis+cluster://h1:7000,h2:7001,h3:7002", kind: "cluster", addrs: []string{"h1:7000", "h2:7001", "h3:7002"}},
		{url: "rediss+cluster://u:pw@h1:7000,h2:7001?read_timeout=2s", kind: "cluster", addrs: []string{"h1:7000", "h2:7001"},
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.ClusterClient).Options()
				require.Equal(t, "u", o.Username)
				require.Equal(t, "pw", o.Password)
				require.Equal(t, 2*time.Second, o.ReadTimeout)
				require.NotNil(t, o.TLSConfig)
			}},
		{url: "redis+cluster://h1:7000", kind: "cluster", addrs: []string{"h1:7000"},
			check: func(t *testing.T, c redis.UniversalClient) {
				require.Equal(t, -1, c.(*redis.ClusterClient).Options().MaxRetries, "none for its nodes' clients")
			}},
		{url: "redis://h1:7000?addr=h2:7001&addr=h3:7002", kind: "cluster", addrs: []string{"h1:7000", "h2:7001", "h3:7002"}},
		{url: "redis+sentinel://:pw@s1:26379,s2:26379/mymaster/1", kind: "standalone",
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				require.Equal(t, 1, o.DB)
				require.Equal(t, "pw", o.Password)
				require.Equal(t, 0, o.MaxRetries)
			}},
	} {
		c, err := ParseURL(tc.url)
		require.NoError(t, err, tc.url)
		switch tc.kind {
		case "standalone":
			cl, ok := c.(*redis.Client)
			require.True(t, ok, "%s: %T", tc.url, c)
			if tc.addrs != nil {
				require.Equal(t, tc.addrs[0], cl.Options().Addr, tc.url)
			}
		case "cluster":
			cl, ok := c.(*redis.ClusterClient)
			require.True(t, ok, "%s: %T", tc.url, c)
			require.Equal(t, tc.addrs, cl.Options().Addrs, tc.url)
		}
		if tc.check != nil {
			tc.check(t, c)
		}
		require.NoError(t, c.Close())
	}
	for _, bad := range []string{
		"localhost:6379",
		"http://localhost",
		"redis+ring://a,b",
		"redis+cluster://",
		"redis+sentinel://s1:26379",
		"redis://localhost/x",
		"redis://localhost?bogus_option=1",
		"redis+cluster://h1:7000?bogus=1",
	} {
		c, err := ParseURL(bad)
		require.Error(t, err, bad)
		require.Nil(t, c, bad)
	}
	_, err := ParseURL("redis://user:hunter2@localhost/x")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2", "the password stays out of errors")
}

// TestShardsFixedPerPrefix: a prefix keeps the shard count it was created
// with; a store with another count is refused.
func TestShardsFixedPerPrefix(t *testing.T) {
	t.Parallel()
	url := standaloneURL(t)
	prefix := uniquePrefix(t.Name())
	openStore(t, url, prefix, func(c *Config) { c.Shards = 8 })
	openStore(t, url, prefix, func(c *Config) { c.Shards = 8 })
	_, err := New(t.Context(), Config{Client: newClient(t, url), Prefix: prefix, Shards: 16})
	require.Error(t, err)
	require.Contains(t, err.Error(), "created with 8 shards")
	// Without a count, a store takes the one recorded.
	s := openStore(t, url, prefix)
	require.Equal(t, 8, s.cfg.Shards)
}

// TestShardsDefault: a new prefix gets one shard on one server and
// ShardsDefault on a Cluster.
func TestShardsDefault(t *testing.T) {
	t.Parallel()
	require.Equal(t, ShardsDefaultSingle, openStore(t, standaloneURL(t), uniquePrefix(t.Name())).cfg.Shards)
	require.Equal(t, ShardsDefault, openStore(t, clusterURL(t), uniquePrefix(t.Name())).cfg.Shards)
}

// TestInlineBody: a packed job holds a body of up to packedInlineBody
// bytes whatever the server's hash-max-listpack-value (64 here), which
// bounds a hash's; a longer body gets a key of its own.
func TestInlineBody(t *testing.T) {
	t.Parallel()
	url := standaloneURL(t)
	ctx := t.Context()
	rdb := newClient(t, url)
	for form, limit := range map[string]int{JobFormPacked: packedInlineBody, JobFormHash: 64} {
		s := openStore(t, url, uniquePrefix(t.Name()+form), func(c *Config) { c.JobForm = form })
		require.Equal(t, limit, s.inlineBody, form)
		for _, size := range []int{limit, limit + 1} {
			j := job("inline", time.Hour)
			j.Body = []byte(`"` + strings.Repeat("i", size-2) + `"`)
			put(t, s, j)
			n, err := rdb.Exists(ctx, strings.Replace(s.keys.job(j.ID), ":j:", ":b:", 1)).Result()
			require.NoError(t, err)
			require.Equal(t, int64(size-limit), n, "%s: a body key for %d bytes", form, size)
			got, err := s.GetJob(ctx, j.ID)
			require.NoError(t, err)
			require.Equal(t, j.Body, got.Body)
		}
	}
}

// TestKeyLayout: every key a store writes is under the prefix's hash tags
// as doc.go says, job hashes in the shard crc32(id) picks, and the keys of
// a Lua call in one cluster slot.
func TestKeyLayout(t *testing.T) {
	t.Parallel()
	url := standaloneURL(t)
	prefix := uniquePrefix(t.Name())
	s := openStore(t, url, prefix, func(c *Config) { c.Shards = 4 })
	ctx := t.Context()
	_, err := s.PutRecord(ctx, &core.PutRecordParams{Kind: core.KindTopic, Name: "a.b", Value: []byte(`{}`)})
	require.NoError(t, err)
	var jobs []*core.Job
	big := 0
	for i := range 40 {
		j := job("a.b", time.Duration(i%2)*time.Hour-time.Second)
		if i%4 == 0 {
			j.Body = []byte(`"` + strings.Repeat("b", s.inlineBody) + `"`) // kept apart
			big++
		}
		jobs = append(jobs, j)
	}
	put(t, s, jobs...)
	got := claim(t, s, "a.b", 5, time.Second)
	require.Len(t, got, 5)
	require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: got[0].ID, Lease: got[0].Lease})))
	require.NoError(t, settleErr(s.BuryJob(ctx, &core.BuryJobParams{ID: got[1].ID, Lease: got[1].Lease})))

	rdb := newClient(t, url)
	var all []string
	iter := rdb.Scan(ctx, 0, "{"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		all = append(all, iter.Val())
	}
	require.NoError(t, iter.Err())
	re := regexp.MustCompile(`^\{` + regexp.QuoteMeta(prefix) + `(?::(\d+))?\}:(.+)$`)
	jobKeys, bodyKeys := 0, 0
	for _, k := range all {
		m := re.FindStringSubmatch(k)
		require.NotNil(t, m, "key %q outside the layout", k)
		if m[1] == "" {
			require.Contains(t, []string{"meta", "rec:topic", "seen"}, m[2], "key %q", k)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		require.Less(t, n, 4, "key %q", k)
		if id, ok := strings.CutPrefix(m[2], "j:"); ok {
			require.Equal(t, int(crc32.ChecksumIEEE([]byte(id))&3), n, "job %s in the wrong shard", id)
			jobKeys++
			continue
		}
		if id, ok := strings.CutPrefix(m[2], "b:"); ok {
			require.Equal(t, int(crc32.ChecksumIEEE([]byte(id))&3), n, "body of %s in the wrong shard", id)
			bodyKeys++
			continue
		}
		require.Regexp(t, `^(lease|n|fin|finq|finlog|q:a\.b|dead:a\.b|f:a\.b:[dc]|ct:[A-Z0-9]+)$`, m[2], "key %q", k)
	}
	require.Equal(t, len(jobs), jobKeys)
	require.Equal(t, big, bodyKeys, "bodies over the store's inline limit live apart")

	// Replacing a long body with a short one drops the body key; both
	// come back byte for byte.
	for _, body := range []string{`"` + strings.Repeat("x", s.inlineBody+30) + `"`, `{"short":true}`, `"` + strings.Repeat("y", s.inlineBody-1) + `"`} {
		r := job("a.b", time.Hour)
		r.ID = jobs[1].ID
		r.Body = []byte(body)
		res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{r}, Replace: true})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		got, err := s.GetJob(ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, body, string(got.Body))
		n, err := rdb.Exists(ctx, s.keys.shard[s.keys.shardOf(r.ID)].base+":b:"+r.ID).Result()
		require.NoError(t, err)
		want := int64(0)
		if len(body) > s.inlineBody {
			want = 1
		}
		require.Equal(t, want, n, "body key of a %d-byte body", len(body))
	}
	for n := range 4 {
		sk := s.keys.shard[n]
		for _, k := range append(sk.fixed, s.keys.queue(n, "a.b"), s.keys.dead(n, "a.b"), sk.base+":j:x") {
			require.Equal(t, hashTag(sk.fixed[0]), hashTag(k), "key %q of shard %d", k, n)
		}
	}
}

// hashTag returns the part of a key Redis Cluster hashes.
func hashTag(k string) string {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			return k[i+1 : i+1+j]
		}
	}
	return k
}

// TestFakeClockDueAndExpiry: with a fake clock (TimeFromClock), a waiting
// claim wakes at a job's run_at on the clock, not before, and reserves the
// job at exactly its run_at; an expired lease on the last attempt sends the
// job dead at the lease's expiry.
func TestFakeClockDueAndExpiry(t *testing.T) {
	t.Parallel()
	clock := coretest.NewFakeClockAt(time.Now().Add(time.Hour).Truncate(time.Second))
	s := openStore(t, standaloneURL(t), uniquePrefix(t.Name()), func(c *Config) { c.Clock = clock; c.TimeFromClock = true })
	ctx := t.Context()
	j := job("fake", 0)
	j.RunAt = clock.Now().Add(1500 * time.Millisecond).UTC()
	j.TTR = time.Second
	j.MaxAttempts = 1
	put(t, s, j)

	type result struct {
		jobs []*core.Job
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		jobs, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "fake", Max: 1, Wait: 10 * time.Second})
		ch <- result{jobs, err}
	}()
	// The expirer's timer, and the claim's wait and its timer for run_at.
	require.NoError(t, clock.BlockUntilContext(ctx, 3))
	clock.Advance(1499 * time.Millisecond)
	got, err := s.GetJob(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateScheduled, got.State)
	select {
	case r := <-ch:
		require.Failf(t, "claim returned before run_at", "%+v", r)
	default:
	}
	clock.Advance(time.Millisecond)
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, j.RunAt.Add(j.TTR), r.jobs[0].LeaseExpiresAt, "reserved at exactly run_at")

	// The lease expires on the clock: the job, on its last attempt, dies.
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	clock.Advance(time.Second)
	dead := func() bool {
		dl, err := s.ListDeadJobs(ctx, &core.ListDeadJobsParams{Topic: "fake", Limit: 1})
		return err == nil && len(dl) == 1
	}
	require.Eventually(t, dead, 5*time.Second, 5*time.Millisecond, "expirer ended the expired lease")
	got, err = s.GetJob(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateDead, got.State)
	require.Equal(t, core.LeaseExpired, got.LastError)
	require.Equal(t, j.RunAt.Add(j.TTR), got.UpdatedAt, "died when the lease expired")
}

// TestRetention: finished jobs get a key TTL of Retention and vanish after
// it; unfinished ones have none. They count, and a topic with only
// finished jobs is listed, for the retention period by the store's clock,
// and at most one bucket width (finWidth) longer; then their buckets are
// gone from the shard.
func TestRetention(t *testing.T) {
	t.Parallel()
	url := standaloneURL(t)
	prefix := uniquePrefix(t.Name())
	clock := coretest.NewFakeClock()
	s := openStore(t, url, prefix, func(c *Config) { c.Retention = time.Second; c.Clock = clock; c.TimeFromClock = true })
	ctx := t.Context()
	done := job("ret", -time.Hour)
	done.RunAt = clock.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	done.Body = []byte(`"` + strings.Repeat("d", s.inlineBody) + `"`) // kept apart, expires too
	cancelled := job("ret", time.Hour)
	cancelled.RunAt = clock.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	dead := job("ret.dead", 0)
	dead.RunAt = done.RunAt
	pending := job("ret.pending", 0)
	pending.RunAt = cancelled.RunAt
	put(t, s, done, cancelled, dead, pending)
	c := claim(t, s, "ret", 1, 0)
	require.Len(t, c, 1)
	require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: c[0].ID, Lease: c[0].Lease})))
	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: cancelled.ID}))
	x := claim(t, s, "ret.dead", 1, 0)
	require.Len(t, x, 1)
	require.NoError(t, settleErr(s.BuryJob(ctx, &core.BuryJobParams{ID: x[0].ID, Lease: x[0].Lease, Error: "x"})))

	rdb := newClient(t, url)
	bodyKey := s.keys.shard[s.keys.shardOf(done.ID)].base + ":b:" + done.ID
	for _, k := range []string{s.keys.job(done.ID), bodyKey, s.keys.job(cancelled.ID)} {
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0), "key %s of a finished job expires", k)
		require.LessOrEqual(t, ttl, time.Second)
	}
	for _, id := range []string{dead.ID, pending.ID} {
		ttl, err := rdb.PTTL(ctx, s.keys.job(id)).Result()
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), ttl, "unfinished job %s does not expire", id)
	}
	names := func() []string {
		topics, err := s.ListTopicStates(ctx)
		require.NoError(t, err)
		var out []string
		for _, tp := range topics {
			out = append(out, tp.Name)
		}
		return out
	}
	require.Equal(t, []string{"ret", "ret.dead", "ret.pending"}, names())
	counts := func(topic string) core.Counts {
		tp, err := s.GetTopicState(ctx, topic)
		require.NoError(t, err)
		return tp.Counts
	}
	require.Equal(t, core.Counts{Done: 1, Cancelled: 1}, counts("ret"))
	clock.Advance(time.Second - time.Millisecond)
	require.Equal(t, core.Counts{Done: 1, Cancelled: 1}, counts("ret"), "within retention")
	require.Equal(t, core.Counts{Dead: 1}, counts("ret.dead"))
	clock.Advance(time.Millisecond + finWidth(time.Second))
	require.Equal(t, []string{"ret.dead", "ret.pending"}, names(), "topic of finished jobs past retention")
	require.Equal(t, core.Counts{}, counts("ret"))
	sk := s.keys.shard[0]
	fields, err := rdb.HKeys(ctx, sk.base+":fin").Result()
	require.NoError(t, err)
	require.Empty(t, fields, "fin holds no count or bucket")
	n, err := rdb.Exists(ctx, sk.base+":finq").Result()
	require.NoError(t, err)
	require.Zero(t, n, "no bucket listed")

	// The keys themselves expire on the server's clock, the cancelled job's
	// a little after the done one's (it finished later).
	for _, id := range []string{done.ID, cancelled.ID} {
		require.Eventually(t, func() bool {
			_, err := s.GetJob(ctx, id)
			return errors.Is(err, core.ErrNotFound)
		}, 5*time.Second, 20*time.Millisecond)
	}
	require.ErrorIs(t, s.CancelJob(ctx, &core.CancelJobParams{ID: done.ID}), core.ErrNotFound)

	// The registry forgets a topic an hour after its last put once it is
	// empty and unconfigured.
	clock.Advance(pruneAfter)
	require.Equal(t, []string{"ret.dead", "ret.pending"}, names())
	n, err = rdb.ZCard(ctx, s.keys.seen).Result()
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "ret dropped from the registry")
}

// TestFinishedCountsBounded: with jobs finishing every second and nothing
// reading the counts, a shard keeps the buckets of one retention period
// only, each finish dropping those that expired; the counts then read are
// those of the jobs within retention, give or take the one bucket that the
// retention's end falls in.
func TestFinishedCountsBounded(t *testing.T) {
	t.Parallel()
	const retention = 64 * time.Second // buckets of 1 s
	clock := coretest.NewFakeClockAt(time.Unix(1_800_000_000, 0))
	s := openStore(t, standaloneURL(t), uniquePrefix(t.Name()), func(c *Config) {
		c.Retention = retention
		c.Clock = clock
		c.TimeFromClock = true
	})
	rdb := newClient(t, standaloneURL(t))
	ctx := t.Context()
	sk := s.keys.shard[0]
	const steps = 200
	var cancelled, done int
	for i := range steps {
		j := job("bounded", 0)
		j.RunAt = clock.Now().Add(time.Hour).UTC()
		if i%4 == 0 {
			j.RunAt = clock.Now().UTC()
		}
		put(t, s, j)
		if i%4 == 0 {
			c := claim(t, s, "bounded", 1, 0)
			require.Len(t, c, 1)
			require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: c[0].ID, Lease: c[0].Lease})))
			done++
		} else {
			require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: j.ID}))
			cancelled++
		}
		clock.Advance(time.Second)
		n, err := rdb.HLen(ctx, sk.base+":fin").Result()
		require.NoError(t, err)
		// Two totals, and the buckets of 65 seconds.
		require.LessOrEqual(t, n, int64(2+65), "fields of fin after %d s", i+1)
		n, err = rdb.ZCard(ctx, sk.base+":finq").Result()
		require.NoError(t, err)
		require.LessOrEqual(t, n, int64(65), "buckets listed after %d s", i+1)
	}
	// Jobs finished at steps 0..199, one a second; now is step 200. Those of
	// steps 137..199 are within retention, and the bucket of step 136,
	// whose retention ends now, may still count.
	tp, err := s.GetTopicState(ctx, "bounded")
	require.NoError(t, err)
	got := tp.Counts.Done + tp.Counts.Cancelled
	require.GreaterOrEqual(t, got, int64(63))
	require.LessOrEqual(t, got, int64(64))
	require.Zero(t, tp.Counts.Scheduled+tp.Counts.Ready+tp.Counts.Reserved+tp.Counts.Dead)
	t.Logf("%d done and %d cancelled in all; counted %+v", done, cancelled, tp.Counts)

	// A retention later, nothing counts and no bucket is left.
	clock.Advance(retention)
	tp, err = s.GetTopicState(ctx, "bounded")
	require.NoError(t, err)
	require.Equal(t, core.Counts{}, tp.Counts)
	n, err := rdb.ZCard(ctx, sk.base+":finq").Result()
	require.NoError(t, err)
	require.Zero(t, n)
	fields, err := rdb.HKeys(ctx, sk.base+":fin").Result()
	require.NoError(t, err)
	require.Empty(t, fields)
}

// finWidth is lib.lua's FIN_WIDTH, the width of the buckets of finished
// counts for a retention: a 64th of it, rounded up to the millisecond.
func finWidth(retention time.Duration) time.Duration {
	return time.Duration((retention.Milliseconds()+63)/64) * time.Millisecond
}

// TestClaimAfterCloseAndBadParams covers ClaimJobs' argument and closing
// errors beyond the suite.
func TestClaimAfterCloseAndBadParams(t *testing.T) {
	t.Parallel()
	s := openStore(t, standaloneURL(t), uniquePrefix(t.Name()))
	ctx := context.Background()
	_, err := s.ClaimJobs(ctx, &core.ClaimJobsParams{Topic: "x", Max: 0})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = s.ClaimJobs(ctx, nil)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = s.ListDeadJobs(ctx, &core.ListDeadJobsParams{Topic: "x"})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = s.PutJobs(ctx, nil)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.SetTopicPaused(ctx, "x", true), core.ErrClosed)
	_, err = s.ListTopicStates(ctx)
	require.ErrorIs(t, err, core.ErrClosed)
	require.ErrorIs(t, s.RequeueJob(ctx, "x"), core.ErrClosed)
	require.ErrorIs(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: "x", Lease: "y"})), core.ErrClosed)
}

// TestClaimOrderSkewed: claims return the earliest ready jobs across shards
// in (run_at, id) order when ready jobs crowd into one shard, so that the
// first read of each shard's share is not enough.
func TestClaimOrderSkewed(t *testing.T) {
	t.Parallel()
	s := openStore(t, standaloneURL(t), uniquePrefix(t.Name()), func(c *Config) { c.Shards = 4 })
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	var jobs []*core.Job
	perShard := []int{150, 10, 10, 30}
	for n, want := range perShard {
		for len(jobs) < sum(perShard[:n])+want {
			j := job("skew", 0)
			if s.keys.shardOf(j.ID) != n {
				continue
			}
			// Shard 0's jobs are the earliest, the others interleave later;
			// some share a run_at, ordered by id.
			j.RunAt = base.Add(time.Duration(len(jobs)/2) * time.Millisecond)
			if n == 0 {
				j.RunAt = base.Add(time.Duration(len(jobs)%100) * time.Millisecond)
			}
			jobs = append(jobs, j)
		}
	}
	put(t, s, jobs...)
	want := slices.Clone(jobs)
	slices.SortFunc(want, func(a, b *core.Job) int {
		return cmp.Or(a.RunAt.Compare(b.RunAt), strings.Compare(a.ID, b.ID))
	})
	var got []*core.Job
	for _, max := range []int{1, 7, 50, 3, 100, 200} {
		got = append(got, claim(t, s, "skew", max, 0)...)
	}
	require.Equal(t, len(want), len(got))
	for i := range want {
		require.Equal(t, want[i].ID, got[i].ID, "claim %d out of order", i)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// skewedClock is the real clock moved by a fixed offset: an instance whose
// clock is wrong.
type skewedClock struct {
	core.Clock
	offset time.Duration
}

func (c skewedClock) Now() time.Time { return c.Clock.Now().Add(c.offset) }

// TestClockSkew: an instance whose clock is an hour ahead or behind shares
// a prefix with a correct one. Due times and leases are judged by the
// server's clock, so it neither takes a job before its run_at nor ends a
// lease the other instance holds, and it still delivers on time: its waits
// convert through the skew it sees in the scripts' answers.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	const slack = 5 * time.Millisecond
	for _, offset := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(offset.String(), func(t *testing.T) {
			t.Parallel()
			url, prefix := standaloneURL(t), uniquePrefix(t.Name())
			right := openStore(t, url, prefix)
			skewed := openStore(t, url, prefix, func(c *Config) {
				c.Clock = skewedClock{core.RealClock(), offset}
			})
			ctx := t.Context()

			// Not before its run_at, and not an hour late.
			j := job("skew", 700*time.Millisecond)
			put(t, right, j)
			got := claim(t, skewed, "skew", 1, 5*time.Second)
			at := time.Now()
			require.Len(t, got, 1)
			require.Equal(t, j.ID, got[0].ID)
			require.False(t, at.Before(j.RunAt.Add(-slack)), "claimed %s before run_at", j.RunAt.Sub(at))
			require.Less(t, at.Sub(j.RunAt), time.Second, "claimed late")
			require.WithinDuration(t, at.Add(got[0].TTR), got[0].LeaseExpiresAt, 50*time.Millisecond,
				"lease expiry on the server's clock")
			require.NoError(t, settleErr(skewed.AckJob(ctx, &core.AckJobParams{ID: got[0].ID, Lease: got[0].Lease})))

			// A lease the right instance holds is not ended by the skewed
			// one: it gets the job only once the lease expired.
			k := job("skew", 0)
			k.TTR = 700 * time.Millisecond
			put(t, right, k)
			held := claim(t, right, "skew", 1, 5*time.Second)
			require.Len(t, held, 1)
			again := claim(t, skewed, "skew", 1, 5*time.Second)
			at = time.Now()
			require.Len(t, again, 1)
			require.Equal(t, k.ID, again[0].ID)
			require.Equal(t, 2, again[0].Attempt)
			require.False(t, at.Before(held[0].LeaseExpiresAt.Add(-slack)), "lease ended %s early", held[0].LeaseExpiresAt.Sub(at))
			require.ErrorIs(t, settleErr(right.AckJob(ctx, &core.AckJobParams{ID: k.ID, Lease: held[0].Lease})), core.ErrLeaseLost)
			require.NoError(t, settleErr(skewed.AckJob(ctx, &core.AckJobParams{ID: k.ID, Lease: again[0].Lease})))
		})
	}
}

// TestMigrateLayout: a prefix written by an earlier version, with its
// waiting jobs in one schedule of every topic and a ready set per topic, is
// moved into the topics' queues at New, once: the jobs keep their run_at
// and count as before, the old keys and scheduled counts are gone.
func TestMigrateLayout(t *testing.T) {
	t.Parallel()
	url, prefix := standaloneURL(t), uniquePrefix(t.Name())
	rdb := newClient(t, url)
	ctx := t.Context()
	base := "{" + prefix + ":0}"
	now := time.Now().UnixMilli()
	old := func(id, state string, runAt int64) {
		require.NoError(t, rdb.HSet(ctx, base+":j:"+id, "s", state, "t", "mig", "r", runAt, "d", 30000,
			"m", 3, "a", 0, "c", now, "u", now).Err())
	}
	require.NoError(t, rdb.HSet(ctx, "{"+prefix+"}:meta", "shards", 1).Err())
	require.NoError(t, rdb.ZAdd(ctx, "{"+prefix+"}:seen", redis.Z{Score: float64(now), Member: "mig"}).Err())
	for i := range 2500 { // more than a page
		id := fmt.Sprintf("s%04d", i)
		old(id, "scheduled", now+int64(time.Hour/time.Millisecond)+int64(i))
		require.NoError(t, rdb.ZAdd(ctx, base+":sched", redis.Z{Score: float64(now + int64(time.Hour/time.Millisecond) + int64(i)), Member: id}).Err())
	}
	require.NoError(t, rdb.HSet(ctx, base+":n", "s:mig", 2500).Err())
	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		old(id, "ready", now-int64(10-i))
		require.NoError(t, rdb.ZAdd(ctx, base+":ready:mig", redis.Z{Score: float64(now - int64(10-i)), Member: id}).Err())
	}

	s := openStore(t, url, prefix)
	tp, err := s.GetTopicState(ctx, "mig")
	require.NoError(t, err)
	require.Equal(t, core.Counts{Scheduled: 2500, Ready: 3}, tp.Counts)
	got := claim(t, s, "mig", 10, 0)
	require.Equal(t, []string{"r0", "r1", "r2"}, []string{got[0].ID, got[1].ID, got[2].ID})
	require.Len(t, got, 3)
	n, err := rdb.Exists(ctx, base+":sched", base+":ready:mig").Result()
	require.NoError(t, err)
	require.Zero(t, n, "the old keys are gone")
	fields, err := rdb.HKeys(ctx, base+":n").Result()
	require.NoError(t, err)
	require.Equal(t, []string{"x:mig"}, fields, "no scheduled counts")
	layoutNow, err := rdb.HGet(ctx, "{"+prefix+"}:meta", "layout").Result()
	require.NoError(t, err)
	require.Equal(t, layoutPacked, layoutNow, "an old prefix's new jobs are packed; its hashes stay readable")
	// A second store finds the layout recorded and does not migrate
	// again: a schedule key of the old layout written now stays.
	require.NoError(t, rdb.ZAdd(ctx, base+":sched", redis.Z{Score: float64(now), Member: "s0000"}).Err())
	openStore(t, url, prefix)
	n, err = rdb.ZCard(ctx, base+":sched").Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "migrated twice")
	tp, err = s.GetTopicState(ctx, "mig")
	require.NoError(t, err)
	require.Equal(t, core.Counts{Scheduled: 2500, Reserved: 3}, tp.Counts)
}

// TestKeyIndexLifetime: a key's zset holds a job for as long as GetJob
// finds it: without expiry while one of its jobs is unfinished, and
// expiring with the retention of its last finished job; a replace with
// another key moves the job out of it.
func TestKeyIndexLifetime(t *testing.T) {
	t.Parallel()
	url := standaloneURL(t)
	prefix := uniquePrefix(t.Name())
	s := openStore(t, url, prefix, func(c *Config) { c.Retention = time.Hour })
	ctx := t.Context()
	rdb := newClient(t, url)
	const topic = "keys.life"
	key := s.keys.byKey(0, topic, "order:1")
	ttl := func() time.Duration {
		t.Helper()
		d, err := rdb.PTTL(ctx, key).Result()
		require.NoError(t, err)
		return d
	}

	a, b := job(topic, -time.Second), job(topic, time.Hour)
	a.Key, b.Key = "order:1", "order:1"
	put(t, s, a, b)
	require.Equal(t, time.Duration(-1), ttl(), "no expiry while jobs are unfinished")
	got := claim(t, s, topic, 1, time.Second)
	require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: got[0].ID, Lease: got[0].Lease})))
	require.Equal(t, time.Duration(-1), ttl(), "b is unfinished")

	moved := b.Clone()
	moved.Key = "order:2"
	res, err := s.PutJobs(ctx, &core.PutJobsParams{Jobs: []*core.Job{moved}, Replace: true})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	members, err := rdb.ZRange(ctx, key, 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{a.ID}, members, "the replaced job moved to its new key")
	// A cancel of the last unfinished job of a key gives it a TTL too.
	require.InDelta(t, time.Hour, ttl(), float64(time.Minute), "expires with a's retention")
	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: moved.ID}))
	d, err := rdb.PTTL(ctx, s.keys.byKey(0, topic, "order:2")).Result()
	require.NoError(t, err)
	require.InDelta(t, time.Hour, d, float64(time.Minute))
}

// TestKeysIndexedAtFirstNew: a prefix whose jobs were put before the index
// of business keys (no key sets, no "keys" mark) gets its unfinished keyed
// jobs filed at the next New.
func TestKeysIndexedAtFirstNew(t *testing.T) {
	t.Parallel()
	url := standaloneURL(t)
	prefix := uniquePrefix(t.Name())
	s := openStore(t, url, prefix, func(c *Config) { c.Shards = 4 })
	ctx := t.Context()
	var keyed []*core.Job
	for i := range 6 {
		j := job("keys.old", time.Hour)
		j.Key = "order:" + strconv.Itoa(i%2)
		keyed = append(keyed, j)
	}
	put(t, s, append(keyed, job("keys.old", time.Hour))...)
	// As an earlier version left it.
	rdb := newClient(t, url)
	for n := range 4 {
		for _, k := range []string{"order:0", "order:1"} {
			require.NoError(t, rdb.Del(ctx, s.keys.byKey(n, "keys.old", k)).Err())
		}
	}
	require.NoError(t, rdb.HDel(ctx, s.keys.meta, "keys").Err())
	got, err := s.FindJobs(ctx, &core.FindJobsParams{Topic: "keys.old", Key: "order:0", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)

	s2 := openStore(t, url, prefix, func(c *Config) { c.Shards = 4 })
	for k, want := range map[string][]*core.Job{"order:0": {keyed[0], keyed[2], keyed[4]}, "order:1": {keyed[1], keyed[3], keyed[5]}} {
		got, err := s2.FindJobs(ctx, &core.FindJobsParams{Topic: "keys.old", Key: k, Limit: 10})
		require.NoError(t, err)
		var wantIDs, gotIDs []string
		for _, j := range want {
			wantIDs = append(wantIDs, j.ID)
		}
		for _, j := range got {
			gotIDs = append(gotIDs, j.ID)
		}
		require.ElementsMatch(t, wantIDs, gotIDs, "key %s", k)
	}
	mark, err := rdb.HGet(ctx, s.keys.meta, "keys").Result()
	require.NoError(t, err)
	require.Equal(t, "1", mark)
}

// TestJobForms: jobs stored as hashes and packed live side by side. A
// prefix of hashes stays so, but for a store told to pack, which switches
// it for the stores opened after; the jobs of either form are claimed,
// acknowledged, read and cancelled alike, each kept in its form; a packed
// prefix refuses to go back to hashes.
func TestJobForms(t *testing.T) {
	t.Parallel()
	url, prefix := standaloneURL(t), uniquePrefix(t.Name())
	rdb := newClient(t, url)
	ctx := t.Context()
	form := func(c *Config, f string) { c.JobForm = f }
	typeOf := func(s *Store, id string) string {
		t.Helper()
		typ, err := rdb.Type(ctx, s.keys.job(id)).Result()
		require.NoError(t, err)
		return typ
	}
	layoutOf := func() string {
		got, err := rdb.HGet(ctx, "{"+prefix+"}:meta", "layout").Result()
		require.NoError(t, err)
		return got
	}

	hashes := openStore(t, url, prefix, func(c *Config) { form(c, JobFormHash) })
	require.Equal(t, layoutQueues, layoutOf())
	dueHash, laterHash := job("forms", 0), job("forms", time.Hour)
	laterHash.Key = "k"
	put(t, hashes, dueHash, laterHash)
	require.Equal(t, "hash", typeOf(hashes, dueHash.ID))
	again := openStore(t, url, prefix)
	require.Equal(t, JobFormHash, again.jobForm, "a prefix of hashes stays so")

	packed := openStore(t, url, prefix, func(c *Config) { form(c, JobFormPacked) })
	require.Equal(t, layoutPacked, layoutOf())
	duePacked := job("forms", 0)
	duePacked.Body = json.RawMessage(`{"big":"` + strings.Repeat("x", 2*packed.inlineBody) + `"}`)
	put(t, packed, duePacked)
	require.Equal(t, "string", typeOf(packed, duePacked.ID))
	late := job("forms", time.Hour)
	put(t, hashes, late)
	require.Equal(t, "hash", typeOf(hashes, late.ID), "a store opened before the switch still makes hashes")

	got := claim(t, packed, "forms", 10, time.Second)
	require.Len(t, got, 2)
	for _, j := range got {
		if j.ID == duePacked.ID {
			require.JSONEq(t, string(duePacked.Body), string(j.Body), "a body of its own key")
		}
		require.NoError(t, settleErr(packed.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease})))
	}
	require.Equal(t, "hash", typeOf(packed, dueHash.ID), "a job keeps its form")
	require.Equal(t, "string", typeOf(packed, duePacked.ID))
	for _, id := range []string{dueHash.ID, duePacked.ID} {
		j, err := hashes.GetJob(ctx, id)
		require.NoError(t, err)
		require.Equal(t, core.StateDone, j.State, id)
		ttl, err := rdb.PTTL(ctx, packed.keys.job(id)).Result()
		require.NoError(t, err)
		require.Positive(t, ttl, "%s expires with its retention", id)
	}
	require.NoError(t, packed.CancelJob(ctx, &core.CancelJobParams{ID: laterHash.ID}))
	found, err := packed.FindJobs(ctx, &core.FindJobsParams{Topic: "forms", Key: "k", Limit: 10})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, core.StateCancelled, found[0].State)

	cfg := Config{Client: newClient(t, url), Prefix: prefix, JobForm: JobFormHash}
	_, err = New(ctx, cfg)
	require.ErrorContains(t, err, "cannot go back to hashes")
}

// TestRewriteBodyKeepsExpiry: a finished job's rewrite keeps its expiry,
// in either form, its body moved to a key of its own when it grows past
// the job's and expiring with it.
func TestRewriteBodyKeepsExpiry(t *testing.T) {
	t.Parallel()
	url := standaloneURL(t)
	rdb := newClient(t, url)
	ctx := t.Context()
	for _, form := range []string{JobFormPacked, JobFormHash} {
		s := openStore(t, url, uniquePrefix(t.Name()+form), func(c *Config) { c.JobForm = form })
		j := job("rw", 0)
		put(t, s, j)
		got := claim(t, s, "rw", 1, time.Second)
		require.Len(t, got, 1)
		require.NoError(t, settleErr(s.AckJob(ctx, &core.AckJobParams{ID: j.ID, Lease: got[0].Lease})))
		long := json.RawMessage(`"` + strings.Repeat("y", 2*s.inlineBody) + `"`)
		require.NoError(t, s.RewriteBody(ctx, &core.RewriteBodyParams{ID: j.ID, Old: j.Body, Body: long}))
		for _, k := range []string{s.keys.job(j.ID), strings.Replace(s.keys.job(j.ID), ":j:", ":b:", 1)} {
			ttl, err := rdb.PTTL(ctx, k).Result()
			require.NoError(t, err)
			require.Positive(t, ttl, "%s: %s keeps the retention", form, k)
		}
		done, err := s.GetJob(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, core.StateDone, done.State)
		require.JSONEq(t, string(long), string(done.Body))
	}
}

// TestPackedPutAsHash: a job the caller packs for the put script (Packed
// puts in lib.lua) reads as the same job put as a hash, for strings of
// every MessagePack size class (fixstr, str8, str16) and integers of
// either sign, and the scripts read it: claimed, then acknowledged.
func TestPackedPutAsHash(t *testing.T) {
	t.Parallel()
	url := standaloneURL(t)
	ctx := t.Context()
	const topic = "packedput"
	packed := openStore(t, url, uniquePrefix(t.Name()+"packed"), func(c *Config) { c.JobForm = JobFormPacked })
	hashes := openStore(t, url, uniquePrefix(t.Name()+"hash"), func(c *Config) { c.JobForm = JobFormHash })
	var jobs []*core.Job
	for i, size := range []int{0, 2, 31, 32, 255, 256, packedInlineBody, packedInlineBody + 1} {
		j := job(topic, -time.Duration(i)*time.Second)
		if size > 0 {
			j.Body = []byte(`"` + strings.Repeat("b", size-2) + `"`)
		}
		if i%2 == 1 {
			j.Key = strings.Repeat("k", 10*i)
			j.Priority = -i
			j.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			j.RetryDelays = []time.Duration{time.Second, time.Duration(i) * time.Hour}
			j.URL = "https://example.com/" + strings.Repeat("u", 40*i)
			j.ExpiresAt = time.Now().Add(48 * time.Hour).Truncate(time.Millisecond)
			j.Retention = time.Duration(i) * time.Hour
			j.Then = &core.PushParams{Topic: "next", Body: []byte(`{"n":` + strings.Repeat("1", 3*i) + `}`)}
			j.TTR = 12 * time.Hour
			j.MaxAttempts = 1 << 20
		} else {
			j.Priority = i * 1000
		}
		jobs = append(jobs, j)
	}
	put(t, packed, jobs...)
	put(t, hashes, jobs...)
	for _, j := range jobs {
		p, err := packed.GetJob(ctx, j.ID)
		require.NoError(t, err)
		h, err := hashes.GetJob(ctx, j.ID)
		require.NoError(t, err)
		p.CreatedAt, p.UpdatedAt, p.Changes = h.CreatedAt, h.UpdatedAt, h.Changes
		require.Equal(t, h, p, "job %s", j.ID)
		require.Equal(t, string(j.Body), string(p.Body))
	}
	got := claim(t, packed, topic, len(jobs), time.Second)
	require.Len(t, got, len(jobs))
	for _, c := range got {
		require.NoError(t, settleErr(packed.AckJob(ctx, &core.AckJobParams{ID: c.ID, Lease: c.Lease})))
		done, err := packed.GetJob(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, core.StateDone, done.State)
		require.Equal(t, string(c.Body), string(done.Body))
	}
}

// TestPutKeepsRegistration: on a Cluster a job that takes the id of a
// finished one keeps its registration W (put_job's was_parked), and the
// job it writes is whole: the header of its packed map counts W beside the
// fields the script appends, so every field reads back.
func TestPutKeepsRegistration(t *testing.T) {
	t.Parallel()
	s := openStore(t, clusterURL(t), uniquePrefix(t.Name()))
	ctx := t.Context()
	old := job("reg", time.Hour)
	put(t, s, old)
	raw, err := s.rdb.Get(ctx, s.keys.job(old.ID)).Result()
	require.NoError(t, err)
	fields, err := packedFields(raw)
	require.NoError(t, err)
	require.NotContains(t, fields, "W")
	// The old job as a wake left it: registered under 7.
	require.Equal(t, byte(0xde), raw[0])
	n := int(raw[1])<<8 | int(raw[2])
	raw = raw[:1] + string([]byte{byte((n + 1) >> 8), byte(n + 1)}) + raw[3:] + "\xa1W\x07"
	require.NoError(t, s.rdb.Set(ctx, s.keys.job(old.ID), raw, 0).Err())
	require.NoError(t, s.CancelJob(ctx, &core.CancelJobParams{ID: old.ID}))

	next := job("reg", 2*time.Hour)
	next.ID, next.Key, next.Priority = old.ID, "k", 3
	next.Body = json.RawMessage(`{"n":2}`)
	put(t, s, next)
	raw, err = s.rdb.Get(ctx, s.keys.job(old.ID)).Result()
	require.NoError(t, err)
	fields, err = packedFields(raw)
	require.NoError(t, err)
	require.Equal(t, "7", fields["W"], "the registration stays")
	got, err := s.GetJob(ctx, old.ID)
	require.NoError(t, err)
	require.Equal(t, core.StateScheduled, got.State)
	require.Equal(t, "k", got.Key)
	require.Equal(t, 3, got.Priority)
	require.Equal(t, next.RunAt.UnixMilli(), got.RunAt.UnixMilli())
	require.JSONEq(t, `{"n":2}`, string(got.Body))
	require.Len(t, got.Changes, 1, "a new job's change log")
}
