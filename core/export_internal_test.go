package core

import "context"

// TellDeaths runs one round of dead-letter notices, as the refresh loop
// does every TopicRefresh, for tests on a fake clock.
func (e *Engine) TellDeaths(ctx context.Context) { e.tellDeaths(ctx) }
