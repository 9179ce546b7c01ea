package connecttransport_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/transports/connecttransport"
	"github.com/delayq/delayq/transports/httptransport"
)

// fuzzMethod is a method the fuzz targets call: its request and response
// types, and the check that what a success answered is readable back.
type fuzzMethod struct {
	name     string
	stream   bool // client streaming (Import): a Connect call is enveloped
	request  func() proto.Message
	response func() proto.Message
	// seed is a valid request.
	seed proto.Message
	// check reads back, through the engine, what the accepted request req
	// stored according to its answer res.
	check func(t *testing.T, e *core.Engine, req, res proto.Message)
}

// fuzzMethods are the methods that decode what a producer or an admin
// sends: jobs, batches, topics, schedules and imports.
var fuzzMethods = []fuzzMethod{
	{
		name:     "Push",
		request:  func() proto.Message { return &delayqv1.PushRequest{} },
		response: func() proto.Message { return &delayqv1.PushResponse{} },
		seed: &delayqv1.PushRequest{Job: &delayqv1.JobSpec{Topic: "orders.close", Body: `{"order":42}`, Delay: "15m",
			Id: "o-42", Ttr: "30s", MaxAttempts: proto.Int32(5), Key: "order-42", Priority: -2,
			Backoff: &delayqv1.JobBackoff{Delays: []string{"1s", "1m"}}}},
		check: func(t *testing.T, e *core.Engine, _, res proto.Message) {
			requireJob(t, e, res.(*delayqv1.PushResponse).GetId())
		},
	},
	{
		name:     "Replace",
		request:  func() proto.Message { return &delayqv1.ReplaceRequest{} },
		response: func() proto.Message { return &delayqv1.PushResponse{} },
		seed:     &delayqv1.ReplaceRequest{Job: &delayqv1.JobSpec{Id: "r-1", Topic: "mail", RunAt: "2026-11-21T10:00:00.250Z", Body: "[1,2]"}},
		check: func(t *testing.T, e *core.Engine, _, res proto.Message) {
			requireJob(t, e, res.(*delayqv1.PushResponse).GetId())
		},
	},
	{
		name:     "PushBatch",
		request:  func() proto.Message { return &delayqv1.PushBatchRequest{} },
		response: func() proto.Message { return &delayqv1.PushBatchResponse{} },
		seed: &delayqv1.PushBatchRequest{Jobs: []*delayqv1.JobSpec{
			{Topic: "mail", Body: `"hi"`}, {Topic: "mail", Delay: "1h", Id: "b-1"}, {Topic: "", Delay: "x"},
		}},
		check: func(t *testing.T, e *core.Engine, req, res proto.Message) {
			results := res.(*delayqv1.PushBatchResponse).GetResults()
			require.Len(t, results, len(req.(*delayqv1.PushBatchRequest).GetJobs()), "one result per job")
			for _, r := range results {
				require.True(t, (r.GetJob() == nil) != (r.GetError() == nil), "exactly one of job and error: %v", r)
				if r.GetJob() != nil {
					requireJob(t, e, r.GetJob().GetId())
				} else {
					requireNotInternal(t, r.GetError().GetCode())
				}
			}
		},
	},
	{
		name:     "PutTopic",
		request:  func() proto.Message { return &delayqv1.PutTopicRequest{} },
		response: func() proto.Message { return &delayqv1.PutTopicResponse{} },
		seed: &delayqv1.PutTopicRequest{Name: "orders.close", Config: &delayqv1.TopicConfig{Ttr: "1m", MaxAttempts: 5,
			Backoff: &delayqv1.BackoffConfig{}, UniqueKeys: "reject", MaxInFlight: 10}},
		check: func(t *testing.T, e *core.Engine, _, res proto.Message) {
			name := res.(*delayqv1.PutTopicResponse).GetTopic().GetName()
			_, err := e.GetTopic(context.Background(), name)
			require.NoError(t, err, "topic %q accepted but not readable", name)
		},
	},
	{
		name:     "PutSchedule",
		request:  func() proto.Message { return &delayqv1.PutScheduleRequest{} },
		response: func() proto.Message { return &delayqv1.PutScheduleResponse{} },
		seed: &delayqv1.PutScheduleRequest{Name: "nightly", Schedule: &delayqv1.ScheduleConfig{Cron: "30 2 * * *",
			TimeZone: "Europe/Paris", Topic: "reports", Missed: "last"}},
		check: func(t *testing.T, e *core.Engine, _, res proto.Message) {
			name := res.(*delayqv1.PutScheduleResponse).GetSchedule().GetName()
			_, err := e.GetSchedule(context.Background(), name)
			require.NoError(t, err, "schedule %q accepted but not readable", name)
		},
	},
	{
		name:     "Import",
		stream:   true,
		request:  func() proto.Message { return &delayqv1.ImportRequest{} },
		response: func() proto.Message { return &delayqv1.ImportResponse{} },
		seed: &delayqv1.ImportRequest{Jobs: []*delayqv1.Job{
			{Id: "i-1", Topic: "mail", State: "scheduled", RunAt: "2026-11-21T10:00:00Z", Ttr: "30s", MaxAttempts: 3,
				CreatedAt: "2026-11-20T10:00:00Z", Body: `{"n":1}`},
			{Id: "i-2", Topic: "mail", State: "dead", RunAt: "2026-11-21T10:00:00Z", Ttr: "30s", MaxAttempts: 1, Attempt: 1,
				LastError: "status 503", History: []*delayqv1.Attempt{{Attempt: 1, StartedAt: "2026-11-21T10:00:00Z",
					EndedAt: "2026-11-21T10:00:01Z", Via: "webhook", Outcome: "buried", Error: "status 503"}}},
		}},
		check: func(t *testing.T, e *core.Engine, req, res proto.Message) {
			ir := res.(*delayqv1.ImportResponse)
			failed := map[int64]bool{}
			for _, f := range ir.GetErrors() {
				requireNotInternal(t, f.GetError().GetCode())
				failed[f.GetIndex()] = true
			}
			im := req.(*delayqv1.ImportRequest)
			require.Equal(t, int64(len(im.GetJobs())+len(im.GetSchedules())), ir.GetImported()+ir.GetSkipped()+ir.GetFailed(), "every item counted once")
			for i, j := range im.GetJobs() {
				if !failed[int64(len(im.GetSchedules())+i+1)] {
					requireJob(t, e, j.GetId()) // imported, or skipped for an id in use
				}
			}
		},
	},
}

