package natsstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// Business keys. A job with a key has, beside its message, an empty entry
// on <prefix>.i.~<hash>.<id>, where hash stands for its topic and key
// (keyHash): FindJobs lists the subjects of a key and reads the jobs they
// name. The entry has no TTL while the job is unfinished and the
// retention once it finished, like the job's done or cancelled message,
// so the two go together. The "~", which no id holds, keeps jobFilter
// (<prefix>.*.<id>.>) off the entries.
//
// An entry is written right after the job's message, and only when the
// job gets its key, changes key or topic, finishes or is put again: a
// keyed put or finish costs one publish more, other changes none. An
// instance killed between the two writes leaves a job its key does not
// find, or a finished job's entry without its TTL; FindJobs checks every
// job it reads against the key, so a stale entry is never an answer.

// kindKey is the second token of key entries; not a kind of job message.
const kindKey = "i"

// keyHash stands for a topic and a key in one subject token: 32 hex
// digits of the SHA-256 of both.
func keyHash(topic, key string) string {
	h := sha256.New()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// keyFilter matches the entries of topic's jobs with key.
func (n names) keyFilter(topic, key string) string {
	return n.prefix + "." + kindKey + ".~" + keyHash(topic, key) + ".*"
}

// keySubject is the entry of job id of topic with key.
func (n names) keySubject(topic, key, id string) string {
	return n.prefix + "." + kindKey + ".~" + keyHash(topic, key) + "." + id
}

// keyEntry returns j's entry: with j's retention as TTL once j finished.
func (s *Store) keyEntry(j *core.Job) *nats.Msg {
	m := nats.NewMsg(s.names.keySubject(j.Topic, j.Key, j.ID))
	if j.State.Finished() {
		m.Header.Set(hdrTTL, ttl(cmp.Or(j.Retention, s.cfg.Retention)))
	}
	return m
}

// needsEntry reports whether a write of j over prev (nil for a create)
// changes j's entry.
func needsEntry(j, prev *core.Job) bool {
	return j.Key != "" && (prev == nil || prev.Key != j.Key || prev.Topic != j.Topic ||
		prev.State.Finished() != j.State.Finished())
}

// rekey brings the entries of job j up to a write over prev (nil for a
// create): the old one goes when the key or topic changed, the new one is
// written when needsEntry says so. A failure is logged: the job is
// written, only a lookup by its key may miss it.
func (s *Store) rekey(ctx context.Context, j, prev *core.Job) {
	ctx, cancel := opContext(ctx)
	defer cancel()
	if prev != nil && prev.Key != "" && (prev.Key != j.Key || prev.Topic != j.Topic) {
		err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.names.keySubject(prev.Topic, prev.Key, prev.ID)))
		if err != nil {
			s.log.Warn("natsstore: delete a key entry", "id", j.ID, "err", err)
		}
	}
	if !needsEntry(j, prev) {
		return
	}
	if _, err := s.js.PublishMsg(ctx, s.keyEntry(j)); err != nil {
		s.log.Warn("natsstore: write a key entry", "id", j.ID, "err", err)
	}
}

// keyAll writes the entries of jobs just created (stored[i] set), pipelined.
func (s *Store) keyAll(ctx context.Context, jobs []*core.Job, stored []bool) {
	ctx, cancel := opContext(ctx)
	defer cancel()
	var futs []jetstream.PubAckFuture
	for i, j := range jobs {
		if !stored[i] || j.Key == "" {
			continue
		}
		f, err := s.js.PublishMsgAsync(s.keyEntry(j))
		if err != nil {
			s.log.Warn("natsstore: write a key entry", "id", j.ID, "err", err)
			break
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		if _, err := await(ctx, f); err != nil {
			s.log.Warn("natsstore: write a key entry", "subject", f.Msg().Subject, "err", err)
		}
	}
}

// keyIndexed is the key of the topic bucket that says the stream's jobs
// all have their key entries (indexKeys).
const keyIndexed = "meta.keys-indexed"

// indexKeys writes the key entries of the unfinished jobs of a stream from
// before the index of business keys, once: it reads them as an export
// does and then writes keyIndexed (an empty stream needs neither; a
// stream of this version's jobs only rewrites their entries once). Jobs
// that finished before are not indexed (they expire with their
// retention). Instances of the earlier version must be stopped first.
func (s *Store) indexKeys(ctx context.Context) error {
	if _, err := s.kv.Get(ctx, keyIndexed); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, nats.ErrNoResponders) {
		return unavailable("read key index mark", err)
	}
	if s.stream.CachedInfo().State.Msgs == 0 {
		// A new stream (or an empty one): nothing to index, and a bucket
		// just made on a cluster may not answer yet (no responders). The
		// mark is written at a later start, when there are jobs.
		return nil
	}
	var batch []*core.Job
	n := 0
	flush := func() {
		all := make([]bool, len(batch))
		for i := range all {
			all[i] = true
		}
		s.keyAll(ctx, batch, all)
		n += len(batch)
		batch = batch[:0]
	}
	err := s.ExportJobs(ctx, func(j *core.Job) error {
		if j.Key != "" {
			batch = append(batch, j)
			if len(batch) == importBatch {
				flush()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	flush()
	if _, err := s.kv.Put(ctx, keyIndexed, []byte("1")); err != nil {
		return unavailable("index business keys", err)
	}
	if n > 0 {
		s.log.Info("natsstore: indexed the business keys of jobs put by an earlier version", "prefix", s.cfg.Prefix, "jobs", n)
	}
	return nil
}

// FindJobs implements core.Store: it lists the subjects of the key's
// entries, then reads the jobs they name in id order, a page at a time,
// keeping those that still have the topic and key. Errors:
// ErrInvalidArgument, ErrClosed, ErrUnavailable.
func (s *Store) FindJobs(ctx context.Context, params *core.FindJobsParams) ([]*core.Job, error) {
	if err := core.CheckFind(params); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, core.ErrClosed
	}
	var ids []string
	for offset, total := 0, 1; offset < total; {
		page, n, err := s.subjects(ctx, s.names.keyFilter(params.Topic, params.Key), offset)
		if err != nil {
			return nil, err
		}
		total = n
		if len(page) == 0 {
			break
		}
		offset += len(page)
		for subj := range page {
			if id := subj[strings.LastIndexByte(subj, '.')+1:]; id > params.After {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return core.FindPage(ids, params, func(page []string) ([]*core.Job, error) {
		got := make([]*core.Job, len(page))
		now := s.now()
		err := s.each(ctx, len(page), func(i int) error {
			m, err := s.load(ctx, page[i])
			if err == nil && m != nil {
				got[i] = m.view(now)
			}
			return err
		})
		return got, err
	})
}
