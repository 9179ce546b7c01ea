package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/core"
)

// Finished jobs leave the index; their state moves to x<id>, an f key
// orders them by finish time for the prune, and per-topic counters in time
// buckets (c keys) count them for the retention period without a scan.

// countKey is the key of the finished count of topic, state and bucket.
func countKey(topic string, state core.State, bucket int64) []byte {
	k := make([]byte, 0, 2+len(topic)+1+8)
	k = append(k, prefixCount)
	k = append(k, topic...)
	k = append(k, 0, stateCodes[state])
	return binary.BigEndian.AppendUint64(k, uint64(bucket))
}

// finishedIndex is where a finished state counts in a topic's buckets.
func finishedIndex(state core.State) int {
	if state == core.StateCancelled {
		return 1
	}
	return 0
}

// countFinished adds delta to tp's count of state in the bucket of at (a
// job's keptFrom), for the next write to write.
func (s *Store) countFinished(tp *topic, state core.State, at time.Time, delta int64) {
	bucket := at.UnixMilli() / s.bucket.Milliseconds()
	c := tp.finished[bucket]
	if c == nil {
		c = new([2]int64)
		tp.finished[bucket] = c
	}
	c[finishedIndex(state)] += delta
	s.setCount(tp, state, bucket, c[finishedIndex(state)])
}

// setCount records n as tp's count of state in bucket, for the next write
// (Store.counts); 0 deletes the count.
func (s *Store) setCount(tp *topic, state core.State, bucket, n int64) {
	s.counts[string(countKey(tp.name, state, bucket))] = n
}

// forgetFinished deletes the finished job id, if the store keeps one, and
// takes it out of its topic's counts, for a put or an import that reuses
// its id: it counts once, in its new state. For a new id it costs one read,
// which a bloom filter answers in a table but a memtable only by a search,
// unless the id has the form core.NewID gives and is greater than
// newestFinished: the ids NewID gives grow, so a job pushed without an id
// of its own is newer than every finished one, and needs no read.
func (s *Store) forgetFinished(b *pebble.Batch, id string) error {
	if id > s.newestFinished && generatedID(id) {
		return nil
	}
	raw, err := s.get(idKey(prefixFinished, id))
	if err != nil || raw == nil {
		return err
	}
	_ = b.Delete(idKey(prefixFinished, id), nil)
	_ = b.Delete(idKey(prefixError, id), nil)
	m, err := decodeMeta(raw)
	if err != nil {
		return fmt.Errorf("pebblestore: job %q: %w", id, err)
	}
	_ = b.Delete(finishedKey(m.topic, m.state, m.updatedAt, id), nil)
	if m.ended == nil { // else its attempt is in x, and it has no h
		_ = b.Delete(idKey(prefixHistory, id), nil)
	}
	if err := s.forgetKey(b, m.topic, id); err != nil {
		return err
	}
	at := s.keptFrom(&m)
	if tp := s.topics[m.topic]; tp != nil && tp.finished[at.UnixMilli()/s.bucket.Milliseconds()] != nil {
		s.countFinished(tp, m.state, at, -1)
	}
	return nil
}

// forgetKey deletes the k key of the finished job id of topic, which its
// record names, for a prune or a put that deletes the job. It costs a
// read of the record.
func (s *Store) forgetKey(b *pebble.Batch, topic, id string) error {
	raw, err := s.get(idKey(prefixRecord, id))
	if err != nil || raw == nil {
		return err
	}
	r, err := decodeRecord(raw)
	if err != nil {
		return fmt.Errorf("pebblestore: job %q: %w", id, err)
	}
	if r.key != "" {
		_ = b.Delete(keyIndexKey(topic, r.key, id), nil)
	}
	return nil
}

// keptFrom is when the store's retention starts to run for finished job m:
// its finish, or for a job with its own retention (core.Job.Retention) the
// finish moved by the difference, so that its expiry key, its count bucket
// and its read all follow one rule, that of the store's retention. (A
// store reopened with another retention moves such a job's end by the
// change, as it moves every other job's.)
func (s *Store) keptFrom(m *meta) time.Time {
	at := time.Unix(0, m.updatedAt)
	if m.retention > 0 {
		at = at.Add(m.retention - s.retention)
	}
	return at
}

// oldestBucket is the first bucket that may hold a job finished within
// retention at now: a job stops being counted at most one bucket width
// after it expired.
func (s *Store) oldestBucket(now time.Time) int64 {
	return now.Add(-s.retention).UnixMilli() / s.bucket.Milliseconds()
}

// finishedCounts returns tp's done and cancelled jobs within retention.
func (s *Store) finishedCounts(tp *topic, now time.Time) (done, cancelled int64) {
	oldest := s.oldestBucket(now)
	for bucket, c := range tp.finished {
		if bucket >= oldest {
			done += c[0]
			cancelled += c[1]
		}
	}
	return done, cancelled
}

