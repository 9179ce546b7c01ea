package httptransport

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/delayq/delayq/transports/wire"
)

// BenchmarkDecodeBatch compares the one-pass decoding of a well-formed
// batch of 1 000 jobs with decoding each job on its own:
//
//	go test -run '^$' -bench DecodeBatch ./transports/httptransport/
func BenchmarkDecodeBatch(b *testing.B) {
	job := `{"topic":"orders.close","body":{"order":42,"customer":"c-1234","note":"a small body of a typical size"},"delay":"1h"}`
	data := []byte(`{"jobs":[` + strings.TrimSuffix(strings.Repeat(job+",", 1000), ",") + `]}`)
	b.Run("one-pass", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			jobs, _, err := decodeBatch(data)
			if err != nil || len(jobs) != 1000 {
				b.Fatal(err)
			}
			for _, j := range jobs {
				if _, err := j.Params(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("each-job", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var req batchRequest
			if err := wire.DecodeObject(data, "", &req); err != nil {
				b.Fatal(err)
			}
			for _, raw := range req.Jobs {
				if _, err := wire.DecodeJob(json.RawMessage(raw)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
