package core

import (
	"context"
	"time"
)

// FollowDeaths runs one round of dead-letter notices, as the refresh loop
// does every TopicRefresh, for tests on a fake clock.
func (e *Engine) FollowDeaths(ctx context.Context) { e.notices.follow(ctx) }

// FireSchedules runs one round of the schedule loop, for tests on a fake
// clock: it fires what is due and returns how long the loop would wait.
func (e *Engine) FireSchedules(ctx context.Context) time.Duration { return e.schedules.fireDue(ctx) }

// FollowFinished runs one round of job events, as the refresh loop does
// every TopicRefresh, for tests on a fake clock.
func (e *Engine) FollowFinished(ctx context.Context) { e.events.follow(ctx) }
