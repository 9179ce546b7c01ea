package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The retention phase measures the disk use, the CPU and the bytes written
// of a store at steady state: jobs come due at -retention-rate per second
// and are acknowledged at once, so that as many finished jobs are deleted
// (past --retention, or over --retention-max-jobs) as finish. It is not in
// the default phases: it runs for -retention-duration, which must be long
// enough for the prune to catch up with the finishes.

// retentionSample is one reading of the retention phase.
type retentionSample struct {
	T float64 `json:"t_s"` // seconds since the phase began
	// StoreBytes is the size of the store's files, split into Pebble's
	// tables (SSTBytes), its write-ahead logs (WALBytes) and the rest
	// (manifests, options); for other backends all of it is in
	// StoreBytes and OtherBytes.
	StoreBytes int64 `json:"store_bytes"`
	SSTBytes   int64 `json:"sst_bytes"`
	WALBytes   int64 `json:"wal_bytes"`
	OtherBytes int64 `json:"other_bytes"`
	// CPUSeconds is delayq's CPU time (user and system) since it began.
	CPUSeconds float64 `json:"cpu_s"`
	RSS        int64   `json:"rss"`
	// ReadBytes and WriteBytes are what delayq read from and wrote to the
	// block devices since it began (/proc/<pid>/io): the write-ahead log,
	// flushes and compactions.
	ReadBytes  int64 `json:"read_bytes"`
	WriteBytes int64 `json:"write_bytes"`
	// TablesWritten is the bytes of the tables (*.sst) the store has made
	// since the phase began, by flushes and compactions: every table seen
	// in its directory, which is listed every tableWatchEvery, at the
	// largest size seen.
	TablesWritten int64 `json:"tables_written"`
	// Pushed and Received are the jobs stored and delivered so far;
	// Finished is the topic's done count (finished jobs kept), Unfinished
	// its scheduled, ready and reserved ones.
	Pushed     int   `json:"pushed"`
	Received   int   `json:"received"`
	Finished   int64 `json:"finished"`
	Unfinished int64 `json:"unfinished"`
}

// retentionResult is the retention phase's measurement.
type retentionResult struct {
	Rate             int     `json:"rate"`
	Seconds          float64 `json:"seconds"`
	Retention        string  `json:"retention"`
	RetentionMaxJobs int64   `json:"retention_max_jobs"`
	// FillSeconds is how long the store takes to hold all it keeps:
	// the retention, or the bound's jobs at the rate if fewer;
	// SteadyFrom is when the steady window begins (1.5 fills).
	FillSeconds float64           `json:"fill_s"`
	SteadyFrom  float64           `json:"steady_from_s"`
	Samples     []retentionSample `json:"samples"`
	Steady      *retentionSteady  `json:"steady,omitempty"`
	Pushed      int               `json:"pushed"`
	Received    int               `json:"received"`
	Duplicates  int               `json:"duplicates"`
	Stats       latencyStats      `json:"lateness"`
	PushErrors  int64             `json:"push_errors"`
	Errors      []string          `json:"errors,omitempty"`
	// Store is the local store as delayq left it, read after the phase.
	Store *storeInspection `json:"store,omitempty"`
}

// retentionSteady sums up the samples of the steady window.
type retentionSteady struct {
	Samples int     `json:"samples"`
	Seconds float64 `json:"seconds"`
	// Kept is the mean count of finished jobs kept.
	Kept float64 `json:"kept_mean"`
	// Store and SST are the mean, least and most bytes of the store's
	// files and of its tables.
	StoreMean, StoreMin, StoreMax float64
	SSTMean, WALMean              float64
	// Cores is delayq's CPU over the window, in cores.
	Cores float64 `json:"cores"`
	// CPUPerJob is delayq's CPU time per job in and out, in µs.
	CPUPerJob float64 `json:"cpu_us_per_job"`
	// WritePerSecond and ReadPerSecond are the block-device bytes per
	// second; WritePerJob the bytes written per job in and out.
	WritePerSecond, ReadPerSecond, WritePerJob float64
	// TablesPerSecond and TablesPerJob are the bytes of the tables that
	// flushes and compactions wrote.
	TablesPerSecond, TablesPerJob float64
	// SSTPerKept and StorePerKept are the mean bytes per finished job
	// kept.
	SSTPerKept, StorePerKept float64
}

