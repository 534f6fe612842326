package report

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/bench/engine"
	"github.com/seed57392e9e/blobcache/bench/harness"
	"github.com/seed57392e9e/blobcache/bench/hist"
)

func mixedResult(eng string, rep int, ops float64) harness.PhaseResult {
	return harness.PhaseResult{Engine: eng, Phase: harness.PhaseMixed, Rep: rep, PeakRSS: 100 << 20,
		Windows: []harness.Window{{Name: "mixed", Ops: 1000, OpsPerSec: ops, CPUSeconds: 1,
			Latency: map[string]hist.Summary{"get-hit": {P50Us: 100, P99Us: 2000, P999Us: 15000}}}}}
}

func TestMedianAndRatios(t *testing.T) {
	r := &harness.Report{Engines: []string{"blobcache", "rocksdb"}, Phases: []string{harness.PhaseMixed}, Reps: 3,
		Config: harness.DefaultConfig()}
	for i, ops := range []float64{300, 100, 200} {
		r.Results = append(r.Results, mixedResult("blobcache", i+1, ops), mixedResult("rocksdb", i+1, 50))
	}
	md := Markdown(r)
	for _, want := range []string{"| blobcache | 200 (100–300) |", "100 µs / 2.00 ms / 15 ms", "| blobcache | rocksdb | 4.00x | 1.00x | 1.00x |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestFailedRunIsReported(t *testing.T) {
	r := &harness.Report{Engines: []string{"rocksdb"}, Phases: []string{harness.PhaseMixed}, Config: harness.DefaultConfig(),
		Results: []harness.PhaseResult{{Engine: "rocksdb", Phase: harness.PhaseMixed, Error: "engine: unknown engine"}}}
	if md := Markdown(r); !strings.Contains(md, "**rocksdb failed**: engine: unknown engine") {
		t.Errorf("failure not shown:\n%s", md)
	}
}

func TestMerge(t *testing.T) {
	dir := t.TempDir()
	a := &harness.Report{Engines: []string{"blobcache", "pebble"}, Phases: []string{harness.PhaseMixed}, Reps: 1,
		Results: []harness.PhaseResult{mixedResult("blobcache", 1, 10), mixedResult("pebble", 1, 1)}}
	b := &harness.Report{Engines: []string{"pebble"}, Phases: []string{harness.PhaseMixed}, Reps: 1,
		Results: []harness.PhaseResult{mixedResult("pebble", 1, 5)}}
	pa, pb := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := WriteJSON(a, pa); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(b, pb); err != nil {
		t.Fatal(err)
	}
	m, err := Merge([]string{pa, pb})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Results) != 2 {
		t.Fatalf("%d results, want 2", len(m.Results))
	}
	for _, res := range m.Results {
		if res.Engine == "pebble" && res.Windows[0].OpsPerSec != 5 {
			t.Errorf("pebble's run was not replaced: %v ops/s", res.Windows[0].OpsPerSec)
		}
	}
	charts, err := Charts(m, filepath.Join(dir, "charts"))
	if err != nil || len(charts) != 2 {
		t.Errorf("charts %v, %v; want the two mixed charts", charts, err)
	}
}

func TestDur(t *testing.T) {
	for us, want := range map[float64]string{0: "-", 0.25: "250 ns", 3.456: "3.46 µs", 250: "250 µs", 4500: "4.50 ms", 123456: "123 ms"} {
		if got := dur(us); got != want {
			t.Errorf("dur(%v) = %q, want %q", us, got, want)
		}
	}
}

func TestSettingsPerPhase(t *testing.T) {
	set := func(v string) []engine.Setting { return []engine.Setting{{Name: "write_buffer_size", Value: v}} }
	r := &harness.Report{Results: []harness.PhaseResult{
		{Engine: "rocksdb", Phase: harness.PhaseMixed, Settings: set("13 MiB")},
		{Engine: "rocksdb", Phase: harness.PhaseIOPerGet, Settings: set("146 MiB")},
		{Engine: "rocksdb", Phase: harness.PhaseCapacity, Settings: set("146 MiB")},
		{Engine: "pebble", Phase: harness.PhaseMixed, Settings: set("256 MiB")},
		{Engine: "pebble", Phase: harness.PhaseIOPerGet, Settings: set("256 MiB")},
	}}
	got := Settings(r)
	for _, want := range []string{"**rocksdb (mixed)**", "- write_buffer_size: 13 MiB", "**rocksdb (iopg, capacity)**", "- write_buffer_size: 146 MiB", "**pebble**:"} {
		if !strings.Contains(got, want) {
			t.Errorf("settings lack %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "**pebble") != 1 {
		t.Errorf("pebble's settings, the same in every phase, shown more than once:\n%s", got)
	}
}

func TestRocksDBL0Line(t *testing.T) {
	r := &harness.Report{Engines: []string{"blobcache", "rocksdb"}, Phases: []string{harness.PhaseMixed}, Reps: 2, Config: harness.DefaultConfig()}
	for i := range 2 {
		res := mixedResult("rocksdb", i+1, float64(50+i))
		res.Total.Counters = map[string]int64{"l0_files": int64(450 + i)}
		r.Results = append(r.Results, mixedResult("blobcache", i+1, 100), res)
	}
	if md := Markdown(r); !strings.Contains(md, "- rocksdb: 451 L0 files at the end of the mixed window (runs: 450, 451)") {
		t.Errorf("L0 line missing:\n%s", md)
	}
}

// TestDropSettleShown: a run that waited after dropping the page cache says so beside the drop,
// and one that did not says nothing of it.
func TestDropSettleShown(t *testing.T) {
	r := &harness.Report{Engines: []string{"blobcache"}, Phases: []string{harness.PhaseMixed}, Config: harness.DefaultConfig()}
	r.Machine.DropCaches = "yes"
	r.Results = append(r.Results, mixedResult("blobcache", 1, 100))
	if md := Markdown(r); strings.Contains(md, "after the drop") {
		t.Errorf("a run without a wait mentions one:\n%s", md)
	}
	r.Config.DropSettle = 10 * time.Second
	if md := Markdown(r); !strings.Contains(md, "Page cache dropped between phases: yes, each engine's first load and each cold window started 10s after the drop.") {
		t.Errorf("the wait is not shown:\n%s", md)
	}
}
