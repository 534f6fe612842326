package index

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// memPoint is the memory of an index after n one-by-one inserts of random hashes.
type memPoint struct {
	n      int
	mem    float64 // MemoryBytes per entry
	heap   float64 // HeapAlloc growth per entry, after runtime.GC
	insert time.Duration
}

// measureMemory inserts random hashes one at a time into a new index and measures it each time
// the entry count reaches one of sizes (ascending).
func measureMemory(newIdx func() Index, sizes []int) []memPoint {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	start := time.Now()
	idx := newIdx()
	var pts []memPoint
	x := uint64(0x5eed)
	n := 0
	for _, size := range sizes {
		for n < size {
			h := splitmix64(&x)
			if h == 0 {
				h = 1
			}
			if _, replaced := idx.Put(h, Loc{Segment: uint32(h), Offset: uint32(h >> 32), Length: 100}); !replaced {
				n++
			}
		}
		insert := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		pts = append(pts, memPoint{
			n:      n,
			mem:    float64(idx.MemoryBytes()) / float64(n),
			heap:   float64(int64(ms.HeapAlloc)-int64(base)) / float64(n),
			insert: insert,
		})
		start = time.Now()
	}
	runtime.KeepAlive(idx)
	return pts
}

// splitmix64 is a tiny seeded generator of well-mixed hashes for the memory runs and benchmarks.
func splitmix64(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// memSizes are the checkpoints of the memory test: 1M..5M entries, 1M only in -short mode and
// under the race detector.
func memSizes() []int {
	if testing.Short() || raceEnabled {
		return []int{1_000_000}
	}
	return []int{1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000}
}

// TestMemoryPerEntry checks the memory budget: HashTable stays at or under 23.2 bytes per entry at
// every size, measured both by MemoryBytes and by the Go heap. SkipList's figures are reported.
func TestMemoryPerEntry(t *testing.T) {
	// 16-byte slots at the lowest load growth leaves (0.7), and their hit counts.
	const budget = 16/0.7 + 0.25/0.7
	for _, im := range []struct {
		name  string
		new   func() Index
		check bool
	}{
		{"HashTable", func() Index { return NewHashTable(0) }, true},
		{"HashTable/hint5M", func() Index { return NewHashTable(5_000_000) }, false},
		{"SkipList", func() Index { return NewSkipList() }, false},
	} {
		sizes := memSizes()
		if raceEnabled && im.name == "SkipList" {
			continue // a minute under -race for figures that do not depend on it
		}
		if im.name == "HashTable/hint5M" {
			if len(sizes) == 1 {
				continue // pre-sized for 5M, it is not meant to be measured at 1M
			}
			sizes = sizes[len(sizes)-1:]
		}
		for _, p := range measureMemory(im.new, sizes) {
			t.Logf("%-16s %dM entries: MemoryBytes %.2f B/entry, heap %.2f B/entry, inserts took %v",
				im.name, p.n/1_000_000, p.mem, p.heap, p.insert.Round(time.Millisecond))
			if im.check && (p.mem > budget || p.heap > budget) {
				t.Errorf("%s at %d entries: %.2f B/entry by MemoryBytes, %.2f by heap; budget %.1f",
					im.name, p.n, p.mem, p.heap, budget)
			}
		}
	}
}

// BenchmarkMemory builds an index of n entries per iteration, one insert at a time, and reports
// B/entry (MemoryBytes) and heapB/entry (HeapAlloc growth after GC); ns/op is the whole build.
func BenchmarkMemory(b *testing.B) {
	for _, im := range []struct {
		name string
		new  func() Index
	}{
		{"HashTable", func() Index { return NewHashTable(0) }},
		{"SkipList", func() Index { return NewSkipList() }},
	} {
		for _, n := range []int{1_000_000, 5_000_000} {
			b.Run(fmt.Sprintf("%s/%dM", im.name, n/1_000_000), func(b *testing.B) {
				b.ReportAllocs()
				var p memPoint
				for b.Loop() {
					p = measureMemory(im.new, []int{n})[0]
				}
				b.ReportMetric(p.mem, "B/entry")
				b.ReportMetric(p.heap, "heapB/entry")
				b.ReportMetric(float64(p.insert.Nanoseconds())/float64(n), "ns/insert")
			})
		}
	}
}
