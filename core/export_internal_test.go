package core

import (
	"context"
	"time"
)

// TellDeaths runs one round of dead-letter notices, as the refresh loop
// does every TopicRefresh, for tests on a fake clock.
func (e *Engine) TellDeaths(ctx context.Context) { e.tellDeaths(ctx) }

// FireSchedules runs one round of the schedule loop, for tests on a fake
// clock: it fires what is due and returns how long the loop would wait.
func (e *Engine) FireSchedules(ctx context.Context) time.Duration { return e.fireSchedules(ctx) }
