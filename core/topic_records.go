package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Topic configurations are metadata records of KindTopic (Store.PutRecord):
// the Topic as JSON, without its counts and pause, which are the store's
// (TopicState). The engine merges the two, so that a new per-topic setting
// needs no store code.

// TopicObserver is an optional capability of the store an engine is given
// or of one it wraps (a decorator's, such as telemetry's, found through
// Unwrap): the engine tells it the topic configurations it applies, with
// their defaults, each time it reads or changes them, so that it labels
// what it records by delivery type.
type TopicObserver interface {
	// ObserveTopics reports every configured topic by name; the map is
	// the observer's.
	ObserveTopics(topics map[string]*Topic)
}

// LegacyTopics is an optional capability of a store that kept topic
// configurations in a format of its own before they were records:
// MigrateTopics moves them to records. Stores keep it until the release
// after the one that moved topic configurations to records.
type LegacyTopics interface {
	// LegacyTopics returns the topic configurations kept in the earlier
	// format.
	LegacyTopics(ctx context.Context) ([]*Topic, error)
	// DropLegacyTopics deletes the named configurations of the earlier
	// format. Idempotent.
	DropLegacyTopics(ctx context.Context, names []string) error
}

// MigrateTopics moves the topic configurations a store kept in its earlier
// format (LegacyTopics, looked for through decorators' Unwrap) to records
// and drops them from the earlier format; a topic that already has a
// record keeps the record. It returns how many it moved; none for a store
// without the capability. Idempotent: instances starting together move
// each configuration once. Errors: those of the store.
func MigrateTopics(ctx context.Context, store Store) (int, error) {
	legacy, ok := capability[LegacyTopics](store)
	if !ok {
		return 0, nil
	}
	old, err := legacy.LegacyTopics(ctx)
	if err != nil || len(old) == 0 {
		return 0, err
	}
	moved := 0
	names := make([]string, 0, len(old))
	for _, t := range old {
		err := writeTopic(ctx, store, t, 0)
		switch {
		case err == nil:
			moved++
		case !errors.Is(err, ErrConflict): // a conflict: moved already
			return moved, fmt.Errorf("migrate topic %q: %w", t.Name, err)
		}
		names = append(names, t.Name)
	}
	return moved, legacy.DropLegacyTopics(ctx, names)
}

// migrateTopics runs MigrateTopics once per engine, until it succeeds.
func (e *Engine) migrateTopics(ctx context.Context) {
	if e.topicsMigrated.Load() {
		return
	}
	n, err := MigrateTopics(ctx, e.store)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("engine: moving topic configurations to records failed; retrying", "err", err)
		}
		return
	}
	if n > 0 {
		e.log.Info("engine: moved topic configurations of the earlier format to records", "topics", n)
	}
	e.topicsMigrated.Store(true)
}

// writeTopic stores t's configuration if its record has the revision rev
// (0: if there is none). Errors: ErrConflict, those of the store.
func writeTopic(ctx context.Context, store Store, t *Topic, rev uint64) error {
	c := *t
	c.Configured = true
	data, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("topic %q: %w", t.Name, err)
	}
	_, err = store.PutRecord(ctx, &PutRecordParams{Kind: KindTopic, Name: t.Name, Value: data, Revision: rev})
	return err
}

// decodeTopic reads a topic configuration from its record.
func decodeTopic(r *Record) (*Topic, error) {
	var t Topic
	if err := json.Unmarshal(r.Value, &t); err != nil {
		return nil, fmt.Errorf("topic %q: bad record: %w", r.Name, err)
	}
	t.Name, t.Configured = r.Name, true
	return &t, nil
}

// putTopic stores t's configuration in place of any, by compare-and-set on
// the revision read, so that it applies whole whatever other instances
// write meanwhile (the last put wins). Errors: those of the store.
func putTopic(ctx context.Context, store Store, t *Topic) error {
	for range casTries {
		var rev uint64
		r, err := store.GetRecord(ctx, KindTopic, t.Name)
		switch {
		case err == nil:
			rev = r.Revision
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if err = writeTopic(ctx, store, t, rev); !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("topic %q: %w: changed %d times in a row", t.Name, ErrConflict, casTries)
}

// deleteTopic drops a topic's configuration record by compare-and-set.
// Errors: ErrNotFound when there is none, those of the store.
func deleteTopic(ctx context.Context, store Store, name string) error {
	for range casTries {
		r, err := store.GetRecord(ctx, KindTopic, name)
		if err != nil {
			return err
		}
		err = store.DeleteRecord(ctx, &DeleteRecordParams{Kind: KindTopic, Name: name, Revision: r.Revision})
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("topic %q: %w: changed %d times in a row", name, ErrConflict, casTries)
}

// listTopicConfigs reads every topic configuration, sorted by name.
func listTopicConfigs(ctx context.Context, store Store) ([]*Topic, error) {
	recs, err := store.ListRecords(ctx, KindTopic)
	if err != nil {
		return nil, err
	}
	out := make([]*Topic, 0, len(recs))
	for _, r := range recs {
		t, err := decodeTopic(r)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// readTopic returns a topic's configuration with its state: ErrNotFound
// when it has no configuration, is not paused and counts no job.
func readTopic(ctx context.Context, store Store, name string) (*Topic, error) {
	var t *Topic
	r, err := store.GetRecord(ctx, KindTopic, name)
	switch {
	case err == nil:
		if t, err = decodeTopic(r); err != nil {
			return nil, err
		}
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	st, err := store.GetTopicState(ctx, name)
	if err != nil {
		return nil, err
	}
	return withState(t, st, name)
}

// withState returns t (nil: not configured) with the state st of the
// topic name; ErrNotFound for a topic neither configured, paused nor
// counting jobs.
func withState(t *Topic, st TopicState, name string) (*Topic, error) {
	if t == nil {
		if !st.Paused && st.Counts == (Counts{}) {
			return nil, fmt.Errorf("topic %q: %w", name, ErrNotFound)
		}
		t = &Topic{Name: name}
	}
	t.Paused, t.Counts = st.Paused, st.Counts
	return t, nil
}

// listTopics returns every topic configured, paused or counting jobs, with
// its state, sorted by name.
func listTopics(ctx context.Context, store Store) ([]*Topic, error) {
	configs, err := listTopicConfigs(ctx, store)
	if err != nil {
		return nil, err
	}
	states, err := store.ListTopicStates(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]TopicState, len(states))
	names := make([]string, 0, len(configs)+len(states))
	for _, st := range states {
		byName[st.Name] = st
		names = append(names, st.Name)
	}
	config := make(map[string]*Topic, len(configs))
	for _, t := range configs {
		config[t.Name] = t
		names = append(names, t.Name)
	}
	slices.Sort(names)
	out := []*Topic{}
	for _, name := range slices.Compact(names) {
		if t, err := withState(config[name], byName[name], name); err == nil {
			out = append(out, t)
		}
	}
	return out, nil
}
