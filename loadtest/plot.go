package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writePlots draws the PNG plots of r into dir and returns their file
// names by kind: lateness-over-time, lateness-histogram, burst and
// retention.
func writePlots(dir string, r *results) (map[string]string, error) {
	out := map[string]string{}
	save := func(kind string, p *plot.Plot) error {
		name := kind + ".png"
		if err := p.Save(10*vg.Inch, 5*vg.Inch, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("plot %s: %w", kind, err)
		}
		out[kind] = name
		return nil
	}
	if l := r.Lateness; l != nil && len(l.Series) > 0 {
		p, err := overTime(l)
		if err != nil {
			return nil, err
		}
		if err := save("lateness-over-time", p); err != nil {
			return nil, err
		}
		if err := save("lateness-histogram", histogram(l)); err != nil {
			return nil, err
		}
	}
	if rt := r.Retention; rt != nil && len(rt.Samples) > 1 {
		p, err := retentionPlot(rt)
		if err != nil {
			return nil, err
		}
		if err := save("retention", p); err != nil {
			return nil, err
		}
	}
	if s := r.Soak; s != nil && len(s.Samples) > 1 && len(s.Windows) > 0 {
		ps, err := soakPlots(s)
		if err != nil {
			return nil, err
		}
		if err := saveStacked(filepath.Join(dir, "soak.png"), ps); err != nil {
			return nil, fmt.Errorf("plot soak: %w", err)
		}
		out["soak"] = "soak.png"
	}
	if b := r.Burst; b != nil && len(b.Curve) > 0 {
		p, err := burstCurve(b)
		if err != nil {
			return nil, err
		}
		if err := save("burst", p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

var (
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	red    = color.RGBA{R: 214, G: 39, B: 40, A: 255}
)

// overTime plots p50, p99 and max of each 100 ms of run_at.
func overTime(l *latenessResult) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Lateness over time, %d due jobs/s (each point: the jobs due within 100 ms)", l.Rate)
	p.X.Label.Text = "seconds since the first job was due"
	p.Y.Label.Text = "lateness, ms"
	p.Add(plotter.NewGrid())
	for _, s := range []struct {
		name string
		c    color.Color
		v    func(seriesPoint) float64
	}{
		{"max", red, func(s seriesPoint) float64 { return s.Max }},
		{"p99", orange, func(s seriesPoint) float64 { return s.P99 }},
		{"p50", blue, func(s seriesPoint) float64 { return s.P50 }},
	} {
		xys := make(plotter.XYs, len(l.Series))
		for i, pt := range l.Series {
			xys[i] = plotter.XY{X: pt.T, Y: s.v(pt)}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.Color = s.c
		line.Width = vg.Points(1)
		p.Add(line)
		p.Legend.Add(s.name, line)
	}
	p.Legend.Top = true
	p.Y.Min = 0
	return p, nil
}

// histogram plots how many jobs came how late, up to the p99.9: the few
// beyond would squash the rest into one bar; the title gives the max.
func histogram(l *latenessResult) *plot.Plot {
	vals := make([]float64, 0, len(l.receipts))
	for _, r := range l.receipts {
		vals = append(vals, ms(r.Late()))
	}
	slices.Sort(vals)
	limit := l.Stats.P999
	cut := vals[:0:0]
	for _, v := range vals {
		if v > limit {
			break
		}
		cut = append(cut, v)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Lateness of %d jobs up to p99.9 (%.2f ms); max %.2f ms", len(vals), limit, l.Stats.Max)
	p.X.Label.Text = "lateness, ms"
	p.Y.Label.Text = "jobs"
	p.Add(plotter.NewGrid())
	if len(cut) > 0 {
		if h, err := plotter.NewHist(plotter.Values(cut), 100); err == nil {
			h.FillColor = blue
			h.LineStyle.Width = 0
			p.Add(h)
		}
	}
	return p
}

// burstCurve plots how many jobs of the burst had come over time.
func burstCurve(b *burstResult) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Burst: %d jobs due at one instant, received by WebSocket subscribers", b.Jobs)
	p.X.Label.Text = "seconds after the instant"
	p.Y.Label.Text = "jobs received"
	p.Add(plotter.NewGrid())
	xys := make(plotter.XYs, len(b.Curve))
	for i, c := range b.Curve {
		xys[i] = plotter.XY{X: c.T, Y: float64(c.Received)}
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	line.Color = blue
	line.Width = vg.Points(1.5)
	p.Add(line)
	p.Y.Min = 0
	return p, nil
}

// retentionPlot plots the store's files (MiB) and the finished jobs kept
// (thousands) over the retention phase, on one axis.
func retentionPlot(rt *retentionResult) (*plot.Plot, error) {
	p := plot.New()
	bound := ""
	if rt.RetentionMaxJobs > 0 {
		bound = fmt.Sprintf(", --retention-max-jobs %d", rt.RetentionMaxJobs)
	}
	p.Title.Text = fmt.Sprintf("Retention at %d jobs/s in and out, --retention %s%s: store files (MiB) and finished jobs kept (thousands)", rt.Rate, rt.Retention, bound)
	p.X.Label.Text = "seconds since the phase began"
	p.Y.Label.Text = "MiB / thousands of jobs"
	p.Add(plotter.NewGrid())
	for _, s := range []struct {
		name string
		c    color.Color
		v    func(retentionSample) float64
	}{
		{"store files, MiB", blue, func(s retentionSample) float64 { return float64(s.StoreBytes) / (1 << 20) }},
		{"tables, MiB", orange, func(s retentionSample) float64 { return float64(s.SSTBytes) / (1 << 20) }},
		{"finished jobs kept, thousands", red, func(s retentionSample) float64 { return float64(s.Finished) / 1000 }},
	} {
		xys := make(plotter.XYs, len(rt.Samples))
		for i, pt := range rt.Samples {
			xys[i] = plotter.XY{X: pt.T, Y: s.v(pt)}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.Color = s.c
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.name, line)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	return p, nil
}

// soakPlots draws the soak phase's readings as four plots, one above the
// other, over one time axis: delayq's resident memory (and a separate
// backend server's), goroutines, open file descriptors, and the lateness
// p50 and p99 of each interval.
func soakPlots(s *soakResult) ([]*plot.Plot, error) {
	type line struct {
		name string
		c    color.Color
		xys  plotter.XYs
	}
	over := func(v func(soakSample) float64) plotter.XYs {
		xys := make(plotter.XYs, len(s.Samples))
		for i, pt := range s.Samples {
			xys[i] = plotter.XY{X: pt.T, Y: v(pt)}
		}
		return xys
	}
	windows := func(v func(seriesPoint) float64) plotter.XYs {
		xys := make(plotter.XYs, len(s.Windows))
		for i, pt := range s.Windows {
			xys[i] = plotter.XY{X: pt.T, Y: v(pt)}
		}
		return xys
	}
	memory := []line{{"delayq", blue, over(func(x soakSample) float64 { return float64(x.RSS) / (1 << 20) })}}
	if len(s.Samples) > 0 && s.Samples[0].BackendRSS > 0 {
		memory = append(memory, line{"backend server", orange, over(func(x soakSample) float64 { return float64(x.BackendRSS) / (1 << 20) })})
	}
	panels := []struct {
		title, y string
		lines    []line
	}{
		{fmt.Sprintf("Soak at %d jobs/s in and out, --retention %s: resident memory", s.Rate, s.Retention), "MiB", memory},
		{"delayq goroutines", "goroutines", []line{{"goroutines", blue, over(func(x soakSample) float64 { return float64(x.Goroutines) })}}},
		{"delayq open file descriptors", "descriptors", []line{{"fds", blue, over(func(x soakSample) float64 { return float64(x.FDs) })}}},
		{fmt.Sprintf("lateness of the jobs due in each %.0f s", s.Sample), "ms", []line{
			{"p50", blue, windows(func(x seriesPoint) float64 { return x.P50 })},
			{"p99", orange, windows(func(x seriesPoint) float64 { return x.P99 })},
		}},
	}
	// One time axis for all: the lateness windows start a lead later.
	end := s.Samples[len(s.Samples)-1].T
	out := make([]*plot.Plot, 0, len(panels))
	for _, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "seconds since the phase began"
		p.Y.Label.Text = pn.y
		p.Add(plotter.NewGrid())
		for _, l := range pn.lines {
			pl, err := plotter.NewLine(l.xys)
			if err != nil {
				return nil, err
			}
			pl.Color = l.c
			pl.Width = vg.Points(1.5)
			p.Add(pl)
			if len(pn.lines) > 1 {
				p.Legend.Add(l.name, pl)
			}
		}
		p.Legend.Top = true
		p.X.Min, p.X.Max = 0, end
		p.Y.Min = 0
		out = append(out, p)
	}
	return out, nil
}

// saveStacked draws plots one above the other, their axes aligned, into a
// PNG file at path.
func saveStacked(path string, plots []*plot.Plot) error {
	img := vgimg.New(10*vg.Inch, vg.Length(len(plots))*3*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(rows, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
