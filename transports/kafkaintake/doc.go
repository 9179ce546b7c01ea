// Package kafkaintake is delayq's intake from Kafka, as docs/api.md's
// Kafka intake section describes: an Intake that consumes one Kafka topic
// in a consumer group and makes each record a push (or, with a
// Delayq-Cancel header, a cancel), in the form NATS intake takes: the
// record's value is the job's body, its headers the job's fields
// (package wire's), Delayq-Topic its delayq topic; or, with
// Delayq-Format: json, the value is the whole job in the JSON form of POST
// /v1/jobs, decoded by wire.DecodeJob as that route's body is.
//
// # Durability and no duplicates
//
// A record's offset is committed only once its job is stored (or its
// cancel done, or the record is on the dead topic), so a crash or a
// rebalance reads the record again. Each job has the id the record gives
// (Delayq-Id) or one derived from the record's Kafka topic, partition and
// offset (RecordID), so that a second read is a conflict, which counts as
// done when the job that holds the id has the record's topic and body. A
// keyed record of a topic with unique keys gets its key's id instead, which
// dedups it alike.
//
// # Bad records
//
// A record that fails validation never blocks its partition: it goes to the
// dead topic (Config.DeadTopic) with the error in the delayq-error header,
// and is counted by delayq.kafka.intake.dead.records. A failure of the
// store is not the record's: the batch is retried until it passes or the
// intake stops, without a commit.
//
// Kafka intake has no tokens: who may produce to the intake topic is the
// Kafka cluster's ACL.
package kafkaintake
