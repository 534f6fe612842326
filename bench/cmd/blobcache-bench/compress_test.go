package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompressRun runs compress on a tiny configuration, every part, both kinds of values and
// every compression, and reads its JSON: text compresses, so a compressing cache holds several
// times the text one that does not holds at the same MaxSize; random bytes do not, and every
// compression holds what none holds.
func TestCompressRun(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	out := filepath.Join(dir, "c.json")
	stdout := captureStdout(t, func() {
		err := run([]string{"compress", "-dir", dir, "-json", out, "-corpus", corpus, "-repeat", "2",
			"-value-size", "64KiB", "-max-size", "16MiB", "-fill", "1.5", "-bytes", "4MiB"})
		if err != nil {
			t.Fatal(err)
		}
	})
	for _, want := range []string{"#### Effective capacity", "#### Put and Get", "| text | zstd |", "| random | s2 |"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep compressReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Capacity) != 6 || len(rep.Throughput) != 6 || rep.Corpus.Files != 1 || rep.Cold != "no" {
		t.Fatalf("%d capacity and %d throughput cases, corpus %+v, cold %q; want 6, 6, one file, no", len(rep.Capacity), len(rep.Throughput), rep.Corpus, rep.Cold)
	}
	for _, c := range rep.Capacity {
		name := c.Values + " " + c.Compression
		if len(c.Runs) != 2 || len(c.Held.Rounds) != 2 || c.VsNone == nil || c.VsZstdFastest == nil {
			t.Fatalf("%s: %+v: want two rounds and ratios to none", name, c)
		}
		for _, r := range c.Runs {
			if r.Evictions == 0 || r.HeldValues == 0 || r.HeldValues >= r.PutValues || r.HeldBytes != r.HeldValues*64<<10 {
				t.Errorf("%s: %+v: want evictions and some of the values held", name, r)
			}
		}
		t.Logf("%s: held / MaxSize %.3f, stored ratio %.3f, zstd fastest %.3f, vs none %.3f, vs zstd fastest %.3f",
			name, c.Held.Median, c.Stored.Median, c.ZstdFastest.Median, c.VsNone.Median, c.VsZstdFastest.Median)
		if c.Held.Median < 0.7 {
			t.Errorf("%s: held %.3f of MaxSize", name, c.Held.Median)
		}
		switch {
		case c.Values == "random" && (c.VsNone.Min < 0.95 || c.VsNone.Max > 1.05 || c.Stored.Median != 1 || c.ZstdFastest.Median > 1.01):
			t.Errorf("random %s: held %.3f of what none holds, stored ratio %.3f, zstd fastest %.3f: want 1", c.Compression, c.VsNone.Median, c.Stored.Median, c.ZstdFastest.Median)
		case c.Values == "text" && c.Compression != "none" && (c.VsNone.Min < 2 || c.Stored.Min < 2):
			t.Errorf("text %s: held %.3f of what none holds, stored ratio %.3f: want several times", c.Compression, c.VsNone.Median, c.Stored.Median)
		}
	}
	for _, c := range rep.Throughput {
		name := c.Values + " " + c.Compression
		if len(c.Runs) != 2 || c.Put.MBps.Median <= 0 || c.Put.CPUNsPerByte.Median <= 0 || c.GetWarm.MBps.Median <= 0 || c.GetCold != nil {
			t.Errorf("%s: %+v: want two rounds, Put and warm Get figures, no cold ones", name, c)
		}
		if none := c.Compression == "none"; none != (c.PutVsNone == nil) || none != (c.GetWarmVsNone == nil) {
			t.Errorf("%s: ratios to none %v, %v", name, c.PutVsNone, c.GetWarmVsNone)
		}
		for _, r := range c.Runs {
			if r.Put.Bytes != 4<<20 || r.Evictions != 0 || (c.Values == "text" && c.Compression != "none") != (r.CompressedIn == 4<<20) {
				t.Errorf("%s: %+v: want 4 MiB put, nothing evicted, and compressed only text with a compression", name, r)
			}
		}
	}
}

func TestCompressFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-compression", "lz4"}, {"-values", "zeros"}, {"-parts", "all"}, {"-value-size", "0.5"}, {"-repeat", "0"}, {"extra"},
	} {
		if err := run(append([]string{"compress"}, args...)); err == nil {
			t.Errorf("compress %q: no error", args)
		}
	}
}
