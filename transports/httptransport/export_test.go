package httptransport

// Exports for the fuzz tests of package httptransport_test.
var (
	DecodeJobRequest = decodeJobRequest
	ParseDuration    = parseDuration
	ParseTime        = parseTime
	AppendJob        = appendJob
	AppendString     = appendString
)
