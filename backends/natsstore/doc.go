// Package natsstore is the NATS JetStream core.Store of delayq.
package natsstore
