//go:build !nocharts

package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/seed57392e9e/blobcache/bench/harness"
)

// Charts draws the PNG charts of the phases that ran into dir and returns their file names.
func Charts(r *harness.Report, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range []struct {
		file string
		draw func(*harness.Report) ([][]*plot.Plot, error)
	}{
		{"mixed-throughput-cpu.png", mixedThroughput},
		{"mixed-latency.png", mixedLatency},
		{"io-per-get.png", ioPerGet},
		{"capacity.png", capacity},
	} {
		plots, err := c.draw(r)
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.file, err)
		}
		if plots == nil {
			continue
		}
		path := filepath.Join(dir, c.file)
		if err := save(plots, path); err != nil {
			return out, err
		}
		out = append(out, path)
	}
	return out, nil
}

// save draws a grid of plots into one PNG.
func save(plots [][]*plot.Plot, path string) error {
	rows, cols := len(plots), len(plots[0])
	w, h := vg.Length(cols)*4.2*vg.Inch, vg.Length(rows)*3.4*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	// White background: PNG viewers show transparency as black or checkers.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, t, dc)
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
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

// bars is a bar chart with one bar per engine.
func bars(title, ylabel string, names []string, vals []float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	for i, v := range vals {
		bc, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(28))
		if err != nil {
			return nil, err
		}
		bc.Color = plotutil.Color(i)
		bc.LineStyle.Width = 0
		bc.XMin = float64(i)
		p.Add(bc)
	}
	p.NominalX(names...)
	// Engine names are longer than a bar is wide: slanted, six of them do not run into each other.
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Y.Min = 0
	return p, nil
}

func mixedThroughput(r *harness.Report) ([][]*plot.Plot, error) {
	var names []string
	var ops, cpu []float64
	for _, g := range groups(r, harness.PhaseMixed) {
		if g.median == nil || g.median.Window("mixed") == nil {
			continue
		}
		w := g.median.Window("mixed")
		names = append(names, g.engine)
		ops = append(ops, w.OpsPerSec)
		cpu = append(cpu, w.CPUSeconds*1e3/float64(max(w.Ops, 1)))
	}
	if names == nil {
		return nil, nil
	}
	p1, err := bars("Mixed workload: throughput", "operations / s", names, ops)
	if err != nil {
		return nil, err
	}
	p2, err := bars("Mixed workload: CPU", "CPU ms (user + sys) per operation", names, cpu)
	if err != nil {
		return nil, err
	}
	return [][]*plot.Plot{{p1, p2}}, nil
}

// percentiles is a plot of p50, p99 and p99.9 (log scale) with one line per engine.
func percentiles(title string, series map[string][3]float64, order []string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "latency (µs, log)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	i := 0
	for _, name := range order {
		v, ok := series[name]
		if !ok {
			continue
		}
		xys := make(plotter.XYs, 3)
		for k := range xys {
			xys[k].X, xys[k].Y = float64(k), max(v[k], 0.01)
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
		i++
	}
	p.NominalX("p50", "p99", "p99.9")
	return p, nil
}

func mixedLatency(r *harness.Report) ([][]*plot.Plot, error) {
	var row []*plot.Plot
	var order []string
	gs := groups(r, harness.PhaseMixed)
	for _, g := range gs {
		order = append(order, g.engine)
	}
	for _, op := range []string{"get-hit", "get-miss", "put"} {
		series := map[string][3]float64{}
		for _, g := range gs {
			if g.median == nil || g.median.Window("mixed") == nil {
				continue
			}
			if s, ok := g.median.Window("mixed").Latency[op]; ok {
				series[g.engine] = [3]float64{s.P50Us, s.P99Us, s.P999Us}
			}
		}
		if len(series) == 0 {
			continue
		}
		p, err := percentiles("Mixed workload: "+op, series, order)
		if err != nil {
			return nil, err
		}
		row = append(row, p)
	}
	if row == nil {
		return nil, nil
	}
	return [][]*plot.Plot{row}, nil
}

// lines is a plot of y against dataset size, one line per engine.
func lines(title, ylabel string, order []string, series map[string]plotter.XYs) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "dataset (GiB of values)"
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Legend.Top = true
	i := 0
	for _, name := range order {
		xys, ok := series[name]
		if !ok {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
		i++
	}
	return p, nil
}

func ioPerGet(r *harness.Report) ([][]*plot.Plot, error) {
	gs := groups(r, harness.PhaseIOPerGet)
	var order []string
	type key struct{ hit, dev bool }
	series := map[key]map[string]plotter.XYs{}
	for _, hit := range []bool{true, false} {
		for _, dev := range []bool{true, false} {
			series[key{hit, dev}] = map[string]plotter.XYs{}
		}
	}
	for _, g := range gs {
		if g.median == nil {
			continue
		}
		order = append(order, g.engine)
		for _, row := range ioRows(g.median) {
			x := float64(row.bytes) / (1 << 30)
			for _, hit := range []bool{true, false} {
				w := row.hit
				if !hit {
					w = row.miss
				}
				if w == nil {
					continue
				}
				series[key{hit, true}][g.engine] = append(series[key{hit, true}][g.engine], plotter.XY{X: x, Y: w.DevReadsPerGet})
				series[key{hit, false}][g.engine] = append(series[key{hit, false}][g.engine], plotter.XY{X: x, Y: w.ReadKiBPerGet})
			}
		}
	}
	if order == nil {
		return nil, nil
	}
	mk := func(title, y string, k key) *plot.Plot {
		p, err := lines(title, y, order, series[k])
		if err != nil {
			return nil
		}
		if k.dev {
			// Keep 0 and 1 I/O per Get both readable when every engine is near 0.
			p.Y.Max = max(p.Y.Max, 1.5)
		}
		return p
	}
	grid := [][]*plot.Plot{
		{mk("I/Os per Get, hits", "device reads per Get", key{true, true}), mk("I/Os per Get, misses", "device reads per Get", key{false, true})},
		{mk("Storage reads per Get, hits", "KiB read from storage per Get", key{true, false}), mk("Storage reads per Get, misses", "KiB read from storage per Get", key{false, false})},
	}
	for _, row := range grid {
		for _, p := range row {
			if p == nil {
				return nil, fmt.Errorf("could not draw a line plot")
			}
		}
	}
	return grid, nil
}

func capacity(r *harness.Report) ([][]*plot.Plot, error) {
	var names []string
	var load, perKey []float64
	series := map[string][3]float64{}
	for _, g := range groups(r, harness.PhaseCapacity) {
		if g.median == nil || g.median.Window("load") == nil || g.median.Window("cold-get") == nil {
			continue
		}
		names = append(names, g.engine)
		load = append(load, g.median.Window("load").OpsPerSec)
		perKey = append(perKey, g.median.BytesPerKey)
		c := g.median.Window("cold-get").Latency["get-hit"]
		series[g.engine] = [3]float64{c.P50Us, c.P99Us, c.P999Us}
	}
	if names == nil {
		return nil, nil
	}
	p1, err := bars("Capacity: load rate", "Puts / s", names, load)
	if err != nil {
		return nil, err
	}
	p2, err := bars("Capacity: memory per key", "bytes of RSS per key", names, perKey)
	if err != nil {
		return nil, err
	}
	p3, err := percentiles("Capacity: cold Get", series, names)
	if err != nil {
		return nil, err
	}
	return [][]*plot.Plot{{p1, p2, p3}}, nil
}
