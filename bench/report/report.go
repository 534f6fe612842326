// Package report turns a harness.Report into the markdown tables printed on standard output,
// the JSON file and the PNG charts. When a phase ran several times, the tables show the run with
// the median headline figure (ops/s) and the spread over all runs.
package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/seed57392e9e/blobcache/bench/engine"
	"github.com/seed57392e9e/blobcache/bench/harness"
	"github.com/seed57392e9e/blobcache/bench/hist"
)

// WriteJSON writes the whole report, every figure of every run, to path.
func WriteJSON(r *harness.Report, path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Merge reads reports written by WriteJSON and combines them: the first file gives the machine
// and configuration; a later file's runs of an engine and phase replace those of earlier files.
func Merge(paths []string) (*harness.Report, error) {
	var out *harness.Report
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r harness.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if out == nil {
			out = &r
			continue
		}
		replaced := map[[2]string]bool{}
		for _, res := range r.Results {
			replaced[[2]string{res.Engine, res.Phase}] = true
		}
		kept := out.Results[:0]
		for _, res := range out.Results {
			if !replaced[[2]string{res.Engine, res.Phase}] {
				kept = append(kept, res)
			}
		}
		out.Results = append(kept, r.Results...)
		out.Reps = max(out.Reps, r.Reps)
		for _, e := range r.Engines {
			if !slices.Contains(out.Engines, e) {
				out.Engines = append(out.Engines, e)
			}
		}
		for _, ph := range r.Phases {
			if !slices.Contains(out.Phases, ph) {
				out.Phases = append(out.Phases, ph)
			}
		}
		out.Command += "\n" + r.Command
		out.Finished = r.Finished
	}
	if out == nil {
		return nil, fmt.Errorf("report: nothing to merge")
	}
	return out, nil
}

// group is the runs of one engine in one phase.
type group struct {
	engine string
	runs   []*harness.PhaseResult // successful runs
	errs   []string
	median *harness.PhaseResult
	lo, hi float64 // headline spread
}

// headline is the figure the median run is chosen by.
func headline(r *harness.PhaseResult) float64 {
	switch r.Phase {
	case harness.PhaseMixed:
		if w := r.Window("mixed"); w != nil {
			return w.OpsPerSec
		}
	case harness.PhaseCapacity:
		if w := r.Window("load"); w != nil {
			return w.OpsPerSec
		}
	}
	return -r.WallSeconds
}

// groups returns the runs of phase by engine, in the report's engine order.
func groups(r *harness.Report, phase string) []*group {
	var out []*group
	for _, e := range r.Engines {
		g := &group{engine: e}
		for i := range r.Results {
			res := &r.Results[i]
			if res.Engine != e || res.Phase != phase {
				continue
			}
			if res.Error != "" {
				g.errs = append(g.errs, res.Error)
				continue
			}
			g.runs = append(g.runs, res)
		}
		if len(g.runs) == 0 && len(g.errs) == 0 {
			continue
		}
		if len(g.runs) > 0 {
			sorted := append([]*harness.PhaseResult(nil), g.runs...)
			sort.Slice(sorted, func(i, j int) bool { return headline(sorted[i]) < headline(sorted[j]) })
			g.median = sorted[len(sorted)/2]
			g.lo, g.hi = headline(sorted[0]), headline(sorted[len(sorted)-1])
		}
		out = append(out, g)
	}
	return out
}

// Markdown renders the tables.
func Markdown(r *harness.Report) string {
	var b strings.Builder
	m := r.Machine
	c := r.Config
	settle := ""
	if c.DropSettle > 0 {
		settle = fmt.Sprintf(", each engine's first load and each cold window started %v after the drop", c.DropSettle)
	}
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %.1f GiB RAM, Linux %s, %s, data on %s (%s). Page cache dropped between phases: %s%s.\n\n",
		m.CPUs, m.CPUModel, float64(m.MemTotal)/(1<<30), m.Kernel, m.GoVersion, m.Device, m.FileSystem, m.DropCaches, settle)
	fmt.Fprintf(&b, "Memory budget per engine: %d MiB; %d goroutines. Where a phase ran more than once, the row is the run with the median headline figure (ops/s) and the range over all runs follows it in parentheses.\n\n", c.MemoryBudget>>20, c.Goroutines)
	for _, ph := range r.Phases {
		switch ph {
		case harness.PhaseMixed:
			mixedTable(&b, r)
		case harness.PhaseIOPerGet:
			ioTable(&b, r)
		case harness.PhaseCapacity:
			capacityTable(&b, r)
		}
	}
	return b.String()
}

