package httptransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/coretest"
	"github.com/delayq/delayq/transports/httptransport"
)

// requireFieldError checks that err is a validation error naming field
// (any field when field is "*").
func requireFieldError(t *testing.T, err error, field string) {
	t.Helper()
	fe, ok := errors.AsType[*core.FieldError](err)
	require.True(t, ok, "%T %v", err, err)
	require.NotEmpty(t, fe.Message)
	require.True(t, errors.Is(err, core.ErrInvalidArgument) || errors.Is(err, core.ErrTooLarge), "%v", err)
	if field != "*" {
		require.Equal(t, field, fe.Field)
	}
}

// acceptStore takes every job and stores nothing, so that fuzzing runs the
// engine's validation without growing.
type acceptStore struct{ core.Store }

func (acceptStore) PutJobs(_ context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	return make([]core.PutResult, len(p.Jobs)), nil
}

// AckJobs settles nothing and finds every ack's job missing.
func (acceptStore) AckJobs(_ context.Context, p *core.AckJobsParams) ([]core.AckResult, error) {
	res := make([]core.AckResult, len(p.Acks))
	for i := range res {
		res[i].Err = core.ErrNotFound
	}
	return res, nil
}

// GetJob finds no job, so that a nack is validated and then not found.
func (acceptStore) GetJob(context.Context, string) (*core.Job, error) { return nil, core.ErrNotFound }

// GetRecord finds every record, so that a push with then finds the cursor
// of finished jobs made.
func (acceptStore) GetRecord(context.Context, string, string) (*core.Record, error) {
	return &core.Record{}, nil
}

func FuzzDecodeJobRequest(f *testing.F) {
	for _, seed := range []string{
		`{"topic":"orders.close","body":{"order":42},"delay":"15m","id":"optional-client-id","ttr":"30s","max_attempts":10,"key":"order-42"}`,
		`{"topic":"t","delay":1500}`,
		`{"topic":"t","run_at":"2026-11-21T10:00:00.250Z"}`,
		`{"topic":"t","run_at":"2026-11-21T10:00:00+02:00","body":"<&>"}`,
		`{"topic":"t","body":null,"delay":null,"run_at":null,"ttr":null}`,
		`{"topic":"t","delay":"1s","run_at":"2026-11-21T10:00:00Z"}`,
		`{"topic":"t","delay":-9223372036854775808}`,
		`{"topic":"t","delay":"9999999999h"}`,
		`{"topic":"t","ttr":1e3}`,
		`{"topic":"t","max_attempts":1e40}`,
		`{"topic":"t","unknown":1}`,
		`{"topic":"t"} x`,
		`{"topic":"t","body":{"a":[1,2,{"b":"\u00e9\ud800"}]}}`,
		`{"topic":"t","key":"\u0000"}`,
		"{\"topic\":\"t\",\"key\":\"k\xff\",\"body\":\"\xc3\x28\"}",
		`{"topic":"t","ttr":"0s","max_attempts":0}`,
		`{"topic":"t","backoff":{"delays":["1m",180000,"0s"]}}`,
		`{"topic":"t","priority":-10}`,
		`{"topic":"t","url":"https://svc/own?x=1"}`,
		`{"topic":"t","url":["x"]}`,
		`{"topic":"t","priority":1e3}`,
		`{"topic":"t","backoff":{"delays":[null,-1,"169h"],"initial":"1s"}}`,
		`{"topic":"t","backoff":null}`,
		`{"topic":"t","then":{"topic":"u","delay":"30m","key":"k","body":{ "a" : 1 },"then":{"topic":"v","run_at":"2026-01-01T10:00:00.123456789Z"}}}`,
		`{"topic":"t","then":{"topic":"u","id":"x","then":null}}`,
		`{"topic":"t","then":{"topic":"u","ttr":"1.5s","backoff":{"delays":["1s"]},"expires_in":"1h","max_attempts":2,"priority":-1,"url":"https://svc/own"}}`,
		`{"topic":"t","then":{"then":{"then":{"topic":"w","bogus":1}}}}`,
		`{"topic":"t","then":[]}`,
		`[]`, `null`, ``, `{`, `"`, ` {"topic":"t"} `,
	} {
		f.Add([]byte(seed))
	}
	clock := coretest.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	engine, err := core.NewEngine(core.EngineConfig{Store: acceptStore{}, Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := httptransport.DecodeJobRequest(data)
		if err != nil {
			require.Nil(t, p)
			requireFieldError(t, err, "*")
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			return
		}
		require.NotNil(t, p)
		// What the engine takes without scanning again (BodyChecked).
		require.True(t, p.BodyChecked)
		require.True(t, len(p.Body) == 0 || json.Valid(p.Body), "body %q", p.Body)
		require.True(t, utf8.Valid(p.Body) && utf8.ValidString(p.Key), "body %q, key %q", p.Body, p.Key)
		require.False(t, p.Delay != nil && p.RunAt != nil)

		// The engine takes the request or refuses it with a field error.
		job, err := engine.Push(t.Context(), p)
		if err != nil {
			requireFieldError(t, err, "*")
			return
		}
		if len(p.Body) > 0 {
			require.Equal(t, string(p.Body), string(job.Body))
		}
		out := httptransport.AppendJob(nil, job)
		require.True(t, json.Valid(out), "%s", out)
		if job.Then == nil {
			return
		}
		// The next step as GET shows it is a push's then that reads back
		// as the step the job keeps.
		var shown struct{ Then json.RawMessage }
		require.NoError(t, json.Unmarshal(out, &shown))
		again, err := httptransport.DecodeJobRequest([]byte(`{"topic":"t","then":` + string(shown.Then) + `}`))
		require.NoError(t, err, "%s", shown.Then)
		want, err := json.Marshal(job.Then)
		require.NoError(t, err)
		got, err := json.Marshal(again.Then)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got))
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, seed := range []string{
		`"1500ms"`, `"2h"`, `"-1s"`, `"0"`, `""`, `"1.5h"`, `"1h2m3.5s"`, `"9999999999h"`, `"\u0031s"`,
		`1500`, `-1`, `0`, `-0`, `1.5`, `1e3`, `9223372036854775807`, `99999999999999999999`,
		`null`, ``, ` 5 `, `true`, `{}`, `[1]`, `"1s`, `+5`, `01`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		d, ok, err := httptransport.ParseDuration("delay", json.RawMessage(raw))
		if err != nil {
			require.False(t, ok)
			requireFieldError(t, err, "delay")
			return
		}
		if !ok {
			require.Zero(t, d)
			return
		}
		// A decoded duration reads back the same in either form.
		back, ok, err := httptransport.ParseDuration("delay", json.RawMessage(strconv.Quote(d.String())))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, d, back)
		if d%time.Millisecond == 0 {
			back, _, err = httptransport.ParseDuration("delay", json.RawMessage(strconv.FormatInt(d.Milliseconds(), 10)))
			require.NoError(t, err)
			require.Equal(t, d, back)
		}
	})
}