// retentionFill is how long the store takes to fill up to what it keeps.
func retentionFill(cfg *config) time.Duration {
	fill := cfg.Retention
	if cfg.RetentionMaxJobs > 0 {
		fill = min(fill, time.Duration(float64(cfg.RetentionMaxJobs)/float64(cfg.RetentionRate)*float64(time.Second)))
	}
	return fill
}

// retention pushes cfg.RetentionRate jobs/s due at once to a topic whose
// WebSocket subscribers acknowledge each, for cfg.RetentionFor, and reads
// the store's files, delayq's CPU and I/O and the topic's counts every
// cfg.RetentionSample.
func retention(ctx context.Context, c *client, cfg *config, t *target, logf func(string, ...any)) (*retentionResult, error) {
	total := int(cfg.RetentionFor.Seconds() * float64(cfg.RetentionRate))
	sub, err := subscribeNew(ctx, c, cfg, "loadtest.retention", total)
	if err != nil {
		return nil, err
	}
	defer sub.end()
	topic, col := sub.topic, sub.col
	fill := retentionFill(cfg)
	res := &retentionResult{
		Rate: cfg.RetentionRate, Seconds: cfg.RetentionFor.Seconds(), Retention: cfg.Retention.String(),
		RetentionMaxJobs: cfg.RetentionMaxJobs, FillSeconds: fill.Seconds(), SteadyFrom: 1.5 * fill.Seconds(),
	}
	logf("retention: %d jobs/s due at once and acknowledged, for %s; --retention %s, --retention-max-jobs %d; steady from %s",
		cfg.RetentionRate, cfg.RetentionFor, cfg.Retention, cfg.RetentionMaxJobs, time.Duration(res.SteadyFrom*float64(time.Second)).Round(time.Second))

	start := time.Now()
	p := newPusher(c, cfg.BatchWorkers)
	var (
		mu      sync.Mutex
		samples []retentionSample
		swg     sync.WaitGroup
	)
	tables := newTableWatch()
	swg.Go(func() { tables.run(sub.ctx, t.StoreDirs()) })
	sample := func() {
		s := readRetentionSample(ctx, c, t, topic, time.Since(start))
		s.TablesWritten = tables.written()
		s.Pushed = p.pushedSoFar()
		s.Received = col.received()
		mu.Lock()
		samples = append(samples, s)
		mu.Unlock()
		logf("  %4.0fs: store %s (tables %s, log %s), %d finished kept, %d unfinished, delayq CPU %.0fs, written %s",
			s.T, mib(s.StoreBytes), mib(s.SSTBytes), mib(s.WALBytes), s.Finished, s.Unfinished, s.CPUSeconds, mib(s.WriteBytes))
	}
	sample()
	swg.Go(func() { every(sub.ctx, cfg.RetentionSample, sample) })

	// Every tick pushes the jobs whose turn has come, in batches, so that
	// the rate holds whatever the ticks' own lateness.
	const step = 50 * time.Millisecond
	tick := time.NewTicker(step)
	for next := 0; next < total && ctx.Err() == nil; {
		<-tick.C
		due := min(total, int(time.Since(start).Seconds()*float64(cfg.RetentionRate)))
		for next < due {
			n := min(cfg.Batch, due-next)
			jobs := make([]jobReq, n)
			for k := range jobs {
				jobs[k] = jobReq{Topic: topic, Body: sampleBody}
			}
			p.push(ctx, jobs)
			next += n
		}
	}
	tick.Stop()
	res.Pushed = p.wait()
	res.PushErrors = p.errs.n.Load()
	if res.PushErrors > 0 {
		res.Errors = append(res.Errors, "push: "+p.errs.first)
	}
	if err := col.await(ctx, time.Now(), time.Now().Add(time.Minute), 10*time.Second); err != nil {
		return nil, err
	}
	sub.stop()
	swg.Wait()
	sample()
	rs, dups, errs := col.result()
	res.Received, res.Duplicates = len(rs), dups
	res.Errors = append(res.Errors, errs...)
	res.Stats = summarize(lates(rs))
	res.Samples = samples
	res.Steady = steadyOf(samples, res.SteadyFrom, cfg.RetentionRate)
	if res.Received < res.Pushed {
		return res, fmt.Errorf("retention: received %d of %d jobs pushed", res.Received, res.Pushed)
	}
	if res.Steady == nil {
		return res, fmt.Errorf("retention: no steady window: -retention-duration %s ends before %.0fs", cfg.RetentionFor, res.SteadyFrom)
	}
	return res, nil
}

