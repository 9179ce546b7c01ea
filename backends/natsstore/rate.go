package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/delayq/delayq/core"
)

// keyRate is the topic bucket's key of a topic's rate limit: its
// core.Bucket as JSON, shared by every instance.
const keyRate = "rate."

// TakeRate implements core.Store: the topic's bucket is read and written
// back with a compare-and-set on its revision (again when another instance
// wrote it meanwhile), on this store's clock: two operations per call, and
// none for topics without a limit. A claim that took fewer jobs than
// tokens gives them back with two more. Errors: ErrInvalidArgument,
// ErrClosed, ErrUnavailable.
func (s *Store) TakeRate(ctx context.Context, params *core.TakeRateParams) (core.TakeRateResult, error) {
	if err := core.CheckRate(params); err != nil {
		return core.TakeRateResult{}, err
	}
	if s.isClosed() {
		return core.TakeRateResult{}, core.ErrClosed
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	key := keyRate + params.Topic
	for range maxTries {
		var b core.Bucket
		var rev uint64
		e, err := s.kv.Get(ctx, key)
		switch {
		case err == nil:
			if err := json.Unmarshal(e.Value(), &b); err != nil {
				return core.TakeRateResult{}, fmt.Errorf("natsstore: rate of %q: %w", params.Topic, err)
			}
			rev = e.Revision()
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return core.TakeRateResult{}, unavailable("take rate", err)
		}
		res := b.Take(params.Rate, params.Want, s.now())
		data, _ := json.Marshal(b)
		if rev == 0 {
			_, err = s.kv.Create(ctx, key, data)
		} else {
			_, err = s.kv.Update(ctx, key, data, rev)
		}
		switch {
		case err == nil:
			return res, nil
		case errors.Is(err, jetstream.ErrKeyExists) || isWrongSeq(err):
			continue // another instance took meanwhile
		default:
			return core.TakeRateResult{}, unavailable("take rate", err)
		}
	}
	return core.TakeRateResult{}, unavailable("take rate", fmt.Errorf("rate of %q changed %d times in a row", params.Topic, maxTries))
}