func errorsLine(b *strings.Builder, gs []*group) {
	for _, g := range gs {
		for _, e := range g.errs {
			fmt.Fprintf(b, "- **%s failed**: %s\n", g.engine, e)
		}
	}
	b.WriteString("\n")
}

// dur formats microseconds with a unit that keeps 2-3 significant digits.
func dur(us float64) string {
	switch {
	case us == 0:
		return "-"
	case us < 1:
		return fmt.Sprintf("%.0f ns", us*1e3)
	case us < 10:
		return fmt.Sprintf("%.2f µs", us)
	case us < 1000:
		return fmt.Sprintf("%.0f µs", us)
	case us < 10000:
		return fmt.Sprintf("%.2f ms", us/1e3)
	default:
		return fmt.Sprintf("%.0f ms", us/1e3)
	}
}

func pcts(s hist.Summary, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%s / %s / %s", dur(s.P50Us), dur(s.P99Us), dur(s.P999Us))
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

func size(n int64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%.0f GiB", float64(n)/(1<<30))
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	default:
		return fmt.Sprintf("%d MiB", n>>20)
	}
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a/b) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func spread(g *group, format string) string {
	if len(g.runs) < 2 {
		return ""
	}
	return fmt.Sprintf(" ("+format+"–"+format+")", g.lo, g.hi)
}

func mixedTable(b *strings.Builder, r *harness.Report) {
	gs := groups(r, harness.PhaseMixed)
	c := r.Config
	fmt.Fprintf(b, "### Mixed workload (seed 000)\n\n%d blobs of %d KiB preloaded, then %d operations from %d goroutines: 10%% Puts of new %d KiB blobs, 45%% Gets of present keys (read to the end), 45%% Gets of absent keys. Latencies are p50 / p99 / p99.9. CPU is user + sys of the mixed window; peak RSS is the child's high-water mark, and in parentheses how much of it came after the engine opened (the child's RSS before, the harness's own, is the same for every engine of a binary); write amplification is bytes sent to storage per byte Put over the whole child (process counter / device counter).\n\n",
		c.MixedPreload, c.MixedValue>>10, c.MixedOps, c.Goroutines, c.MixedValue>>10)
	b.WriteString("| engine | ops/s | Get hit | Get miss | Put | Put MB/s | CPU s | peak RSS | write amp | disk used |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, g := range gs {
		r := g.median
		if r == nil {
			continue
		}
		w := r.Window("mixed")
		if w == nil {
			continue
		}
		hit, okh := w.Latency["get-hit"]
		miss, okm := w.Latency["get-miss"]
		put, okp := w.Latency["put"]
		fmt.Fprintf(b, "| %s | %.0f%s | %s | %s | %s | %.0f | %.2f | %s | %.2f / %.2f | %s |\n",
			g.engine, w.OpsPerSec, spread(g, "%.0f"), pcts(hit, okh), pcts(miss, okm), pcts(put, okp),
			w.WriteMBps, w.CPUSeconds, mib(r.PeakRSS)+" (+"+strings.TrimSuffix(mib(engineRSS(r)), " MiB")+")", r.WriteAmp, r.DeviceWriteAmp, size(r.DiskUsed))
	}
	errorsLine(b, gs)
	// What the engines' own counters say about the shape of the run.
	for _, g := range gs {
		if g.median == nil {
			continue
		}
		w := g.median.Window("mixed")
		if w == nil {
			continue
		}
		tc := g.median.Total.Counters
		switch {
		case g.engine == "rocksdb" || strings.HasPrefix(g.engine, "rocksdb"):
			if l0, ok := tc["l0_files"]; ok {
				fmt.Fprintf(b, "- %s: %d L0 files at the end of the mixed window (%s), block cache holding %s, bloom filters useful %d times in the window.\n",
					g.engine, l0, runsOf(g, "l0_files"), mib(tc["block_cache_usage"]), w.Counters["bloom_useful"])
			}
		case strings.HasPrefix(g.engine, "blobcache"):
			fmt.Fprintf(b, "- %s: Go heap in use %s at the end of the window, %s allocated in it (%.0f KiB per operation), %d GCs; Puts that waited for a write buffer: %d.\n",
				g.engine, mib(w.Go.HeapInuse), size(w.Go.Allocated), float64(w.Go.Allocated)/1024/float64(max(w.Ops, 1)), w.Go.GCs, w.Counters["put_waits"])
		}
	}
	b.WriteString("\n")
	// Ratios against every other engine, for each blobcache variant.
	var bcs, others []*group
	for _, g := range gs {
		if g.median == nil || g.median.Window("mixed") == nil {
			continue
		}
		if strings.HasPrefix(g.engine, "blobcache") {
			bcs = append(bcs, g)
		} else {
			others = append(others, g)
		}
	}
	if len(bcs) > 0 && len(others) > 0 {
		b.WriteString("Ratios, BlobCache against each engine (ops/s: higher is better for BlobCache; RSS and CPU: the fraction BlobCache uses, lower is better; CPU per operation of the mixed window):\n\n")
		b.WriteString("| BlobCache | against | ops/s | peak RSS | RSS the engine added | CPU per op |\n|---|---|---|---|---|---|\n")
		for _, bc := range bcs {
			bw := bc.median.Window("mixed")
			for _, o := range others {
				ow := o.median.Window("mixed")
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", bc.engine, o.engine,
					ratio(bw.OpsPerSec, ow.OpsPerSec),
					ratio(float64(bc.median.PeakRSS), float64(o.median.PeakRSS)),
					ratio(float64(engineRSS(bc.median)), float64(engineRSS(o.median))),
					ratio(bw.CPUSeconds/float64(bw.Ops), ow.CPUSeconds/float64(ow.Ops)))
			}
		}
		b.WriteString("\n")
	}
}