// readRetentionSample reads what the retention phase records, at elapsed;
// readings that fail are left zero.
func readRetentionSample(ctx context.Context, c *client, t *target, topic string, elapsed time.Duration) retentionSample {
	s := retentionSample{T: elapsed.Seconds()}
	s.SSTBytes, s.WALBytes, s.OtherBytes = storeFiles(t.StoreDirs())
	s.StoreBytes = s.SSTBytes + s.WALBytes + s.OtherBytes
	if t.DelayqPID != 0 {
		if cpu, err := cpuTime(t.DelayqPID); err == nil {
			s.CPUSeconds = cpu.Seconds()
		}
		s.RSS, _ = rss(t.DelayqPID)
		s.ReadBytes, s.WriteBytes, _ = procIO(t.DelayqPID)
	}
	if n, err := c.topicCounts(ctx, topic); err == nil {
		s.Finished = n.Done + n.Cancelled
		s.Unfinished = n.Scheduled + n.Ready + n.Reserved
	}
	return s
}

// steadyOf sums up the samples from steadyFrom on; nil when fewer than
// two are.
func steadyOf(samples []retentionSample, steadyFrom float64, rate int) *retentionSteady {
	var w []retentionSample
	for _, s := range samples {
		if s.T >= steadyFrom {
			w = append(w, s)
		}
	}
	if len(w) < 2 {
		return nil
	}
	first, last := w[0], w[len(w)-1]
	st := &retentionSteady{Samples: len(w), Seconds: last.T - first.T, StoreMin: float64(first.StoreBytes)}
	for _, s := range w {
		st.Kept += float64(s.Finished)
		st.StoreMean += float64(s.StoreBytes)
		st.SSTMean += float64(s.SSTBytes)
		st.WALMean += float64(s.WALBytes)
		st.StoreMin = min(st.StoreMin, float64(s.StoreBytes))
		st.StoreMax = max(st.StoreMax, float64(s.StoreBytes))
	}
	n := float64(len(w))
	st.Kept, st.StoreMean, st.SSTMean, st.WALMean = st.Kept/n, st.StoreMean/n, st.SSTMean/n, st.WALMean/n
	if st.Seconds > 0 {
		st.Cores = (last.CPUSeconds - first.CPUSeconds) / st.Seconds
		st.WritePerSecond = float64(last.WriteBytes-first.WriteBytes) / st.Seconds
		st.ReadPerSecond = float64(last.ReadBytes-first.ReadBytes) / st.Seconds
		st.TablesPerSecond = float64(last.TablesWritten-first.TablesWritten) / st.Seconds
		if jobs := float64(last.Received - first.Received); jobs > 0 {
			st.CPUPerJob = (last.CPUSeconds - first.CPUSeconds) / jobs * 1e6
			st.WritePerJob = float64(last.WriteBytes-first.WriteBytes) / jobs
			st.TablesPerJob = float64(last.TablesWritten-first.TablesWritten) / jobs
		} else {
			st.CPUPerJob = st.Cores / float64(rate) * 1e6
			st.WritePerJob = st.WritePerSecond / float64(rate)
			st.TablesPerJob = st.TablesPerSecond / float64(rate)
		}
	}
	if st.Kept > 0 {
		st.SSTPerKept = st.SSTMean / st.Kept
		st.StorePerKept = st.StoreMean / st.Kept
	}
	return st
}

// tableWatchEvery is how often the retention phase lists the store's
// tables: a table made and deleted again within it goes unseen.
const tableWatchEvery = 250 * time.Millisecond

// tableWatch sees the tables (*.sst) a Pebble store makes, by listing its
// directory: their sizes add up to what its flushes and compactions wrote.
type tableWatch struct {
	mu   sync.Mutex
	seen map[string]int64 // name -> largest size seen
}

func newTableWatch() *tableWatch { return &tableWatch{seen: map[string]int64{}} }

