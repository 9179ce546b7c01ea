package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/core/storetest"
	"github.com/delayq/delayq/telemetry"
)

// TestBatchPushSpans checks that a batch gets one push span per distinct
// parent, each job stored with its own group's traceparent.
func TestBatchPushSpans(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	mem := memstore.New(memstore.Config{})
	s, err := telemetry.NewStore(mem, telemetry.Config{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	const a = "00-11111111111111111111111111111111-1111111111111111-01"
	const b = "00-22222222222222222222222222222222-2222222222222222-01"
	jobs := []*core.Job{storetest.DueJob("x"), storetest.DueJob("x"), storetest.DueJob("y"), storetest.DueJob("x")}
	jobs[0].TraceParent, jobs[1].TraceParent, jobs[2].TraceParent, jobs[3].TraceParent = a, a, a, b
	res, err := s.PutJobs(context.Background(), &core.PutJobsParams{Jobs: jobs})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	require.Equal(t, a, jobs[0].TraceParent, "the caller's jobs are not changed")
	got := spans.GetSpans()
	require.Len(t, got, 2)
	byTrace := map[string]tracetest.SpanStub{}
	for _, sp := range got {
		byTrace[sp.SpanContext.TraceID().String()] = sp
	}
	batch, single := byTrace[strings.Repeat("1", 32)], byTrace[strings.Repeat("2", 32)]
	require.Equal(t, "push", batch.Name, "jobs of several topics")
	require.Contains(t, batch.Attributes, attr("messaging.destination.name", "x"))
	require.Equal(t, "push x", single.Name)
	for i, j := range jobs {
		stored, err := s.GetJob(context.Background(), j.ID)
		require.NoError(t, err)
		want := batch.SpanContext
		if i == 3 {
			want = single.SpanContext
		}
		require.Equal(t, "00-"+want.TraceID().String()+"-"+want.SpanID().String()+"-01", stored.TraceParent)
	}
}

// TestTracingOffKeepsTraceParent checks that with a noop tracer provider the
// job keeps the traceparent its push came with, and gets none without.
func TestTracingOffKeepsTraceParent(t *testing.T) {
	t.Parallel()
	mem := memstore.New(memstore.Config{})
	s, err := telemetry.NewStore(mem, telemetry.Config{TracerProvider: noop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	j, k := storetest.DueJob("x"), storetest.DueJob("x")
	j.TraceParent = "00-11111111111111111111111111111111-1111111111111111-01"
	_, err = s.PutJobs(context.Background(), &core.PutJobsParams{Jobs: []*core.Job{j, k}})
	require.NoError(t, err)
	claimed, err := s.ClaimJobs(context.Background(), &core.ClaimJobsParams{Topic: "x", Max: 2, Wait: time.Second})
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	for _, c := range claimed {
		if c.ID == j.ID {
			require.Equal(t, j.TraceParent, c.TraceParent)
		} else {
			require.Empty(t, c.TraceParent)
		}
	}
}

func TestLogHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewTextHandler(&buf, nil))).With("component", "x")
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	defer span.End()
	log.InfoContext(ctx, "with span")
	log.Info("without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], "trace_id="+span.SpanContext().TraceID().String())
	require.Contains(t, lines[0], "span_id="+span.SpanContext().SpanID().String())
	require.Contains(t, lines[0], "component=x")
	require.NotContains(t, lines[1], "trace_id")
}

// TestExportImportForwarded checks that export and import reach the store
// under the decorator, and answer core.ErrUnsupported over one without them.
func TestExportImportForwarded(t *testing.T) {
	t.Parallel()
	cfg := telemetry.Config{TracerProvider: noop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
	mem := memstore.New(memstore.Config{})
	s, err := telemetry.NewStore(mem, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	j := storetest.DueJob("x")
	res, err := s.ImportJobs(t.Context(), []*core.Job{j})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, res)
	var got []string
	require.NoError(t, s.ExportJobs(t.Context(), func(e *core.Job) error { got = append(got, e.ID); return nil }))
	require.Equal(t, []string{j.ID}, got)

	bare, err := telemetry.NewStore(struct{ core.Store }{memstore.New(memstore.Config{})}, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bare.Close()) })
	require.ErrorIs(t, bare.ExportJobs(t.Context(), func(*core.Job) error { return nil }), core.ErrUnsupported)
	_, err = bare.ImportJobs(t.Context(), []*core.Job{j})
	require.ErrorIs(t, err, core.ErrUnsupported)
}

// checkpointStore is memstore with a checkpoint that records its directory.
type checkpointStore struct {
	*memstore.Store
	dir string
}

func (c *checkpointStore) Checkpoint(_ context.Context, dir string) error {
	c.dir = dir
	return nil
}

// TestCheckpointForwarded checks that a checkpoint reaches the store under
// the decorator, and answers core.ErrUnsupported over one without it.
func TestCheckpointForwarded(t *testing.T) {
	t.Parallel()
	cfg := telemetry.Config{TracerProvider: noop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
	c := &checkpointStore{Store: memstore.New(memstore.Config{})}
	s, err := telemetry.NewStore(c, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Checkpoint(t.Context(), "/backups/x"))
	require.Equal(t, "/backups/x", c.dir)

	bare, err := telemetry.NewStore(memstore.New(memstore.Config{}), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bare.Close()) })
	require.ErrorIs(t, bare.Checkpoint(t.Context(), "/backups/x"), core.ErrUnsupported)
}