// requireJob checks that an accepted job is readable.
func requireJob(t *testing.T, e *core.Engine, id string) {
	t.Helper()
	require.NotEmpty(t, id)
	_, err := e.Get(context.Background(), id)
	require.NoError(t, err, "job %q accepted but not readable", id)
}

// internalCodes are the answers bad input must never get: they say the
// server failed.
var internalCodes = map[string]bool{"internal": true, "unknown": true, "data_loss": true}

// requireNotInternal checks a Connect (or delayq) error code.
func requireNotInternal(t *testing.T, code string) {
	t.Helper()
	require.False(t, internalCodes[code], "bad input answered %q", code)
}

// fuzzHandler returns the service's real HTTP handler (the HTTP API with
// the gRPC transport mounted on it, as delayq serve builds it) over an
// engine on the memory store, shared by every input of a target.
func fuzzHandler(f *testing.F) (http.Handler, *core.Engine) {
	mem := memstore.New(memstore.Config{})
	log := slog.New(slog.DiscardHandler)
	engine, err := core.NewEngine(core.EngineConfig{Store: mem, Logger: log})
	require.NoError(f, err)
	tokens, err := auth.NewTokens(nil)
	require.NoError(f, err)
	gs, err := connecttransport.New(connecttransport.Config{Engine: engine, Logger: log, Tokens: tokens})
	require.NoError(f, err)
	api := httptransport.New(httptransport.Config{Engine: engine, Logger: log, Tokens: tokens})
	gs.Register(api)
	f.Cleanup(func() {
		require.NoError(f, gs.Stop(context.Background()))
		require.NoError(f, mem.Close())
	})
	return api, engine
}

// gzipped compresses b.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// envelope frames a message as gRPC and Connect streams do: a flags byte,
// the length, the data.
func envelope(flags byte, data []byte) []byte {
	b := binary.BigEndian.AppendUint32([]byte{flags}, uint32(len(data)))
	return append(b, data...)
}

// readEnvelopes splits an enveloped body into its messages, gunzipping
// compressed ones.
func readEnvelopes(t *testing.T, body []byte) (flags []byte, msgs [][]byte) {
	t.Helper()
	for len(body) > 0 {
		require.GreaterOrEqual(t, len(body), 5, "truncated envelope")
		n := int(binary.BigEndian.Uint32(body[1:5]))
		require.GreaterOrEqual(t, len(body)-5, n, "truncated envelope")
		data := body[5 : 5+n]
		if body[0]&1 != 0 {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			require.NoError(t, err)
			data, err = io.ReadAll(zr)
			require.NoError(t, err)
		}
		flags, msgs = append(flags, body[0]), append(msgs, data)
		body = body[5+n:]
	}
	return flags, msgs
}

// grpcCodeNames are gRPC status numbers by Connect code name.
var grpcCodeNames = map[int]string{0: "ok", 2: "unknown", 13: "internal", 15: "data_loss"}