// run lists dirs every tableWatchEvery until ctx is done.
func (w *tableWatch) run(ctx context.Context, dirs []string) {
	tick := time.NewTicker(tableWatchEvery)
	defer tick.Stop()
	for {
		for _, d := range dirs {
			entries, _ := os.ReadDir(d)
			for _, de := range entries {
				if filepath.Ext(de.Name()) != ".sst" {
					continue
				}
				if fi, err := de.Info(); err == nil {
					w.mu.Lock()
					w.seen[de.Name()] = max(w.seen[de.Name()], fi.Size())
					w.mu.Unlock()
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// written returns the bytes of the tables seen so far.
func (w *tableWatch) written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, size := range w.seen {
		n += size
	}
	return n
}

// storeFiles sizes the files under dirs: Pebble's tables (*.sst), its
// write-ahead logs (*.log) and the rest.
func storeFiles(dirs []string) (sst, wal, other int64) {
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(path string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return nil
			}
			fi, err := de.Info()
			if err != nil {
				return nil
			}
			switch filepath.Ext(path) {
			case ".sst":
				sst += fi.Size()
			case ".log":
				wal += fi.Size()
			default:
				other += fi.Size()
			}
			return nil
		})
	}
	return sst, wal, other
}

// procIO returns the bytes process pid read from and wrote to block
// devices (read_bytes and write_bytes of /proc/<pid>/io).
func procIO(pid int) (read, write int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		switch {
		case perr != nil:
		case k == "read_bytes":
			read, found = n, found+1
		case k == "write_bytes":
			write, found = n, found+1
		}
	}
	if found < 2 {
		return 0, 0, errors.New("no read_bytes and write_bytes in /proc/" + strconv.Itoa(pid) + "/io")
	}
	return read, write, nil
}

// jobsIn72h is how many jobs finish in 72 h at 1 000 jobs/s: what the
// default retention keeps at that rate.
const jobsIn72h = 72 * 3600 * 1000

