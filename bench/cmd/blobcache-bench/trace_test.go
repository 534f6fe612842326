package main

import (
	"encoding/json"
	"fmt"
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
		rep, stdout := traceJSON(t, dir, append([]string{"-cache", "4MiB,0.5", "-policy", "fifo"}, args...)...)
		if !strings.Contains(stdout, "| miss ratio |") {
			t.Errorf("no table:\n%s", stdout)
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

// TestTraceMemory replays a tiny trace without a memory tier and with one of a tenth of the
// cache (-memory 0,0.1). The tier holds only values the segments hold too and its hits count in
// the index as hits from disk do, so it turns no miss into a hit nor a hit into a miss: under
// PolicyFIFO, whose replays repeat exactly, the two runs miss the same requests and write the
// same bytes, and the tier serves part of the hits. Without -memory, neither the table nor the
// JSON has a memory column or field.
func TestTraceMemory(t *testing.T) {
	dir := t.TempDir()
	zipf := []string{"-zipf", "0.9", "-objects", "3000", "-requests", "30000", "-size", "2048", "-cache", "0.25", "-policy", "fifo"}
	rep, stdout := traceJSON(t, dir, append(zipf, "-memory", "0,0.1")...)
	if !strings.Contains(stdout, "| memory hits / hits |") {
		t.Errorf("no memory columns:\n%s", stdout)
	}
	if len(rep.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(rep.Runs))
	}
	without, with := rep.Runs[0], rep.Runs[1]
	if without.Memory != nil || without.MemoryHitShare != nil {
		t.Errorf("memory figures without a tier: %+v", without)
	}
	m := with.Memory
	if m == nil || with.MemoryHitShare == nil {
		t.Fatalf("no memory figures with a tier: %+v", with)
	}
	t.Logf("miss ratio %.4f without the tier, %.4f with it; %.3f of the hits from memory, %d inserts, %d evictions",
		without.MissRatio, with.MissRatio, *with.MemoryHitShare, m.Inserts, m.Evictions)
	if m.Size != with.MaxSize/10 || *with.MemoryHitShare <= 0 || *with.MemoryHitShare != m.HitShare() || m.Inserts == 0 {
		t.Errorf("memory %+v, share %v: want a tenth of MaxSize %d, hits from it and inserts", *m, *with.MemoryHitShare, with.MaxSize)
	}
	if with.Misses != without.Misses || with.FlushedBytes != without.FlushedBytes || with.MissRatio != without.MissRatio {
		t.Errorf("%d misses (%.4f), %d bytes written with the tier; %d (%.4f), %d without",
			with.Misses, with.MissRatio, with.FlushedBytes, without.Misses, without.MissRatio, without.FlushedBytes)
	}

	_, stdout = traceJSON(t, dir, zipf...)
	if strings.Contains(stdout, "memory") {
		t.Errorf("a memory column without -memory:\n%s", stdout)
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "memory") {
		t.Errorf("a memory field without -memory:\n%s", b)
	}
}

// TestTraceMemoryOnWrite replays a tiny trace with a memory tier that values enter on their
// second hit (the library's default) and with one they enter as they are written
// (-memory-admission write, blobcache serve's default). Either way the segments keep the same
// records (PolicyFIFO), so the two runs miss the same requests; on write, every value the replay
// puts enters the tier, so it takes in at least as many as there were misses and more than on
// second hits. A word other than second-hit or write is refused.
func TestTraceMemoryOnWrite(t *testing.T) {
	dir := t.TempDir()
	zipf := []string{"-zipf", "0.9", "-objects", "3000", "-requests", "30000", "-size", "2048", "-cache", "0.25", "-policy", "fifo", "-memory", "0.1"}
	second, _ := traceJSON(t, dir, zipf...)
	write, _ := traceJSON(t, dir, append(zipf, "-memory-admission", "write")...)
	s, w := second.Runs[0], write.Runs[0]
	if s.Memory == nil || w.Memory == nil {
		t.Fatalf("no memory figures: %+v, %+v", s, w)
	}
	t.Logf("second hit: %d inserts, %.3f of hits from memory; on write: %d inserts, %.3f; %d misses",
		s.Memory.Inserts, *s.MemoryHitShare, w.Memory.Inserts, *w.MemoryHitShare, w.Misses)
	if s.Memory.Admission != "second-hit" || w.Memory.Admission != "write" {
		t.Errorf("admission recorded as %q and %q", s.Memory.Admission, w.Memory.Admission)
	}
	if s.Misses != w.Misses || s.FlushedBytes != w.FlushedBytes {
		t.Errorf("on write %d misses, %d bytes written; on second hit %d, %d", w.Misses, w.FlushedBytes, s.Misses, s.FlushedBytes)
	}
	if w.Memory.Inserts < uint64(w.Misses) || w.Memory.Inserts <= s.Memory.Inserts {
		t.Errorf("on write %d inserts for %d misses; on second hit %d", w.Memory.Inserts, w.Misses, s.Memory.Inserts)
	}
	err := run([]string{"trace", "-dir", dir, "-zipf", "0.9", "-objects", "10", "-requests", "10", "-memory", "0.1", "-memory-admission", "first"})
	if err == nil || !strings.Contains(err.Error(), "second-hit or write") {
		t.Errorf("-memory-admission first: %v", err)
	}
}

func TestParseMemorySize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"0", 0}, {"0.0", 0}, {"0.1", 10000}, {"1.0", 100000}, {"16MiB", 16 << 20}, {"1.5", -1}, {"-0.1", -1}, {"x", -1}} {
		got, err := parseMemorySize(tc.in, 100000)
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

// traceJSON runs "trace" with args in dir and returns its JSON report and what it printed.
func traceJSON(t *testing.T, dir string, args ...string) (traceReport, string) {
	t.Helper()
	out := filepath.Join(dir, "r.json")
	stdout := captureStdout(t, func() {
		if err := run(append([]string{"trace", "-dir", dir, "-json", out}, args...)); err != nil {
			t.Fatal(err)
		}
	})
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep traceReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, stdout
}

// TestTraceCompression replays a tiny trace with text values, without compression and with
// zstd (-compression none,zstd -values text): at the same MaxSize the cache that compresses
// holds more and misses less. With random values, zstd stores every value as given and misses
// as none does (PolicyFIFO repeats exactly). Without the flags, the table has no compression
// column.
func TestTraceCompression(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	zipf := []string{"-zipf", "0.7", "-objects", "2000", "-requests", "20000", "-size-min", "4096", "-size-max", "32768",
		"-cache", "0.25", "-policy", "fifo", "-compression", "none,zstd", "-corpus", corpus}
	text, stdout := traceJSON(t, dir, append(zipf, "-values", "text")...)
	if !strings.Contains(stdout, "| compression | values |") {
		t.Errorf("no compression column:\n%s", stdout)
	}
	random, _ := traceJSON(t, dir, append(zipf, "-values", "random")...)
	if len(text.Runs) != 2 || len(random.Runs) != 2 {
		t.Fatalf("%d and %d runs, want 2 each", len(text.Runs), len(random.Runs))
	}
	for _, rep := range []traceReport{text, random} {
		for i, want := range []string{"none", "zstd"} {
			if r := rep.Runs[i]; r.Compression != want || r.MaxSize != rep.Runs[0].MaxSize {
				t.Errorf("run %d: compression %q, MaxSize %d; want %q, %d", i, r.Compression, r.MaxSize, want, rep.Runs[0].MaxSize)
			}
		}
	}
	none, zstd := text.Runs[0], text.Runs[1]
	t.Logf("text: miss ratio %.4f without compression, %.4f with zstd (stored %d of %d bytes compressed)", none.MissRatio, zstd.MissRatio, zstd.CompressedOut, zstd.CompressedIn)
	if none.Values != "text" || zstd.CompressedIn < 2*zstd.CompressedOut || zstd.MissRatio >= none.MissRatio-0.05 {
		t.Errorf("text: %+v without compression, %+v with zstd: want values shrunk and fewer misses", none, zstd)
	}
	if r := random.Runs; r[1].CompressedIn != 0 || r[1].StoredAsGiven == 0 || r[0].Misses != r[1].Misses {
		t.Errorf("random: %+v without compression, %+v with zstd: want every value stored as given and the same misses", r[0], r[1])
	}
	_, stdout = traceJSON(t, dir, "-zipf", "0.7", "-objects", "2000", "-requests", "5000", "-size", "2048", "-cache", "0.25", "-policy", "fifo")
	if strings.Contains(stdout, "compression") {
		t.Errorf("a compression column without -compression:\n%s", stdout)
	}
	if err := run([]string{"trace", "-zipf", "0.7", "-objects", "100", "-requests", "100", "-values", "ones"}); err == nil {
		t.Error("-values ones: no error")
	}
}

// writeCorpus writes a directory holding one .go file of about 1 MiB of Go-like text that
// compresses about threefold, and returns it.
func writeCorpus(t *testing.T, dir string) string {
	t.Helper()
	corpus := filepath.Join(dir, "corpus")
	if err := os.Mkdir(corpus, 0o755); err != nil {
		t.Fatal(err)
	}
	var text []byte
	x := uint64(1)
	for i := 0; len(text) < 1<<20; i++ {
		x = x*6364136223846793005 + 1442695040888963407 // a constant no line shares with another
		text = fmt.Appendf(text, "// f%d returns x scaled.\nfunc f%d(x int) int { return x*%d + 0x%x }\n\n", i, i, i%1000, x)
	}
	if err := os.WriteFile(filepath.Join(corpus, "f.go"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	return corpus
}
