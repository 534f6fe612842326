package index

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// benchN is the size of the benchmark indexes: 1<<20, about 1M entries.
const benchN = 1 << 20

var benchImpls = []struct {
	name string
	new  func() Index
}{
	{"HashTable", func() Index { return NewHashTable(0) }},
	{"HashTable-hinted", func() Index { return NewHashTable(benchN) }}, // its first tables on huge pages
	{"SkipList", func() Index { return NewSkipList() }},
}

// benchKeys returns n distinct random hashes, the same ones on every call for a given seed.
func benchKeys(seed uint64, n int) []uint64 {
	keys := make([]uint64, n)
	x := seed
	for i := range keys {
		if keys[i] = splitmix64(&x); keys[i] == 0 {
			keys[i] = 1
		}
	}
	return keys
}

var (
	benchHits   = benchKeys(1, benchN)
	benchMisses = benchKeys(2, benchN) // disjoint from benchHits (2^-24 odds otherwise)

	// benchFull caches one read-only index per implementation and size, so that -count=5 builds
	// each once.
	benchFullMu sync.Mutex
	benchFull   = map[string]Index{}
)

// fullIndex returns an index of the first n benchHits.
func fullIndex(name string, newIdx func() Index, n int) Index {
	benchFullMu.Lock()
	defer benchFullMu.Unlock()
	key := fmt.Sprint(name, n)
	if idx, ok := benchFull[key]; ok {
		return idx
	}
	idx := fill(newIdx(), benchHits[:n])
	benchFull[key] = idx
	return idx
}

func fill(idx Index, keys []uint64) Index {
	for i, h := range keys {
		idx.Put(h, Loc{Segment: uint32(i % 64), Offset: uint32(i), Length: 4096})
	}
	return idx
}

// BenchmarkGet looks up keys in random order: hit (present), miss (absent), in an index of 1M
// entries (the figure that matters) and of 4K (fits in the CPU caches: the cost without misses).
func BenchmarkGet(b *testing.B) {
	for _, im := range benchImpls {
		for _, size := range []struct {
			name string
			n    int
		}{{"1M", benchN}, {"4K", 4096}} {
			for _, tc := range []struct {
				name string
				keys []uint64
				want bool
			}{{"hit", benchHits, true}, {"miss", benchMisses, false}} {
				b.Run(im.name+"/"+size.name+"/"+tc.name, func(b *testing.B) {
					idx := fullIndex(im.name, im.new, size.n)
					b.ReportAllocs()
					mask := size.n - 1
					i := 0
					for b.Loop() {
						if _, ok := idx.Get(tc.keys[i&mask]); ok != tc.want {
							b.Fatal("wrong answer")
						}
						i++
					}
				})
			}
		}
	}
}

// BenchmarkGetParallel runs hits from GOMAXPROCS goroutines, each from its own part of the keys.
func BenchmarkGetParallel(b *testing.B) {
	for _, im := range benchImpls {
		b.Run(im.name, func(b *testing.B) {
			idx := fullIndex(im.name, im.new, benchN)
			var start atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(benchN / 16))
				for pb.Next() {
					if _, ok := idx.Get(benchHits[i&(benchN-1)]); !ok {
						b.Error("miss")
						return
					}
					i++
				}
			})
		})
	}
}

// BenchmarkPut: insert adds new keys to an index that starts empty (growth included, amortized);
// insert-presized does the same into a HashTable sized by its capacity hint (no growth); replace
// overwrites the Loc of keys of a 1M-entry index.
func BenchmarkPut(b *testing.B) {
	for _, im := range benchImpls {
		b.Run(im.name+"/insert", func(b *testing.B) {
			idx := im.new()
			x := uint64(3)
			b.ReportAllocs()
			for b.Loop() {
				idx.Put(splitmix64(&x)|1, Loc{Segment: 1, Offset: uint32(x), Length: 4096})
			}
		})
		if im.name == "HashTable" {
			b.Run(im.name+"/insert-presized", func(b *testing.B) {
				idx := NewHashTable(b.N)
				x := uint64(3)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					idx.Put(splitmix64(&x)|1, Loc{Segment: 1, Offset: uint32(x), Length: 4096})
				}
			})
		}
		b.Run(im.name+"/replace", func(b *testing.B) {
			idx := fill(im.new(), benchHits)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := idx.Put(benchHits[i&(benchN-1)], Loc{Segment: 2, Offset: uint32(i), Length: 4096}); !ok {
					b.Fatal("not replaced")
				}
				i++
			}
		})
	}
}

// BenchmarkDelete deletes keys of an index kept between 7/8 and all of 1M entries: it deletes
// 1/8 of the keys (timed), puts them back (not timed), and so on.
func BenchmarkDelete(b *testing.B) {
	const batch = benchN / 8
	for _, im := range benchImpls {
		b.Run(im.name, func(b *testing.B) {
			idx := fill(im.new(), benchHits)
			b.ReportAllocs()
			b.ResetTimer()
			for done, off := 0, 0; done < b.N; off = (off + batch) & (benchN - 1) {
				n := min(batch, b.N-done)
				keys := benchHits[off : off+n]
				for _, h := range keys {
					if _, ok := idx.Delete(h); !ok {
						b.Fatal("not found")
					}
				}
				done += n
				b.StopTimer()
				fill(idx, keys)
				b.StartTimer()
			}
		})
	}
}
