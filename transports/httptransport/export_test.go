package httptransport

import "github.com/delayq/delayq/core"

// Exports for the fuzz tests of package httptransport_test.
var (
	DecodeJobRequest = decodeJobRequest
	DecodeBatch      = decodeBatch
	ParseDuration    = parseDuration
	ParseTime        = parseTime
	AppendJob        = appendJob
	AppendString     = appendString
	NewTopicView     = newTopicView
)

// JobParams is the push parameters of a job decoded by DecodeBatch.
func JobParams(req *jobRequest) (*core.PushParams, error) { return req.params() }
