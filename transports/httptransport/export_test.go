package httptransport

import (
	"encoding/json"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// Exports for the fuzz tests of package httptransport_test.
var (
	DecodeJobRequest = wire.DecodeJob
	DecodeBatch      = decodeBatch
	DecodeAckBatch   = decodeAckBatch
	DecodeNackBatch  = decodeNackBatch
	ParseDuration    = parseDuration
	ParseTime        = parseTime
	AppendJob        = appendJob
	AppendString     = appendString
	NewTopicView     = newTopicView
	NewScheduleView  = newScheduleView
)

// JobParams is the push parameters of a job decoded by DecodeBatch.
func JobParams(req *wire.JobRequest) (*core.PushParams, error) { return req.Params() }

// CountItems counts the elements of a valid JSON array.
var CountItems = countItems

// AckItemAt is ack i of a list decoded by DecodeAckBatch.
func AckItemAt(items []*ackItem, raw []json.RawMessage, i int) (*ackItem, error) {
	return itemAt("acks", items, raw, i)
}

// NackItemAt is nack i of a list decoded by DecodeNackBatch.
func NackItemAt(items []*nackItem, raw []json.RawMessage, i int) (*nackItem, error) {
	return itemAt("nacks", items, raw, i)
}

// NackParams is the engine's parameters of a nack decoded by DecodeNackBatch.
func NackParams(it *nackItem) (*core.NackParams, error) { return it.params() }
