package blobcache

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// TestRouteCost: write-back is chosen while its cost is unmeasured or under the ceiling; past
// it, only the probes (one choice in probeEvery among writes of costBytes or more) write back;
// writes under costBytes are neither measured nor probes.
func TestRouteCost(t *testing.T) {
	// backs counts the choices for write-back among n writes of size bytes.
	backs := func(r *routeCost, n int, size int64) int {
		k := 0
		for range n {
			if r.backPays(size) {
				k++
			}
		}
		return k
	}
	var r routeCost
	if got := backs(&r, 4*probeEvery, costBytes); got != 4*probeEvery {
		t.Fatalf("nothing measured: %d of %d choices wrote back, want all", got, 4*probeEvery)
	}

	r.note(costBytes-1, time.Hour) // too small to count
	if got := r.perMiB(); got != 0 {
		t.Fatalf("a write under costBytes measured: %v a MiB", got)
	}
	r.note(16<<20, 16*backCostCeiling/2)
	if got := r.perMiB(); got != backCostCeiling/2 {
		t.Fatalf("per MiB: %v, want %v", got, backCostCeiling/2)
	}
	if got := backs(&r, 4*probeEvery, costBytes); got != 4*probeEvery {
		t.Fatalf("under the ceiling: %d of %d choices wrote back, want all", got, 4*probeEvery)
	}

	// Dearer than the ceiling (the average moves a quarter of the way each write): direct, but
	// for the probes, and writes too small to be measured are no probes.
	for range 8 {
		r.note(4<<20, 4*3*backCostCeiling)
	}
	if got := r.perMiB(); got < 2*backCostCeiling {
		t.Fatalf("after 8 writes at 3x the ceiling the average is %v", got)
	}
	r.choices.Store(0)
	if got := backs(&r, 4*probeEvery, costBytes); got != 4 {
		t.Fatalf("past the ceiling: %d of %d choices wrote back, want the %d probes", got, 4*probeEvery, 4)
	}
	if got := backs(&r, 4*probeEvery, costBytes-1); got != 0 {
		t.Fatalf("past the ceiling: %d of %d small writes wrote back, want none", got, 4*probeEvery)
	}

	// It gets cheaper (the probes measure it): write-back again.
	for range 20 {
		r.note(1<<20, backCostCeiling/4)
	}
	if got := backs(&r, 4*probeEvery, costBytes); got != 4*probeEvery {
		t.Fatalf("cheaper again (%v a MiB): %d of %d choices wrote back", r.perMiB(), got, 4*probeEvery)
	}
}

// TestRouteCostPicks: in a cache whose writes may go back, batches go direct while writing
// through the page cache has cost more than the ceiling, but for the probes, which measure it
// again; write-back is measured (on Linux); each way the bytes are the ones written.
func TestRouteCostPicks(t *testing.T) {
	c := writeBackCache(t, t.TempDir(), 256<<20)
	defer c.Close()
	c.segs.costs.fixed = false
	c.segs.costs.note(1<<20, time.Hour) // the page cache measured dear
	v := value("k", 1, 1<<20)
	put := func(key string) {
		t.Helper()
		if err := c.Put([]byte(key), v); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	c.segs.costs.choices.Store(0)
	for i := range probeEvery - 1 {
		put(fmt.Sprint("dear", i))
	}
	if got := c.Stats().WrittenBackBytes; got != 0 {
		t.Fatalf("%d bytes written back while the page cache cost more than the ceiling", got)
	}
	put("probe") // the probeEvery-th choice goes through the page cache, and is measured
	s := c.Stats()
	if s.WrittenBackBytes < uint64(len(v)) {
		t.Fatalf("the probe: %d bytes written back", s.WrittenBackBytes)
	}
	if s.WriteBackCost >= time.Hour {
		t.Fatalf("the probe was not measured: %v a MiB", s.WriteBackCost)
	}
	for _, k := range []string{"dear0", "dear14", "probe"} {
		if b, ok := getBytes(t, c, k); !ok || !bytes.Equal(b, v) {
			t.Fatalf("%s: wrong bytes or missing", k)
		}
	}
}

// TestRouteCostMixedSizes: TestMixedSizes's load (values below, at and above the write buffer,
// batched and streamed, four writers under the watchdog, a CPU hog beside them) on a cache whose
// write route weighs its measured cost, the page cache measured dear at the start: batches go
// direct, the probes write back and measure again, and the route may turn back and forth while
// writers fill, rotate and evict segments.
func TestRouteCostMixedSizes(t *testing.T) {
	const seg = 8 << 20
	opts := []Option{
		WithWriteBufferSize(2 << 20), // batches of 1 MiB and more: measured and probed
		WithSegmentSize(seg),
		WithMaxSize(8 * seg),
		WithExpectedBlobs(1 << 10),
		WithFlushInterval(2 * time.Millisecond),
	}
	var cache *Cache
	setup := func(c *Cache) {
		skipUnlessWritesBack(t, c, c.dir)
		c.segs.costs.note(costBytes, time.Hour)
		cache = c
	}
	runMixedSizes(t, stressSeedFor(t), opts, mixedLoad{sizes: mixedSize, drains: 1, setup: setup})
	if s := cache.Stats(); s.FlushedBytes <= s.WrittenBackBytes {
		t.Fatalf("%d bytes flushed, %d of them written back: none went direct while the page cache was dear", s.FlushedBytes, s.WrittenBackBytes)
	}
}
