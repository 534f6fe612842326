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

// smallSizes are filters that fit in L1 (21845 keys: 32 KiB of bits) and in
// L2 (349525 keys: 512 KiB), both exact (below bitset.HugeMinBytes), for
// BenchmarkTest to compare with BenchmarkRandomLoadFloor size by size.
var smallSizes = []struct {
	name string
	keys uint64
}{
	{"keys=21K", 21845},
	{"keys=341K", 349525},
}

var sink atomic.Int64

// BenchmarkTest queries filled filters of 32 KiB, 512 KiB, 2 MiB (1M keys)
// and 96 MiB (64M keys) with added hashes (hit) and others (miss), one query
// per iteration. BenchmarkRandomLoadFloor is the same loop without the bit
// ops, over the same sizes.
func BenchmarkTest(b *testing.B) {
	for _, sz := range append(smallSizes[:len(smallSizes):len(smallSizes)], benchSizes...) {
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

// BenchmarkRandomLoadFloor is BenchmarkTest minus the bit ops: per
// iteration it reads the next hash from the same kind of table, picks a word
// the way Test does ((h>>32)*words>>32), loads it atomically (LoadWord, as
// Test does) and compares it with the hash, counting matches so the load
// cannot be dropped. It measures what a random word load costs at each
// filter size on this machine, the floor under Test there.
//
// The words are a fresh filter's bit array, so they are allocated as the
// filter's are (huge pages from bitset.HugeMinBytes), and are written with
// random values first: untouched anonymous memory reads as the kernel's
// shared zero page, which stays in cache whatever the array's size. Sizes are
// the smallSizes and benchSizes filters' Bytes: 32 KiB, 512 KiB, 2 MiB (1M
// keys: 1.5 MiB of bits rounded up to one huge page, all of which Test
// indexes) and 96 MiB (64M keys), plus 1.5 MiB, the first 1.5 MiB of the
// 2 MiB array, for what the 1M filter would cost unrounded.
func BenchmarkRandomLoadFloor(b *testing.B) {
	hs := randHashes(rand.New(rand.NewPCG(5, 5)), tableSize)
	for _, sz := range append(smallSizes[:len(smallSizes):len(smallSizes)], benchSizes...) {
		bs := New(sz.keys, DefaultBitsPerKey).bits
		r := rand.New(rand.NewPCG(sz.keys, 5))
		for i := range bs.Words() {
			bs.StoreWord(i, r.Uint64())
		}
		words := []int{bs.Words()} // words indexed, from the start of bs
		if sz.keys == 1<<20 {
			words = []int{3 << 20 / 2 / 8, bs.Words()}
		}
		for _, nw := range words {
			b.Run("bytes="+byteSize(nw*8), func(b *testing.B) {
				words := uint64(nw)
				b.ReportAllocs()
				b.ResetTimer()
				n := 0
				for i := 0; i < b.N; i++ {
					h := hs[i&(tableSize-1)]
					if w := bs.LoadWord(int((h >> 32) * words >> 32)); w|h == w {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

// byteSize formats n bytes as a benchmark name: 32KiB, 1.5MiB, 96MiB.
func byteSize(n int) string {
	if n < 1<<20 {
		return fmt.Sprintf("%gKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%gMiB", float64(n)/(1<<20))
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

// BenchmarkTestMany is BenchmarkTest for the misses, 64 hashes per TestMany call; ns/op is per
// hash, to compare with BenchmarkRandomLoadFloor at the same size.
func BenchmarkTestMany(b *testing.B) {
	for _, sz := range append(smallSizes[:len(smallSizes):len(smallSizes)], benchSizes...) {
		fx := fixture(sz.keys)
		b.Run(sz.name+"/miss", func(b *testing.B) {
			var out [64]bool
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for i := 0; i < b.N; i += 64 {
				j := i & (tableSize - 1) &^ 63
				fx.f.TestMany(fx.miss[j:j+64], out[:])
				if out[0] {
					n++
				}
			}
			sink.Add(int64(n))
		})
	}
}