// engineRSS is the part of a child's peak RSS that came after the engine opened: the peak less
// the RSS measured just before (the Go runtime, the harness, the linked libraries).
func engineRSS(r *harness.PhaseResult) int64 {
	return max(r.PeakRSS-r.BaselineRSS, 0)
}

// runsOf lists a total counter over every run of the group, e.g. "runs: 455, 452, 460".
func runsOf(g *group, counter string) string {
	var vs []string
	for _, r := range g.runs {
		vs = append(vs, fmt.Sprint(r.Total.Counters[counter]))
	}
	return "runs: " + strings.Join(vs, ", ")
}

// ioRow is one dataset size of one engine in the I/Os per Get phase.
type ioRow struct {
	keys      int64
	bytes     int64
	hit, miss *harness.Window
}

func ioRows(r *harness.PhaseResult) []ioRow {
	var out []ioRow
	for i := range r.Windows {
		w := &r.Windows[i]
		if !strings.HasPrefix(w.Name, "get-hit@") {
			continue
		}
		row := ioRow{keys: w.DatasetKeys, bytes: w.DatasetBytes, hit: w}
		row.miss = r.Window(strings.Replace(w.Name, "get-hit@", "get-miss@", 1))
		out = append(out, row)
	}
	return out
}

func ioTable(b *strings.Builder, r *harness.Report) {
	gs := groups(r, harness.PhaseIOPerGet)
	c := r.Config
	fmt.Fprintf(b, "### I/Os per Get (seed 002)\n\nValues of %d B, loaded in random key order up to each dataset size; then a flush, a page-cache drop (if allowed), %d unmeasured Gets of present keys to warm the engine's own caches, and %d measured Gets of present keys (hits) and of absent keys (misses) from %d goroutines. Device reads are read requests completed on the data device (/proc/diskstats; every process on the machine counts there); syscalls are the process's read-like system calls (/proc/self/io syscr, page-cache hits included); KiB is what the process read from storage (read_bytes).\n\n",
		c.IOValue, c.IOWarmup, c.IOGets, c.Goroutines)
	b.WriteString("| engine | keys | data | hit: device reads/Get | syscalls/Get | KiB/Get | p50 / p99 | miss: device reads/Get | syscalls/Get | p50 / p99 |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, g := range gs {
		if g.median == nil {
			continue
		}
		for _, row := range ioRows(g.median) {
			h, m := row.hit, row.miss
			hl := h.Latency["get-hit"]
			missCols := "- | - | -"
			if m != nil {
				ml := m.Latency["get-miss"]
				missCols = fmt.Sprintf("%.2f | %.2f | %s / %s", m.DevReadsPerGet, m.SyscallsPerGet, dur(ml.P50Us), dur(ml.P99Us))
			}
			fmt.Fprintf(b, "| %s | %s | %s | %.2f | %.2f | %.1f | %s / %s | %s |\n", g.engine, keys(row.keys), size(row.bytes),
				h.DevReadsPerGet, h.SyscallsPerGet, h.ReadKiBPerGet, dur(hl.P50Us), dur(hl.P99Us), missCols)
		}
	}
	errorsLine(b, gs)
}