// FuzzGRPCRequest sends arbitrary bytes as the protobuf message of a gRPC
// call (in a well-formed envelope, gzip-compressed with grpc-encoding gzip
// or not) of a method that decodes jobs, topics, schedules or imports,
// through the service's real HTTP handler. Bad input must never panic or
// get an internal error, and what a success answers must be readable
// through the engine.
func FuzzGRPCRequest(f *testing.F) {
	h, engine := fuzzHandler(f)
	for i, m := range fuzzMethods {
		data, err := proto.Marshal(m.seed)
		require.NoError(f, err)
		f.Add(uint8(i), false, data)
		f.Add(uint8(i), true, data)
	}
	f.Add(uint8(0), false, []byte{0x0a, 0x80, 0x80, 0x80, 0x80, 0x10}) // a length past the end
	f.Fuzz(func(t *testing.T, which uint8, compress bool, data []byte) {
		m := fuzzMethods[int(which)%len(fuzzMethods)]
		body := envelope(0, data)
		if compress {
			body = envelope(1, gzipped(data))
		}
		req := httptest.NewRequest(http.MethodPost, "/delayq.v1.DelayqService/"+m.name, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		if compress {
			req.Header.Set("Grpc-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		require.Equal(t, http.StatusOK, res.StatusCode, "gRPC answers 200: %s", rec.Body)
		st := res.Trailer.Get("Grpc-Status")
		if st == "" {
			st = res.Header.Get("Grpc-Status") // a trailers-only answer
		}
		code, err := strconv.Atoi(st)
		require.NoError(t, err, "grpc-status %q", st)
		name, bad := grpcCodeNames[code]
		require.True(t, !bad || code == 0, "bad input answered %s (%d): %s", name, code,
			res.Trailer.Get("Grpc-Message")+res.Header.Get("Grpc-Message"))
		if code != 0 {
			return
		}
		in := m.request()
		require.NoError(t, proto.Unmarshal(data, in), "accepted what does not decode")
		_, msgs := readEnvelopes(t, rec.Body.Bytes())
		require.Len(t, msgs, 1)
		out := m.response()
		require.NoError(t, proto.Unmarshal(msgs[0], out))
		m.check(t, engine, in, out)
	})
}

// FuzzConnectJSONRequest sends arbitrary bytes as the JSON message of a
// Connect call (unary, or one envelope of Import's client stream), with
// Content-Encoding gzip (Connect-Content-Encoding for the stream) or
// without, of the methods of FuzzGRPCRequest, with the same property.
func FuzzConnectJSONRequest(f *testing.F) {
	h, engine := fuzzHandler(f)
	for i, m := range fuzzMethods {
		data, err := protojson.Marshal(m.seed)
		require.NoError(f, err)
		f.Add(uint8(i), false, data)
		f.Add(uint8(i), true, data)
	}
	f.Add(uint8(0), false, []byte(`{"job":{"topic":"t","maxAttempts":0,"unknown":1}}`))
	f.Add(uint8(2), false, []byte(`{"jobs":[{"topic":"t","delay":"1h"},null]}`))
	f.Add(uint8(5), false, []byte{}) // an import of no job, as an empty envelope
	f.Fuzz(func(t *testing.T, which uint8, compress bool, data []byte) {
		m := fuzzMethods[int(which)%len(fuzzMethods)]
		body := data
		if compress {
			body = gzipped(data)
		}
		contentType := "application/json"
		if m.stream {
			contentType = "application/connect+json"
			flags := byte(0)
			if compress {
				flags = 1
			}
			body = envelope(flags, body)
		}
		req := httptest.NewRequest(http.MethodPost, "/delayq.v1.DelayqService/"+m.name, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Connect-Protocol-Version", "1")
		if compress && m.stream {
			req.Header.Set("Connect-Content-Encoding", "gzip")
		} else if compress {
			req.Header.Set("Content-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Less(t, rec.Code, http.StatusInternalServerError, "bad input answered %d: %s", rec.Code, rec.Body)

		answer := rec.Body.Bytes()
		if rec.Header().Get("Content-Encoding") == "gzip" { // the answer as the request came
			zr, err := gzip.NewReader(bytes.NewReader(answer))
			require.NoError(t, err)
			answer, err = io.ReadAll(zr)
			require.NoError(t, err)
		}
		if m.stream {
			require.Equal(t, http.StatusOK, rec.Code, "a Connect stream answers 200: %s", answer)
			flags, msgs := readEnvelopes(t, answer)
			require.NotEmpty(t, msgs)
			require.Equal(t, byte(2), flags[len(flags)-1]&2, "the stream ends with an end-stream message")
			var end struct {
				Error *struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(msgs[len(msgs)-1], &end))
			if end.Error != nil {
				requireNotInternal(t, end.Error.Code)
				return
			}
			require.Len(t, msgs, 2, "one answer, then the end of the stream")
			answer = msgs[0]
		} else if rec.Code != http.StatusOK {
			var e struct {
				Code string `json:"code"`
			}
			require.NoError(t, json.Unmarshal(answer, &e), "%s", answer)
			require.NotEmpty(t, e.Code)
			requireNotInternal(t, e.Code)
			return
		}
		in := m.request()
		if len(data) > 0 { // an empty envelope is the zero message
			require.NoError(t, protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, in), "accepted what does not decode")
		}
		out := m.response()
		require.NoError(t, protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(answer, out), "%s", answer)
		m.check(t, engine, in, out)
	})
}