// housekeep runs until Close: it drops finished jobs past retention, and
// with Config.RetentionMaxJobs the oldest over the bound, every
// pruneInterval.
func (s *Store) housekeep() {
	defer s.background.Done()
	tick := s.clock.NewTicker(s.pruneInterval())
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.Chan():
		}
		if err := s.prune(s.now()); err != nil {
			s.log.Warn("pebblestore: prune of finished jobs failed", "err", err)
		}
	}
}

// pruneIntervalBounded is the longest between prunes while finished jobs
// are bounded by count: the store keeps at most the bound plus the jobs
// finished in that time.
const pruneIntervalBounded = 10 * time.Second

// pruneInterval is how often the prune runs: every minute, or every
// bucket width if shorter, and at most every pruneIntervalBounded with a
// bound on finished jobs.
func (s *Store) pruneInterval() time.Duration {
	d := min(s.bucket, time.Minute)
	if s.cfg.RetentionMaxJobs > 0 {
		d = min(d, pruneIntervalBounded)
	}
	return d
}

// pruneChunk bounds the f keys one hold of the lock reads.
const pruneChunk = 1000

// prune deletes the finished jobs whose retention ended by now, the
// entries of the record of finished jobs as old, the count buckets that
// count none within retention, and then, with a bound on
// finished jobs, the oldest of those kept over it.
func (s *Store) prune(now time.Time) error {
	upper := expiryKey(now.Add(-s.retention), "")
	var err error
	for more := true; more && err == nil; {
		more, _, err = s.pruneSome(upper, math.MaxInt64)
	}
	if err == nil {
		err = s.pruneFinishLog(now)
	}
	s.pruneCounts(now)
	if err != nil || s.cfg.RetentionMaxJobs <= 0 {
		return err
	}
	// The jobs over the bound now; those finished meanwhile wait for the
	// next prune.
	s.mu.Lock()
	over := s.finishedKept() - s.cfg.RetentionMaxJobs
	s.mu.Unlock()
	total := int64(0)
	for more := over > 0; more && err == nil && total < over; {
		var n int
		more, n, err = s.pruneSome(nil, over-total)
		total += int64(n)
	}
	if total > 0 {
		s.log.Debug("pebblestore: pruned the oldest finished jobs over the bound", "jobs", total, "bound", s.cfg.RetentionMaxJobs)
	}
	return err
}

// finishedKept returns the finished jobs the store keeps, of every topic,
// with s.mu held: the sum of the count buckets. Each finish adds its job
// to a bucket, and each delete of a finished job (a prune, a put or an
// import that reuses its id) takes it out, in the same batch, so the sum
// is the count of x keys without a read and survives a restart with the
// buckets. (A bucket that pruneCounts dropped holds only jobs past
// retention, which the prune deleted first.)
func (s *Store) finishedKept() int64 {
	var n int64
	for _, tp := range s.topicList {
		for _, c := range tp.finished {
			n += c[0] + c[1]
		}
	}
	return n
}

// pruneSome deletes finished jobs in finish order (f keys), below upper
// when it is not nil, and at most limit of them. It holds
// s.mu, so that a put of the same id cannot slip between the check and
// the delete, and reads at most pruneChunk f keys: more reports that it
// stopped with f keys left to read, n how many jobs it deleted. A deleted job leaves its
// topic's count bucket in the same batch.
func (s *Store) pruneSome(upper []byte, limit int64) (more bool, n int, err error) {
	if upper == nil {
		upper = []byte{prefixExpiry + 1}
	}
	s.prefetchPrune(upper)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, 0, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: upper})
	if err != nil {
		return false, 0, wrap(err)
	}
	b := s.db.NewBatch()
	uncount := make(map[bucketOf]*[2]int64)
	read := 0
	ok := it.First()
	for ; ok && read < pruneChunk && int64(n) < limit; ok = it.Next() {
		k := it.Key()
		finished := int64(binary.BigEndian.Uint64(k[1:9]))
		id := string(k[9:])
		_ = b.Delete(slices.Clone(k), nil)
		read++
		raw, err := s.get(idKey(prefixFinished, id))
		if err != nil {
			_ = it.Close()
			_ = b.Close()
			return false, 0, err
		}
		if raw == nil {
			continue // put again since, and maybe unfinished
		}
		m, err := decodeMeta(raw)
		if err == nil && s.keptFrom(&m).UnixMilli() != finished {
			continue // finished again since: its own f key prunes it
		}
		if err == nil {
			_ = b.Delete(finishedKey(m.topic, m.state, m.updatedAt, id), nil)
			if err := s.forgetKey(b, m.topic, id); err != nil {
				_ = it.Close()
				_ = b.Close()
				return false, 0, err
			}
		}
		_ = b.Delete(idKey(prefixFinished, id), nil)
		_ = b.Delete(idKey(prefixRecord, id), nil)
		_ = b.Delete(idKey(prefixError, id), nil)
		if err != nil || m.ended == nil { // else its attempt is in x, and it has no h
			_ = b.Delete(idKey(prefixHistory, id), nil)
		}
		n++
		if tp := s.topics[m.topic]; err == nil && tp != nil {
			key := bucketOf{tp, finished / s.bucket.Milliseconds()}
			if uncount[key] == nil {
				uncount[key] = new([2]int64)
			}
			uncount[key][finishedIndex(m.state)]++
		}
	}
	if err := it.Close(); err != nil {
		_ = b.Close()
		return false, 0, wrap(err)
	}
	for key, d := range uncount {
		s.uncountBucket(key, d)
	}
	// Losing the deletes only delays them to the next prune: the counts
	// are lost with them.
	return ok, n, s.write(b, pebble.NoSync)()
}

