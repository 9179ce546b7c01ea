package core_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/delayq/delayq/core"
)

// acceptStore takes every job and keeps none, so that a benchmark times
// the engine's own part of a push.
type acceptStore struct{ core.Store }

func (acceptStore) PutJobs(_ context.Context, p *core.PutJobsParams) ([]core.PutResult, error) {
	return make([]core.PutResult, len(p.Jobs)), nil
}

// BenchmarkPushBatch times the engine's part of a batch of 1 000 jobs of a
// topic left unconfigured, each with the load harness's 72-byte body: as
// a JSON transport gives them (body-checked: the decoder checked the body)
// and as gRPC does (the engine scans the body):
//
//	go test -run '^$' -bench BenchmarkPushBatch ./core/
func BenchmarkPushBatch(b *testing.B) {
	body := json.RawMessage(`{"order":42,"customer":"c-1234","note":"a small body of a typical size"}`)
	for _, checked := range []bool{true, false} {
		name := "body-checked"
		if !checked {
			name = "body-scanned"
		}
		b.Run(name, func(b *testing.B) {
			e, err := core.NewEngine(core.EngineConfig{Store: acceptStore{}, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			p := &core.PushBatchParams{Jobs: make([]*core.PushParams, 1000)}
			for b.Loop() {
				b.StopTimer()
				for i := range p.Jobs {
					p.Jobs[i] = &core.PushParams{Topic: "bench", Body: body, BodyChecked: checked}
				}
				b.StartTimer()
				res, err := e.PushBatch(b.Context(), p)
				if err != nil || res[0].Err != nil {
					b.Fatal(err, res[0].Err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(p.Jobs)), "ns/job")
		})
	}
}