func FuzzParseTime(f *testing.F) {
	for _, seed := range []string{
		`"2026-11-21T10:00:00.250Z"`, `"2026-11-21T10:00:00Z"`, `"2026-11-21T10:00:00+02:00"`,
		`"2026-11-21T10:00:00.123456789-07:30"`, `"0000-01-01T00:00:00+23:59"`, `"9999-12-31T23:59:59.999Z"`,
		`"2026-02-30T00:00:00Z"`, `"2026-11-21 10:00:00Z"`, `"2026-11-21T10:00:00"`, `"2026-11-21T24:00:00Z"`,
		`1700000000`, `1732528800.250`, `-1.5`, `1.7e9`, `99999999999.9999999999`, `null`, ``, `""`, `"`, `{}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tm, ok, err := httptransport.ParseTime("run_at", json.RawMessage(raw))
		if err != nil {
			require.False(t, ok)
			requireFieldError(t, err, "run_at")
			return
		}
		if !ok {
			require.True(t, tm.IsZero())
			return
		}
		back, ok, err := httptransport.ParseTime("run_at", json.RawMessage(strconv.Quote(tm.Format(time.RFC3339Nano))))
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, tm.Equal(back), "%v != %v", tm, back)
	})
}

func FuzzAppendString(f *testing.F) {
	for _, seed := range []string{"", "plain", "quote\" back\\slash", "\n\r\t\x00\x1f\x7f", "<&>", "é\u2028\u2029", "\xff\xfe", "a\xc3"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := httptransport.AppendString(nil, s)
		require.True(t, json.Valid(out), "%q", out)
		var got string
		require.NoError(t, json.Unmarshal(out, &got))
		std, err := json.Marshal(s)
		require.NoError(t, err)
		var want string
		require.NoError(t, json.Unmarshal(std, &want))
		require.Equal(t, want, got)
	})
}

// FuzzDecodeBatch checks that the one-pass decoding of a well-formed batch
// gives each job exactly what decoding the job on its own gives.
func FuzzDecodeBatch(f *testing.F) {
	for _, seed := range []string{
		`{"jobs":[{"topic":"a","body":{"x":1},"delay":"1s"},{"topic":"b","run_at":"2026-11-21T10:00:00.250Z","id":"i","ttr":30000,"max_attempts":3,"key":"k"}]}`,
		`{"jobs":[{"topic":"a"},null]}`,
		`{"jobs":[{"topic":"a","url":"https://svc/own"},{"topic":"b","url":null}]}`,
		`{"jobs":[{"topic":"a"},{"topic":"b","nope":1}]}`,
		`{"jobs":[{"topic":"a","delay":"1s","run_at":"2026-11-21T10:00:00Z"}]}`,
		`{"jobs":[{"TOPIC":"a","Body":2}]}`,
		`{"jobs":[]}`, `{"jobs":null}`, `{}`, `{"jobs":[1,"x",[]]}`, `{"jobs":[{}]} x`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, raw, err := httptransport.DecodeBatch(data)
		if err != nil {
			require.Nil(t, jobs)
			require.Nil(t, raw)
			return
		}
		require.True(t, (jobs == nil) != (raw == nil), "exactly one of jobs and raw")
		if jobs == nil {
			return
		}
		var each struct{ Jobs []json.RawMessage }
		require.NoError(t, json.Unmarshal(data, &each))
		require.Len(t, each.Jobs, len(jobs))
		for i, j := range jobs {
			got, gotErr := httptransport.JobParams(j)
			want, wantErr := httptransport.DecodeJobRequest(each.Jobs[i])
			require.Equal(t, wantErr, gotErr, "job %d", i)
			require.Equal(t, want, got, "job %d", i)
		}
	})
}

// FuzzDecodeTopic checks the decoder of topic configurations (PUT
// /v1/topics/{topic} and the config file's topics): it never panics, refuses
// with field errors only, and what it takes either validates or is refused
// by validation with a field error, and answers as valid JSON.
func FuzzDecodeTopic(f *testing.F) {
	for _, seed := range []string{
		`{"delivery": {"type": "webhook", "url": "https://svc/hook", "timeout": "10s", "secret": "s3cr3t"}, "ttr": "30s", "max_attempts": 16, "backoff": {"initial": "1s", "max": "1h", "factor": 2, "jitter": 0.2}, "concurrency": 64}`,
		`{"delivery": {"type": "nats", "subject": "a.b"}}`,
		`{"unique_keys": "replace", "on_dead": "orders.dead"}`,
		`{"rate": {"limit": 100, "period": "1m", "burst": 10}, "max_in_flight": 5}`,
		`{"rate": {"limit": -1, "period": 1e9, "burst": "x"}}`,
		`{"unique_keys": ["reject"], "concurrency": 1}`,
		`{"delivery": {"type": "webhook", "url": "https://svc/hook", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "previous_secret": "old"}}`,
		`{"delivery": {"type": "webhook", "url": "https://svc/hook", "secret": "whsec_%%%", "previous_secret": "whsec_"}}`,
		`{"delivery": {"previous_secret": 1}}`,
		`{"delivery": {"type": "webhook", "url": "https://svc/hook", "allow_job_url": true}}`,
		`{"delivery": {"type": "nats", "allow_job_url": "yes"}}`,
		`{"delivery": {"type": "webhook", "url": "https://svc/hook", "method": "PATCH", "headers": {"Authorization": "Bearer x", "x-a": "1", "Host": "h"}}}`,
		`{"delivery": {"headers": {"bad name": "a\u0000b"}, "method": 1}}`,
		`{"delivery": {"type": "webhook", "url": "http://h/", "success": "status == 200 && body.code == 0"}}`,
		`{"name": "t", "delivery": null, "backoff": null}`,
		`{"name": "other"}`,
		`{"backoff": {"factor": 1e400}}`,
		`{"backoff": {"delays": ["1m", 180000, "0s", null, -1, "1e9h"]}}`,
		`{"backoff": {"delays": {"a": 1}}}`,
		`{"backoff": {"jitter": -1e308, "initial": -1}}`,
		`{"ttr": 1e30, "concurrency": -1}`,
		`{"delivery": {"type": "x", "unknown": 1}}`,
		`{"delivery": []}`, `[]`, `{}`, ``, `{`, "{\"delivery\":{\"url\":\"\xff\"}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		topic, err := httptransport.DecodeTopic("t", data)
		if err != nil {
			require.Nil(t, topic)
			requireFieldError(t, err, "*")
			return
		}
		require.Equal(t, "t", topic.Name)
		if err := topic.Validate(); err != nil {
			requireFieldError(t, err, "*")
			return
		}
		out, err := json.Marshal(httptransport.NewTopicView(topic))
		require.NoError(t, err)
		require.True(t, json.Valid(out), "%s", out)
	})
}

// fuzzBatchLimit is the most items of a batch the fuzz tests decode: small,
// so that the count of a longer list, which refuses it, is checked too.
const fuzzBatchLimit = 8

// requireDecodedItems checks what DecodeAckBatch or DecodeNackBatch
// answered for data: a refused request has a field error and no items, and
// otherwise each item is what decoding it on its own gives (itemAt of one
// item), a failure being a field error of that item alone.
func requireDecodedItems[T any](t *testing.T, data []byte, field string, items []*T, raw []json.RawMessage, err error,
	at func([]*T, []json.RawMessage, int) (*T, error),
) []*T {
	t.Helper()
	if err != nil {
		require.Nil(t, items)
		require.Nil(t, raw)
		requireFieldError(t, err, "*")
		if errors.Is(err, core.ErrTooLarge) {
			// Refused by count alone: the list is valid and too long.
			var each struct{ Acks, Nacks []json.RawMessage }
			require.NoError(t, json.Unmarshal(data, &each))
			require.Greater(t, len(each.Acks)+len(each.Nacks), fuzzBatchLimit)
			requireFieldError(t, err, field)
		}
		return nil
	}
	require.True(t, (items != nil) != (raw != nil), "exactly one of items and raw")
	var each struct{ Acks, Nacks []json.RawMessage }
	require.NoError(t, json.Unmarshal(data, &each))
	list := each.Acks
	if field == "nacks" {
		list = each.Nacks
	}
	require.Len(t, list, max(len(items), len(raw)))
	require.LessOrEqual(t, len(list), fuzzBatchLimit)
	var ok []*T
	for i := range list {
		got, gotErr := at(items, raw, i)
		want, wantErr := at(nil, list, i)
		require.Equal(t, wantErr, gotErr, "item %d", i)
		require.Equal(t, want, got, "item %d", i)
		if gotErr != nil {
			require.Nil(t, got)
			requireFieldError(t, gotErr, "*")
			continue
		}
		ok = append(ok, got)
	}
	return ok
}

// FuzzDecodeAckBatch checks the decoder of POST /v1/acks: it never panics,
// refuses with field errors only, decodes a well-formed list in one pass as
// each ack alone, and the engine takes each ack it gives or refuses it with
// ErrNotFound (a malformed id) or a field error on lease.
func FuzzDecodeAckBatch(f *testing.F) {
	for _, seed := range []string{
		`{"acks":[{"id":"01J8ZQ6V8E3N4Y6Q2R5T7W9X0A","lease":"l1"},{"id":"b","lease":"l2"}]}`,
		`{"acks":[{"id":"a","lease":"l"},{"id":"a","lease":"l"}]}`,
		`{"acks":[{"id":5,"lease":"x"},{"id":"c"},null,7,{"id":"c","lease":"l","nope":1}]}`,
		`{"acks":[{"ID":"a","Lease":"l"}]}`,
		`{"acks":[{"id":"bad id","lease":""},{"id":"","lease":"x"}]}`,
		`{"acks":[{"id":"a\u0000","lease":"\ud800"}]}`,
		`{"acks":[{"id":"a","lease":",]}\\\"["},1,2,3,4,5,6,7]}`, `{"acks":[1,2,3,4,5,6,7,[8,9],{"a":[10]}]}`,
		`{"acks":[]}`, `{"acks":[ ]}`, `{"acks":null}`, `{"acks":{}}`, `{"acks":"a"}`, `{}`, `{"acks":[],"x":1}`,
		`[]`, `null`, ``, `{`, `{"acks":[{}]} x`, "{\"acks\":[{\"id\":\"\xff\"}]}",
	} {
		f.Add([]byte(seed))
	}
	engine, err := core.NewEngine(core.EngineConfig{Store: acceptStore{}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, data []byte) {
		items, raw, err := httptransport.DecodeAckBatch(data, fuzzBatchLimit)
		decoded := requireDecodedItems(t, data, "acks", items, raw, err, httptransport.AckItemAt)
		acks := make([]core.AckJobParams, 0, len(decoded))
		for _, it := range decoded {
			require.True(t, utf8.ValidString(it.ID) && utf8.ValidString(it.Lease), "%q %q", it.ID, it.Lease)
			acks = append(acks, core.AckJobParams{ID: it.ID, Lease: it.Lease})
		}
		errs, err := engine.AckBatch(t.Context(), &core.AckJobsParams{Acks: acks})
		require.NoError(t, err)
		require.Len(t, errs, len(acks))
		for _, err := range errs {
			if !errors.Is(err, core.ErrNotFound) {
				requireFieldError(t, err, "lease")
			}
		}
	})
}

// FuzzDecodeNackBatch checks the decoder of POST /v1/nacks as
// FuzzDecodeAckBatch does that of acks; a nack's delay is decoded as the
// single nack's, and the engine refuses what it must with a field error.
func FuzzDecodeNackBatch(f *testing.F) {
	for _, seed := range []string{
		`{"nacks":[{"id":"a","lease":"l","delay":"10s","error":"boom"},{"id":"b","lease":"l2","delay":1500}]}`,
		`{"nacks":[{"id":"a","lease":"l","delay":-1},{"id":"a","lease":"l","delay":"8800h"},{"id":"a","lease":"l","delay":null}]}`,
		`{"nacks":[{"id":"a","lease":"l","delay":"soon"},{"id":"a","lease":"l","error":5},{"id":"a"},null,7]}`,
		`{"nacks":[{"id":"a","lease":"l","delay":9223372036854775807,"error":"\u0000\ud800"}]}`,
		`{"nacks":[{"Id":"a","LEASE":"l","Delay":"1s"}]}`,
		`{"nacks":[]}`, `{"nacks":{}}`, `{}`, `{"acks":[]}`, `[]`, ``, `{"nacks":[{}]} x`,
	} {
		f.Add([]byte(seed))
	}
	engine, err := core.NewEngine(core.EngineConfig{Store: acceptStore{}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, data []byte) {
		items, raw, err := httptransport.DecodeNackBatch(data, fuzzBatchLimit)
		decoded := requireDecodedItems(t, data, "nacks", items, raw, err, httptransport.NackItemAt)
		for _, it := range decoded {
			p, err := httptransport.NackParams(it)
			if err != nil {
				require.Nil(t, p)
				requireFieldError(t, err, "delay")
				continue
			}
			require.Equal(t, it.ID, p.ID)
			require.Equal(t, it.Lease, p.Lease)
			require.Equal(t, it.Error, p.Error)
			err = engine.Nack(t.Context(), p)
			if !errors.Is(err, core.ErrNotFound) {
				requireFieldError(t, err, "*")
			}
		}
	})
}

// FuzzCountItems checks that countItems counts the elements of any JSON
// array as encoding/json does.
func FuzzCountItems(f *testing.F) {
	for _, seed := range []string{
		`[]`, `[ ]`, `[1]`, `[1,2]`, `[[1,2],{"a":[3,4],"b":"c,d"}]`, `["\\\",", ","]`, `[{"]":"["}, null]`,
		` [ "x" , [ ] , { } ] `, `[1,`, `{}`, `x`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		var list []json.RawMessage
		trimmed := strings.TrimSpace(data)
		if json.Unmarshal([]byte(data), &list) != nil || !strings.HasPrefix(trimmed, "[") {
			return
		}
		require.Equal(t, len(list), httptransport.CountItems([]byte(trimmed)))
	})
}

// FuzzDecodeSchedule: a schedule decodes, or is refused with a field error;
// one that decodes and validates answers as JSON.
func FuzzDecodeSchedule(f *testing.F) {
	for _, seed := range []string{
		`{"cron": "30 2 * * *", "time_zone": "America/New_York", "topic": "reports", "job": {"body": {"a": 1}, "key": "k", "ttr": "2m", "max_attempts": 3, "priority": -1}, "missed": "all", "missed_limit": 5}`,
		`{"cron": "@every 90s", "topic": "t", "start": "2026-01-01T00:00:00Z", "end": 1900000000, "paused": true}`,
		`{"cron": "*/5 * * * * *", "topic": "t", "time_zone": "Local"}`,
		`{"cron": "TZ=UTC @daily", "topic": "t", "job": null}`,
		`{"cron": "@every 1ns", "topic": "t", "job": {"ttr": -1, "body": "\u0000"}}`,
		`{"cron": 5, "topic": ["t"]}`, `{"name": "s", "cron": "@hourly", "topic": "t"}`,
		`{"job": []}`, `[]`, `{}`, ``, `{`, "{\"cron\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := httptransport.DecodeSchedule("s", data)
		if err != nil {
			require.Nil(t, sc)
			requireFieldError(t, err, "*")
			return
		}
		require.Equal(t, "s", sc.Name)
		if err := sc.Validate(); err != nil {
			requireFieldError(t, err, "*")
			return
		}
		out, err := json.Marshal(httptransport.NewScheduleView(sc, time.Now(), 3))
		require.NoError(t, err)
		require.True(t, json.Valid(out), "%s", out)
	})
}
