package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/delayq/delayq/transports/httptransport"
	"github.com/delayq/delayq/ui"
)

// Values of --ui.
const (
	uiAuto = "auto"
	uiOn   = "on"
	uiOff  = "off"
)

// uiServed decides --ui: on and off as they say; auto serves the UI when
// API tokens are configured (the UI then asks for one) or, without tokens,
// only on a loopback listener, where the Host check keeps other sites'
// pages away from the open API.
func uiServed(mode string, tokens bool, addr net.Addr) bool {
	switch mode {
	case uiOn:
		return true
	case uiOff:
		return false
	}
	if tokens {
		return true
	}
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// mountUI mounts the web UI at /ui/ when --ui says so, and logs where.
func mountUI(api *httptransport.Server, cfg *serveConfig, acc *access, addr net.Addr, log *slog.Logger) {
	if !uiServed(cfg.HTTP.UI, acc.tokens.Len() > 0, addr) {
		if cfg.HTTP.UI == uiAuto {
			log.Info("web ui off: no API tokens and not a loopback listener (--ui on serves it anyway)")
		}
		return
	}
	api.Handle("GET "+ui.Prefix, ui.Handler(ui.Config{Auth: acc.tokens.Len() > 0}))
	// The address typed without its slash: an open route of its own, since
	// the mux's own redirect has no route to be open by.
	api.Handle("GET "+strings.TrimSuffix(ui.Prefix, "/"), http.RedirectHandler(ui.Prefix, http.StatusMovedPermanently))
	// The server's root, typed in a browser, leads to the UI; 302, not
	// 301, since --ui off leaves it answering 404.
	api.Handle("GET /{$}", http.RedirectHandler(ui.Prefix, http.StatusFound))
	scheme := "http"
	if acc.tls != nil {
		scheme = "https"
	}
	log.Info("web ui", "url", scheme+"://"+addr.String()+ui.Prefix)
}

// Prometheus names of the metrics the live statistics read (see
// telemetry): the OTel names with dots as underscores, counters with
// _total, durations with _seconds.
const (
	promIntake   = "delayq_intake_jobs_total"
	promAttempts = "delayq_attempts_total"
	promLateness = "delayq_lateness_seconds"
)

// newStats returns the live statistics of GET /v1/stats, read from the
// metrics telemetry keeps and the breakers' states. The caller runs it.
func (o *observability) newStats(log *slog.Logger) *httptransport.Stats {
	return httptransport.NewStats(httptransport.StatsConfig{
		CountersFunc: o.statsCounters,
		BreakersFunc: o.breakerStates,
		Logger:       log,
	})
}

// statsCounters reads the intake, attempt (all, failed and burying) and
// lateness metrics by topic.
func (o *observability) statsCounters(context.Context) (httptransport.StatsCounters, error) {
	c := httptransport.StatsCounters{Intake: map[string]float64{}, Deliveries: map[string]float64{}, Retries: map[string]float64{},
		Deaths: map[string]float64{}, Lateness: map[string]httptransport.Histogram{}}
	families, err := o.providers.Gatherer().Gather()
	if err != nil {
		return c, err
	}
	for _, f := range families {
		switch f.GetName() {
		case promIntake:
			for _, m := range f.GetMetric() {
				if o := label(m, "outcome"); o == "accepted" || o == "replaced" {
					c.Intake[label(m, "queue")] += m.GetCounter().GetValue()
				}
			}
		case promAttempts:
			for _, m := range f.GetMetric() {
				topic, n := label(m, "queue"), m.GetCounter().GetValue()
				c.Deliveries[topic] += n
				switch label(m, "outcome") {
				case "failed", "expired":
					c.Retries[topic] += n
				case "dead":
					c.Deaths[topic] += n
				}
			}
		case promLateness:
			for _, m := range f.GetMetric() {
				topic := label(m, "queue")
				h := m.GetHistogram()
				sum := c.Lateness[topic]
				if sum.Bounds == nil {
					for _, b := range h.GetBucket() {
						sum.Bounds = append(sum.Bounds, b.GetUpperBound())
					}
					sum.Counts = make([]float64, len(sum.Bounds))
				}
				if len(h.GetBucket()) != len(sum.Counts) {
					continue
				}
				for i, b := range h.GetBucket() {
					sum.Counts[i] += float64(b.GetCumulativeCount())
				}
				sum.Count += float64(h.GetSampleCount())
				c.Lateness[topic] = sum
			}
		}
	}
	return c, nil
}

// label returns the value of a metric's label, "" when it has none.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// breakerStates returns the store's breaker and every endpoint's that was
// used.
func (o *observability) breakerStates() []httptransport.BreakerState {
	out := []httptransport.BreakerState{{Name: "store", State: o.breaker.State().String()}}
	for _, d := range o.endpoints {
		for _, e := range d.States() {
			name := e.Topic + " → " + e.Endpoint
			if e.Topic == "" { // shared by every topic: a Kafka cluster
				name = e.Endpoint
			}
			out = append(out, httptransport.BreakerState{Name: name, Endpoint: true, State: e.State.String()})
		}
	}
	return out
}
