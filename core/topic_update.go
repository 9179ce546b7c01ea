package core

import (
	"context"
	"errors"
	"fmt"
)

// UpdateTopic changes the configuration of the topic called name: change
// gets the configuration as stored (empty for a topic with jobs but none)
// and returns the new one, which is validated as PutTopic validates. The
// read and the write are one compare-and-set on the topic's record: when
// another write came between, change is called again on what it wrote.
// Errors: ErrNotFound for a topic with neither jobs nor configuration,
// change's, PutTopic's.
func (e *Engine) UpdateTopic(ctx context.Context, name string, change func(*Topic) (*Topic, error)) error {
	if ValidateTopicName(name) != nil {
		return ErrNotFound
	}
	for range casTries {
		cur, rev := &Topic{Name: name}, uint64(0)
		r, err := e.store.GetRecord(ctx, KindTopic, name)
		switch {
		case err == nil:
			if cur, err = decodeTopic(r); err != nil {
				return err
			}
			cur.Configured, rev = false, r.Revision
		case !errors.Is(err, ErrNotFound):
			return err
		default:
			st, err := e.store.GetTopicState(ctx, name)
			if err != nil {
				return err
			}
			if _, err := withState(nil, st, name); err != nil {
				return err
			}
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		next.Name = name
		if err := e.checkTopic(next); err != nil {
			return err
		}
		stored := *next
		stored.Configured = true
		err = writeTopic(ctx, e.store, &stored, rev)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return err
		}
		e.cacheTopics(map[string]*Topic{name: &stored}, false)
		return nil
	}
	return fmt.Errorf("topic %q: %w: changed %d times in a row", name, ErrConflict, casTries)
}