// writeRetention writes the retention phase's section of the report.
func writeRetention(b *strings.Builder, r *results, plots map[string]string) {
	rt := r.Retention
	if rt == nil {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	bound := "no bound by count"
	if rt.RetentionMaxJobs > 0 {
		bound = "--retention-max-jobs " + num(float64(rt.RetentionMaxJobs))
	}
	w("## Retention at steady state\n\n%s jobs/s due at once for %.0f s, each acknowledged by one of %d WebSocket subscribers as it comes; `--retention %s`, %s. The store holds what it keeps after %.0f s; the steady window starts at %.0f s.\n\n",
		num(float64(rt.Rate)), rt.Seconds, r.Config.Subscribers, rt.Retention, bound, rt.FillSeconds, rt.SteadyFrom)
	w("| pushed | received | lateness p50 / p99 / max | push errors |\n| --- | --- | --- | --- |\n")
	w("| %s | %s (%d twice) | %.1f / %.1f / %.1f ms | %d |\n\n", num(float64(rt.Pushed)), num(float64(rt.Received)), rt.Duplicates, rt.Stats.P50, rt.Stats.P99, rt.Stats.Max, rt.PushErrors)
	if st := rt.Steady; st != nil {
		w("Steady window, %d readings over %.0f s:\n\n| | value |\n| --- | --- |\n", st.Samples, st.Seconds)
		w("| finished jobs kept (mean) | %s |\n", num(st.Kept))
		w("| store files: mean (least, most) | %s (%s, %s) |\n", mib(int64(st.StoreMean)), mib(int64(st.StoreMin)), mib(int64(st.StoreMax)))
		w("| of which tables / write-ahead log (mean) | %s / %s |\n", mib(int64(st.SSTMean)), mib(int64(st.WALMean)))
		w("| bytes per finished job kept: tables / all files | %s / %s B |\n", num(st.SSTPerKept), num(st.StorePerKept))
		w("| delayq CPU | %.2f cores, %s µs per job in and out |\n", st.Cores, num(st.CPUPerJob))
		w("| delayq block-device writes / reads | %s/s (%s B per job) / %s/s |\n", mib(int64(st.WritePerSecond)), num(st.WritePerJob), mib(int64(st.ReadPerSecond)))
		w("| of the writes, tables made by flushes and compactions | %s/s (%s B per job) |\n", mib(int64(st.TablesPerSecond)), num(st.TablesPerJob))
		w("| extrapolated: 72 h at 1 000 jobs/s (%s kept), bytes per kept job × that | tables %.1f GiB, all files %.1f GiB |\n\n",
			num(jobsIn72h), st.SSTPerKept*jobsIn72h/(1<<30), st.StorePerKept*jobsIn72h/(1<<30))
	}
	if ins := rt.Store; ins != nil && ins.FinishedJobs > 0 {
		perJob := float64(ins.CompactedBytes) / float64(ins.FinishedJobs)
		w("After the phase, with delayq stopped, the store held %s finished jobs; flushed and compacted whole, its tables take %s: **%s B per finished job kept**, without the garbage a running store carries. Extrapolated to 72 h at 1 000 jobs/s (%s kept): %.1f GiB.\n\n",
			num(float64(ins.FinishedJobs)), mib(ins.CompactedBytes), num(perJob), num(jobsIn72h), perJob*jobsIn72h/(1<<30))
		w("| keys | count | key and value bytes, uncompressed | per finished job |\n| --- | --- | --- | --- |\n")
		kinds := make([]string, 0, len(ins.Keys))
		for k := range ins.Keys {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			w("| %s | %s | %s | %.1f B |\n", k, num(float64(ins.Keys[k])), mib(ins.KeyValueBytes[k]), float64(ins.KeyValueBytes[k])/float64(ins.FinishedJobs))
		}
		w("\n")
	}
	if p, ok := plots["retention"]; ok {
		w("![store files and finished jobs kept over time](%s)\n\n", p)
	}
	w("Readings (written: to block devices since delayq began; tables made: by flushes and compactions since the phase began):\n\n| s | store | tables | log | finished kept | unfinished | delayq CPU s | written | tables made | RSS |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range rt.Samples {
		w("| %.0f | %s | %s | %s | %s | %s | %.1f | %s | %s | %s |\n", s.T, mib(s.StoreBytes), mib(s.SSTBytes), mib(s.WALBytes),
			num(float64(s.Finished)), num(float64(s.Unfinished)), s.CPUSeconds, mib(s.WriteBytes), mib(s.TablesWritten), mib(s.RSS))
	}
	w("\n")
	writeErrors(b, rt.Errors)
}

// storeInspection is what the store held at the end of the retention
// phase, read with delayq stopped: its keys by kind, and its tables once
// flushed and compacted whole, the bytes of what it keeps without the
// garbage (older versions, deletion tombstones) a running store carries.
type storeInspection struct {
	// FinishedJobs is the count of finished jobs' state keys (x).
	FinishedJobs int64 `json:"finished_jobs"`
	// Keys and KeyValueBytes are the keys of each kind and their keys'
	// and values' bytes, uncompressed.
	Keys          map[string]int64 `json:"keys"`
	KeyValueBytes map[string]int64 `json:"key_value_bytes"`
	// CompactedBytes is the size of the tables after a flush and a
	// compaction of the whole key space.
	CompactedBytes int64 `json:"compacted_bytes"`
}

// keyKinds names the local store's key prefixes (backends/pebblestore,
// Keys).
var keyKinds = map[byte]string{
	'm': "m (unfinished state)", 'j': "j (record, body)", 'e': "e (last error)", 'x': "x (finished state)",
	'f': "f (finish order)", 'd': "d (dead)", 't': "t (topic)", 'c': "c (finished counts)",
}

// inspectStore opens the local store's Pebble directory, which no process
// may hold, counts its keys by kind, then flushes and compacts it whole
// and sizes its tables.
func inspectStore(ctx context.Context, dir string) (*storeInspection, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ins := &storeInspection{Keys: map[string]int64{}, KeyValueBytes: map[string]int64{}}
	it, err := db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		kind := keyKinds[k[0]]
		if kind == "" {
			kind = "other"
		}
		ins.Keys[kind]++
		ins.KeyValueBytes[kind] += int64(len(k) + len(v))
		if k[0] == 'x' {
			ins.FinishedJobs++
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if err := db.Flush(); err != nil {
		return nil, err
	}
	if err := db.Compact(ctx, []byte{0}, []byte{0xff, 0xff}, false); err != nil {
		return nil, err
	}
	ins.CompactedBytes = db.Metrics().Total().TablesSize
	return ins, nil
}

// quietPebble drops Pebble's messages.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
