// Package kafkatransport is delayq's Kafka delivery, as docs/api.md's
// Kafka section describes: a Deliverer that produces each due job of a
// topic configured with {"delivery": {"type": "kafka", "kafka_topic": K}}
// as one record to the Kafka topic K.
//
// A record's key is the job's key, or its id when it has none; its value
// is the job's body as pushed; its headers are
//
//	delayq-id       the job's id
//	delayq-topic    the job's delayq topic
//	delayq-attempt  the 1-based attempt
//	delayq-run-at   the job's run_at, RFC 3339 with milliseconds in UTC
//	traceparent     the W3C trace context of the push, when it had one
//
// The delivery succeeds when the brokers acknowledge the record. The
// client is the caller's (kafkaclient.Config.NewClient with ProducerOpts):
// acks from every in-sync replica and an idempotent producer, franz-go's
// defaults, stated by ProducerOpts. Deliveries of many jobs share the
// client, which batches their records per partition; each Deliver waits
// only for its own record.
package kafkatransport
