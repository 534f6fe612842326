package replay

import (
	"testing"

	"github.com/seed57392e9e/blobcache/bench/trace"
)

// A cache larger than the trace's unique bytes misses each object once: the miss ratio is
// objects over requests, and it writes each object once.
func TestRunColdMissesOnly(t *testing.T) {
	reqs, err := trace.Zipf{Alpha: 0.8, Objects: 500, Requests: 4000, Size: 1024, Seed: 1}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	reqs = append(reqs, trace.Request{ID: 1 << 50, Size: 0}) // skipped, as libCacheSim does
	sum := trace.Summarize(reqs)
	seg, wb, err := Geometry(8<<20, 4, 1024)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(reqs, Config{Dir: t.TempDir(), MaxSize: 8 << 20, SegmentSize: seg, WriteBufferSize: wb})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != int64(sum.Requests) || res.Skipped != 1 || res.Misses != int64(sum.Objects) || res.Evictions != 0 {
		t.Fatalf("%+v, want %d requests, 1 skipped, %d misses, no eviction", res, sum.Requests, sum.Objects)
	}
	if want := float64(sum.Objects) / float64(sum.Requests); res.MissRatio() != want {
		t.Errorf("miss ratio %v, want %v", res.MissRatio(), want)
	}
	// Every object written once, with its 64-byte header and 8-byte key.
	if want := uint64(sum.UniqueBytes) + uint64(sum.Objects)*(64+KeyLen); res.FlushedBytes != want {
		t.Errorf("flushed %d bytes, want %d", res.FlushedBytes, want)
	}
}

// A cache smaller than the unique bytes evicts, and FIFO by segment cannot do better than the
// cold misses.
func TestRunEvicts(t *testing.T) {
	reqs, err := trace.Zipf{Alpha: 0.6, Objects: 4000, Requests: 20000, Size: 4096, Seed: 2}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	sum := trace.Summarize(reqs)
	seg, wb, err := Geometry(sum.UniqueBytes/4, 4, int64(sum.MaxSize))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(reqs, Config{Dir: t.TempDir(), MaxSize: sum.UniqueBytes / 4, SegmentSize: seg, WriteBufferSize: wb})
	if err != nil {
		t.Fatal(err)
	}
	if res.Evictions == 0 || res.Misses <= int64(sum.Objects) || res.Misses >= res.Requests {
		t.Fatalf("%+v: want evictions and %d < misses < %d", res, sum.Objects, res.Requests)
	}
}

func TestGeometry(t *testing.T) {
	for _, tc := range []struct {
		max      int64
		segments int
		largest  int64
		seg, wb  int64
		bad      bool
	}{
		{max: 1 << 30, segments: 16, largest: 4096, seg: 64 << 20, wb: 4 << 20},
		{max: 160 << 20, segments: 16, largest: 4096, seg: 10 << 20, wb: 1280 << 10},
		{max: 20 << 20, segments: 16, largest: 1 << 20, seg: 1280 << 10, wb: 160 << 10},
		{max: 4 << 20, segments: 16, largest: 4096, seg: 256 << 10, wb: 64 << 10},
		{max: 1 << 20, segments: 16, largest: 4096, seg: 92 << 10, wb: 64 << 10},         // the library's floor
		{max: 4 << 20, segments: 16, largest: 1 << 20, seg: 1<<20 + 8<<10, wb: 64 << 10}, // the largest object
		{max: 150 << 10, segments: 16, largest: 4096, bad: true},
		{max: 1 << 30, segments: 1, largest: 4096, bad: true},
	} {
		seg, wb, err := Geometry(tc.max, tc.segments, tc.largest)
		if tc.bad {
			if err == nil {
				t.Errorf("Geometry(%d, %d, %d) = %d, %d; want an error", tc.max, tc.segments, tc.largest, seg, wb)
			}
			continue
		}
		if err != nil || seg != tc.seg || wb != tc.wb {
			t.Errorf("Geometry(%d, %d, %d) = %d, %d, %v; want %d, %d", tc.max, tc.segments, tc.largest, seg, wb, err, tc.seg, tc.wb)
		}
	}
}