func keys(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func capacityTable(b *strings.Builder, r *harness.Report) {
	gs := groups(r, harness.PhaseCapacity)
	c := r.Config
	fmt.Fprintf(b, "### Capacity (seed 001)\n\n%s values of %d-%d B loaded from %d goroutines; memory per key is (RSS after the load and a flush - RSS before open) / keys; cold Gets follow a page-cache drop, hot Gets draw from a set of %d keys read once before. Latencies p50 / p99 / p99.9.\n\n",
		keys(c.CapKeys), c.CapMin, c.CapMax, c.Goroutines, c.CapHot)
	b.WriteString("| engine | load ops/s | load MB/s | load CPU s | write amp | cold Get | cold device reads/Get | hot Get | bytes/key (RSS) | peak RSS | disk used |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, g := range gs {
		r := g.median
		if r == nil {
			continue
		}
		load, cold, hot := r.Window("load"), r.Window("cold-get"), r.Window("hot-get")
		if load == nil || cold == nil || hot == nil {
			continue
		}
		cl, okc := cold.Latency["get-hit"]
		hl, okh := hot.Latency["get-hit"]
		fmt.Fprintf(b, "| %s | %.0f%s | %.1f | %.2f | %.2f / %.2f | %s | %.2f | %s | %.1f | %s | %s |\n",
			g.engine, load.OpsPerSec, spread(g, "%.0f"), load.WriteMBps, load.CPUSeconds, r.WriteAmp, r.DeviceWriteAmp,
			pcts(cl, okc), cold.DevReadsPerGet, pcts(hl, okh), r.BytesPerKey, mib(r.PeakRSS), size(r.DiskUsed))
	}
	errorsLine(b, gs)
}

// Settings renders each engine's configuration, once per engine, or once per set of phases
// where an engine was configured differently in different phases.
func Settings(r *harness.Report) string {
	var b strings.Builder
	type variant struct {
		phases   []string
		desc     string
		settings []engine.Setting
	}
	var engines []string
	byEngine := map[string][]*variant{}
	for _, res := range r.Results {
		if len(res.Settings) == 0 {
			continue
		}
		vs, seen := byEngine[res.Engine]
		if !seen {
			engines = append(engines, res.Engine)
		}
		var v *variant
		for _, x := range vs {
			if slices.Equal(x.settings, res.Settings) {
				v = x
			}
		}
		if v == nil {
			v = &variant{desc: res.Description, settings: res.Settings}
			byEngine[res.Engine] = append(vs, v)
		}
		if !slices.Contains(v.phases, res.Phase) {
			v.phases = append(v.phases, res.Phase)
		}
	}
	for _, e := range engines {
		vs := byEngine[e]
		for _, v := range vs {
			label := e
			if len(vs) > 1 {
				label += " (" + strings.Join(v.phases, ", ") + ")"
			}
			fmt.Fprintf(&b, "**%s**: %s\n\n", label, v.desc)
			for _, s := range v.settings {
				fmt.Fprintf(&b, "- %s: %s\n", s.Name, s.Value)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
