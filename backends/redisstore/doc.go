// Package redisstore is the Redis core.Store of delayq.
package redisstore
