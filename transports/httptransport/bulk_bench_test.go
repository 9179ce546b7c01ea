package httptransport_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/httptransport"
)

// BenchmarkRequeueDead compares requeueing 2 000 dead jobs by one request
// of the filter route with what `delayq requeue --all` did before it: list
// the dead jobs by pages, then one request per job; memstore, over HTTP on
// loopback:
//
//	go test -run '^$' -bench RequeueDead -benchtime 5x ./transports/httptransport/
func BenchmarkRequeueDead(b *testing.B) {
	const n = 2000
	for _, way := range []string{"filter-route", "list-then-each"} {
		b.Run(way, func(b *testing.B) {
			bd := benchServer(b)
			ctx := b.Context()
			jobs := make([]string, n)
			for i := range jobs {
				jobs[i] = `{"topic":"t","max_attempts":1}`
			}
			for b.Loop() {
				b.StopTimer()
				for i := 0; i < n; i += 1000 {
					res := bd.do(b, http.MethodPost, "/v1/jobs/batch", `{"jobs":[`+strings.Join(jobs[i:i+1000], ",")+`]}`)
					if res.status != http.StatusOK {
						b.Fatalf("batch: %d %s", res.status, res.body)
					}
				}
				for dead := 0; dead < n; {
					claimed, err := bd.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1000})
					if err != nil || len(claimed) == 0 {
						b.Fatal("claim", err)
					}
					for _, j := range claimed {
						if err := bd.engine.Nack(ctx, &core.NackParams{ID: j.ID, Lease: j.Lease, Error: "boom"}); err != nil {
							b.Fatal(err)
						}
					}
					dead += len(claimed)
				}
				b.StartTimer()
				requeued := 0
				if way == "filter-route" {
					res := bd.do(b, http.MethodPost, "/v1/topics/t/dead/requeue", "")
					var a struct{ Count int }
					if err := json.Unmarshal(res.body, &a); err != nil {
						b.Fatal(err)
					}
					requeued = a.Count
				} else {
					var ids []string
					for after := ""; ; {
						res := bd.do(b, http.MethodGet, "/v1/topics/t/jobs?state=dead&limit=1000&after="+after, "")
						var page struct {
							Jobs      []struct{ ID string }
							NextAfter string `json:"next_after"`
						}
						if err := json.Unmarshal(res.body, &page); err != nil {
							b.Fatal(err)
						}
						for _, j := range page.Jobs {
							ids = append(ids, j.ID)
						}
						if after = page.NextAfter; after == "" {
							break
						}
					}
					for _, id := range ids {
						if res := bd.do(b, http.MethodPost, "/v1/jobs/"+id+"/requeue", ""); res.status == http.StatusNoContent {
							requeued++
						}
					}
				}
				if requeued != n {
					b.Fatalf("requeued %d of %d", requeued, n)
				}
				b.StopTimer()
				// Leave the topic empty for the next round.
				for {
					claimed, err := bd.engine.Claim(ctx, &core.ClaimJobsParams{Topic: "t", Max: 1000})
					if err != nil {
						b.Fatal(err)
					}
					if len(claimed) == 0 {
						break
					}
					for _, j := range claimed {
						if err := bd.engine.Ack(ctx, &core.AckJobParams{ID: j.ID, Lease: j.Lease}); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StartTimer()
			}
		})
	}
}

// benchBundle is a server over memstore for benchmarks, which setup's
// checks of every answer would slow.
type benchBundle struct {
	engine *core.Engine
	srv    *httptest.Server
}

func benchServer(b *testing.B) *benchBundle {
	store := memstore.New(memstore.Config{})
	engine, err := core.NewEngine(core.EngineConfig{Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(httptransport.New(httptransport.Config{Engine: engine, Logger: slog.New(slog.DiscardHandler)}))
	b.Cleanup(func() {
		srv.Close()
		_ = store.Close()
	})
	return &benchBundle{engine: engine, srv: srv}
}

// do makes a request and reads its answer whole.
func (bd *benchBundle) do(b *testing.B, method, path, body string) *response {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(b.Context(), method, bd.srv.URL+path, rd)
	if err != nil {
		b.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := bd.srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		b.Fatal(err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: data}
}