// prefetchPrune reads, without s.mu, what the next pruneSome below upper
// reads with it (a chunk of f keys, and each job's finished state and
// record), so that the lock is held over cached blocks rather than disk
// reads: on a slow disk, a prune reading cold blocks under the lock held
// up every claim and acknowledgement of a busy store for seconds (the
// loadtest's soak phase found it). Only the background prune calls
// pruneSome, and Close waits for it, so the database is open.
func (s *Store) prefetchPrune(upper []byte) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: upper})
	if err != nil {
		return
	}
	defer it.Close()
	for ok, read := it.First(), 0; ok && read < pruneChunk; ok, read = it.Next(), read+1 {
		id := string(it.Key()[9:])
		for _, k := range [][]byte{idKey(prefixFinished, id), idKey(prefixRecord, id)} {
			if _, closer, err := s.db.Get(k); err == nil {
				_ = closer.Close()
			}
		}
	}
}

// bucketOf names a topic's count bucket.
type bucketOf struct {
	tp     *topic
	bucket int64
}

// uncountBucket takes d (done, cancelled) deleted jobs out of a count
// bucket; a bucket that counts nothing more is deleted.
// A bucket that pruneCounts dropped already is left so.
func (s *Store) uncountBucket(key bucketOf, d *[2]int64) {
	c := key.tp.finished[key.bucket]
	if c == nil {
		return
	}
	c[0], c[1] = max(c[0]-d[0], 0), max(c[1]-d[1], 0)
	if c[0] == 0 && c[1] == 0 {
		delete(key.tp.finished, key.bucket)
	}
	for k, state := range []core.State{core.StateDone, core.StateCancelled} {
		if d[k] != 0 || c[k] == 0 {
			s.setCount(key.tp, state, key.bucket, c[k])
		}
	}
}

// pruneCounts forgets the count buckets older than retention.
func (s *Store) pruneCounts(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	oldest := s.oldestBucket(now)
	b := s.db.NewBatch()
	for _, tp := range s.topicList {
		for bucket := range tp.finished {
			if bucket < oldest {
				delete(tp.finished, bucket)
				s.setCount(tp, core.StateDone, bucket, 0)
				s.setCount(tp, core.StateCancelled, bucket, 0)
			}
		}
	}
	if err := s.write(b, pebble.NoSync)(); err != nil {
		s.log.Warn("pebblestore: prune of finished counts failed", "err", err)
	}
}

// generatedID reports whether id has the form of the ids core.NewID gives:
// a ULID, 26 characters of Crockford's base32 (digits and capitals), the
// first at most '7'. newestFinished bounds the finished ids of this form
// only: a put of another (a client's own, core.KeyID's) always reads.
func generatedID(id string) bool {
	if len(id) != 26 || id[0] > '7' {
		return false
	}
	for i := range len(id) {
		if c := id[i]; (c < '0' || c > '9') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// newestFinishedScan bounds the x keys loadNewestFinished steps over that
// have other ids; past it, every put reads.
const newestFinishedScan = 10_000

// loadNewestFinished sets newestFinished at Open: the greatest id of a
// finished job with the form core.NewID gives, found from the end of the x
// keys of such ids. Should other ids crowd the end, it gives up after
// newestFinishedScan of them, and newestFinished is then above every
// generated id ("8").
func (s *Store) loadNewestFinished() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixFinished}, UpperBound: []byte{prefixFinished, '8'}})
	if err != nil {
		return wrap(err)
	}
	n := 0
	for ok := it.Last(); ok; ok = it.Prev() {
		if id := string(it.Key()[1:]); generatedID(id) {
			s.newestFinished = id
			break
		}
		if n++; n == newestFinishedScan {
			s.newestFinished = "8"
			break
		}
	}
	return wrap(errors.Join(it.Error(), it.Close()))
}
