package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed57392e9e/blobcache/bench/engine"
	"github.com/seed57392e9e/blobcache/bench/harness"
)

// childEnv makes the test binary act as blobcache-bench when the driver re-executes it.
const childEnv = "BLOBCACHE_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := run(os.Args[1:]); err != nil {
			os.Stderr.WriteString("child: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestQuickRun is the tiny end-to-end run: every engine compiled in (no C library in the default
// build), every phase, each in its own child process; then the table, the JSON and the charts.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Setenv(childEnv, "1")
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "r.json")
	charts := filepath.Join(dir, "charts")
	stdout := captureStdout(t, func() {
		err := run([]string{"-quick", "-dir", filepath.Join(dir, "data"), "-json", jsonPath, "-charts", charts,
			"-cap-keys", "5000", "-io-keys", "1000,2000,4000"})
		if err != nil {
			t.Fatal(err)
		}
	})
	for _, want := range []string{"### Mixed workload", "### I/Os per Get", "### Capacity", "### Engine settings", "| blobcache |", "| pebble |", "| badger |"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep harness.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if want := len(engine.Names()) * len(harness.AllPhases); len(rep.Results) != want {
		t.Fatalf("%d results, want %d", len(rep.Results), want)
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("%s %s: %s", r.Engine, r.Phase, r.Error)
			continue
		}
		if r.Total.Unexpected != 0 || r.Total.Errors != 0 {
			t.Errorf("%s %s: %d unexpected results, %d errors", r.Engine, r.Phase, r.Total.Unexpected, r.Total.Errors)
		}
		if r.PeakRSS <= 0 || r.ChildMaxRSS <= 0 || r.CPUSeconds() <= 0 || len(r.Settings) == 0 {
			t.Errorf("%s %s: missing figures: peak RSS %d, child max RSS %d, CPU %v, %d settings",
				r.Engine, r.Phase, r.PeakRSS, r.ChildMaxRSS, r.CPUSeconds(), len(r.Settings))
		}
		if r.Total.BytesPut <= 0 || r.WriteAmp <= 0 {
			t.Errorf("%s %s: put %d bytes, write amplification %v", r.Engine, r.Phase, r.Total.BytesPut, r.WriteAmp)
		}
	}
	// A miss costs BlobCache no read system call: the bloom filter answers it.
	for _, r := range rep.Results {
		if r.Engine == "blobcache" && r.Phase == harness.PhaseIOPerGet {
			for _, w := range r.Windows {
				if strings.HasPrefix(w.Name, "get-miss@") && w.SyscallsPerGet > 0.05 {
					t.Errorf("blobcache %s: %.3f read syscalls per miss", w.Name, w.SyscallsPerGet)
				}
			}
		}
	}
	for _, f := range []string{"mixed-throughput-cpu.png", "mixed-latency.png", "io-per-get.png", "capacity.png"} {
		if fi, err := os.Stat(filepath.Join(charts, f)); err != nil || fi.Size() < 1000 {
			t.Errorf("chart %s: %v", f, err)
		}
	}
}

func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		var sb strings.Builder
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				done <- sb.String()
				return
			}
		}
	}()
	defer func() {
		os.Stdout = old
	}()
	f()
	w.Close()
	os.Stdout = old
	return <-done
}
