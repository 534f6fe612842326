package bloom

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// Benchmark filters are sized for 1M keys (1.5 MiB at 12 bits per key,
// rounded up to one 2 MiB huge page: the size of this machine's L2) and 64M
// keys (96 MiB, 48 huge pages, bigger than L2, as the cache's filter is in
// production) and filled with that many keys. Hashes come from tables of
// 2^20 precomputed random values read in order, so the loop adds one
// sequential, prefetched load and the filter sees random blocks.
const tableSize = 1 << 20

var benchSizes = []struct {
	name string
	keys uint64
}{
	{"keys=1M", 1 << 20},
	{"keys=64M", 64 << 20},
}

type benchFixture struct {
	f    *Filter
	hits []uint64 // added hashes
	miss []uint64 // other hashes, 0.4% (1M) or 1% (64M) of them false positives
}

var (
	fixturesMu sync.Mutex
	fixtures   = map[uint64]*benchFixture{}
)

// fixture returns a filter sized for keys and holding keys random hashes,
// built once per process (filling the 64M one takes seconds).
func fixture(keys uint64) *benchFixture {
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if fx, ok := fixtures[keys]; ok {
		return fx
	}
	r := rand.New(rand.NewPCG(keys, 1))
	fx := &benchFixture{f: New(keys, DefaultBitsPerKey), hits: make([]uint64, tableSize)}
	for i := range keys {
		h := r.Uint64() | 1
		fx.f.Add(h)
		if i < tableSize {
			fx.hits[i] = h
		}
	}
	fx.miss = randHashes(r, tableSize)
	fixtures[keys] = fx
	return fx
}

var sink atomic.Int64

func BenchmarkTest(b *testing.B) {
	for _, sz := range benchSizes {
		fx := fixture(sz.keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(fmt.Sprintf("%s/%s", sz.name, c.name), func(b *testing.B) {
				f, hs := fx.f, c.hs
				b.ReportAllocs()
				b.ResetTimer()
				n := 0
				for i := 0; i < b.N; i++ {
					if f.Test(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

func BenchmarkTestParallel(b *testing.B) {
	for _, sz := range benchSizes {
		fx := fixture(sz.keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(fmt.Sprintf("%s/%s", sz.name, c.name), func(b *testing.B) {
				f, hs := fx.f, c.hs
				var start atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(start.Add(tableSize / 8))
					n := 0
					for pb.Next() {
						if f.Test(hs[i&(tableSize-1)]) {
							n++
						}
						i++
					}
					sink.Add(int64(n))
				})
			})
		}
	}
}

// addHash returns the i-th hash to add: table entries mixed with a value per
// pass over the table, so that hashes do not repeat across passes.
func addHash(table []uint64, i int) uint64 {
	return table[i&(tableSize-1)] ^ uint64(i/tableSize)*mix
}

// BenchmarkAdd adds fresh hashes to an empty filter, clearing it (timer
// stopped) whenever it reaches its design load, so it measures filling a
// filter from empty to full.
func BenchmarkAdd(b *testing.B) {
	table := randHashes(rand.New(rand.NewPCG(3, 3)), tableSize)
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			f := New(sz.keys, DefaultBitsPerKey)
			b.ReportAllocs()
			b.ResetTimer()
			left := sz.keys
			for i := 0; i < b.N; i++ {
				if left--; left == 0 {
					b.StopTimer()
					f.bits.Clear()
					left = sz.keys
					b.StartTimer()
				}
				f.Add(addHash(table, i))
			}
		})
	}
}

// BenchmarkAddParallel is BenchmarkAdd from all CPUs. The goroutines count
// their adds in steps of 1024 in a shared counter, and the one that crosses
// the design load clears the filter while the others keep adding; the clear
// (about 0.3 ns per add) is inside the timing.
func BenchmarkAddParallel(b *testing.B) {
	table := randHashes(rand.New(rand.NewPCG(4, 4)), tableSize)
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			f := New(sz.keys, DefaultBitsPerKey)
			var added, start atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(1)) << 40 // disjoint hash streams
				for pb.Next() {
					f.Add(addHash(table, i))
					i++
					if i%1024 == 0 {
						if n := added.Add(1024); n%sz.keys < 1024 {
							f.bits.Clear()
						}
					}
				}
			})
		})
	}
}
