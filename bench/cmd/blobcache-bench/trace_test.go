package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTraceRun generates a tiny Zipf trace, saves it and replays it; then replays the saved file:
// the two replays see the same requests and must agree. They run PolicyFIFO: reinsertion runs on
// a goroutine of its own, so its replays differ a little from run to run.
func TestTraceRun(t *testing.T) {
	dir := t.TempDir()
	saved := filepath.Join(dir, "z.bin")
	runJSON := func(args ...string) traceReport {
		t.Helper()
		out := filepath.Join(dir, "r.json")
		stdout := captureStdout(t, func() {
			if err := run(append([]string{"trace", "-dir", dir, "-json", out, "-cache", "4MiB,0.5", "-policy", "fifo"}, args...)); err != nil {
				t.Fatal(err)
			}
		})
		if !strings.Contains(stdout, "| miss ratio |") {
			t.Errorf("no table:\n%s", stdout)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var rep traceReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	gen := runJSON("-zipf", "0.9", "-objects", "3000", "-requests", "12000", "-size", "2048", "-save", saved)
	back := runJSON("-oracle", saved)
	if gen.Summary != back.Summary || len(gen.Runs) != 2 || len(back.Runs) != 2 {
		t.Fatalf("generated %+v, read back %+v", gen, back)
	}
	for i := range gen.Runs {
		g, b := gen.Runs[i], back.Runs[i]
		if g.Misses != b.Misses || g.FlushedBytes != b.FlushedBytes {
			t.Errorf("cache %s: %d misses, %d bytes written; from the saved trace %d, %d", g.Cache, g.Misses, g.FlushedBytes, b.Misses, b.FlushedBytes)
		}
	}
	if r := gen.Runs[0]; r.MaxSize != 4<<20 || r.Misses <= int64(gen.Summary.Objects) {
		t.Errorf("4 MiB of a 6 MiB trace: MaxSize %d, %d misses for %d objects", r.MaxSize, r.Misses, gen.Summary.Objects)
	}
}

func TestParseCacheSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"0.01", 1000}, {"1.0", 100000}, {"64MiB", 64 << 20}, {"2G", 2 << 30}, {"12345", 12345}, {"0", -1}, {"1.5", -1}, {"x", -1}, {"-3KiB", -1}} {
		got, err := parseCacheSize(tc.in, 100000)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("%q: %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
