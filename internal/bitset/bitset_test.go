package bitset

import (
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

func TestNewSize(t *testing.T) {
	for _, tc := range []struct {
		nbits     uint64
		wantWords int
	}{
		{0, 0},
		{1, 1},
		{63, 1},
		{64, 1},
		{65, 2},
		{512, 8},
		{513, 9},
		{1 << 20, 1 << 14},
	} {
		s := New(tc.nbits)
		if s.Words() != tc.wantWords || s.Len() != uint64(tc.wantWords)*64 {
			t.Errorf("New(%d): Words %d Len %d, want %d words", tc.nbits, s.Words(), s.Len(), tc.wantWords)
		}
		if s.Count() != 0 {
			t.Errorf("New(%d): Count %d, want 0", tc.nbits, s.Count())
		}
	}
}

func TestWordsFor(t *testing.T) {
	const page = HugePageBytes / 8 // words per huge page
	for _, tc := range []struct {
		nbits uint64
		want  uint64
	}{
		{0, 0},
		{1, 1},
		{64, 1},
		{65, 2},
		{HugeMinBytes*8 - 64, HugeMinBytes/8 - 1}, // one word short of 1 MiB: exact
		{HugeMinBytes*8 - 63, page},               // 1 MiB: one huge page
		{HugeMinBytes * 8, page},
		{HugePageBytes * 8, page},
		{HugePageBytes*8 + 1, 2 * page},
		{96 << 23, 48 * page}, // 96 MiB
		{1 << 36, 1 << 30},    // 8 GiB, whole pages already
	} {
		if got := WordsFor(tc.nbits); got != tc.want {
			t.Errorf("WordsFor(%d) = %d, want %d", tc.nbits, got, tc.want)
		}
	}
}

// TestHugeAligned checks that sets of HugeMinBytes or more span whole huge
// pages and, on Linux, start on a huge page boundary, and that smaller sets
// are exact.
func TestHugeAligned(t *testing.T) {
	for _, nbits := range []uint64{HugeMinBytes*8 - 64, HugeMinBytes * 8, 3 * HugePageBytes * 8, 3*HugePageBytes*8 + 1} {
		s := New(nbits)
		start := uintptr(unsafe.Pointer(&s.words[0]))
		huge := s.Words()*8 >= HugeMinBytes
		if cap(s.words) != len(s.words) {
			t.Errorf("New(%d): cap %d != len %d, appends could overwrite the padding", nbits, cap(s.words), len(s.words))
		}
		if uint64(s.Words()) != WordsFor(nbits) {
			t.Errorf("New(%d): %d words, WordsFor says %d", nbits, s.Words(), WordsFor(nbits))
		}
		if huge && (runtime.GOOS == "linux" && start%HugePageBytes != 0 || s.Words()*8%HugePageBytes != 0) {
			t.Errorf("New(%d): %d bytes at %#x, not whole aligned huge pages", nbits, s.Words()*8, start)
		}
		if !huge && uint64(s.Words()) != (nbits+63)/64 {
			t.Errorf("New(%d): %d words, want exactly %d", nbits, s.Words(), (nbits+63)/64)
		}
		// The whole range is usable.
		s.Set(s.Len() - 1)
		s.Set(0)
		if s.Count() != 2 {
			t.Errorf("New(%d): Count %d after setting the first and last bits", nbits, s.Count())
		}
	}
}

func TestSetTestModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	const nbits = 1000
	s := New(nbits)
	model := make(map[uint64]bool)
	for range 5000 {
		i := r.Uint64N(s.Len())
		switch r.IntN(4) {
		case 0:
			s.Set(i)
			model[i] = true
		case 1:
			mask := r.Uint64() & r.Uint64()
			w := int(i / 64)
			s.OrWord(w, mask)
			for b := range 64 {
				if mask&(1<<b) != 0 {
					model[uint64(w)*64+uint64(b)] = true
				}
			}
		default:
			if got := s.Test(i); got != model[i] {
				t.Fatalf("seed %d: Test(%d) = %v, want %v", seed, i, got, model[i])
			}
		}
	}
	if got := s.Count(); got != uint64(len(model)) {
		t.Fatalf("seed %d: Count %d, want %d", seed, got, len(model))
	}
	for w := range s.Words() {
		var want uint64
		for b := range 64 {
			if model[uint64(w)*64+uint64(b)] {
				want |= 1 << b
			}
		}
		if got := s.LoadWord(w); got != want {
			t.Fatalf("seed %d: LoadWord(%d) = %#x, want %#x", seed, w, got, want)
		}
	}
}

func TestStoreWordClear(t *testing.T) {
	s := New(256)
	vals := []uint64{0xdeadbeef, 0, ^uint64(0), 1 << 63}
	var want uint64
	for w, v := range vals {
		s.StoreWord(w, v)
		want += uint64(bits.OnesCount64(v))
	}
	for w, v := range vals {
		if got := s.LoadWord(w); got != v {
			t.Errorf("LoadWord(%d) = %#x, want %#x", w, got, v)
		}
	}
	if !s.Test(63+64*3) || s.Test(64*3) {
		t.Errorf("Test does not see StoreWord")
	}
	if got := s.Count(); got != want {
		t.Errorf("Count = %d, want %d", got, want)
	}
	s.Clear()
	if got := s.Count(); got != 0 {
		t.Errorf("Count after Clear = %d", got)
	}
}

func TestOutOfRangePanics(t *testing.T) {
	s := New(64)
	mustPanic(t, "Set", func() { s.Set(64) })
	mustPanic(t, "Test", func() { s.Test(64) })
	mustPanic(t, "OrWord", func() { s.OrWord(1, 1) })
	mustPanic(t, "Word", func() { s.Word(1) })
	mustPanic(t, "LoadWord", func() { s.LoadWord(-1) })
	mustPanic(t, "StoreWord", func() { s.StoreWord(1, 1) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// TestConcurrentSet has goroutines set interleaved bits of the same words;
// a lost update (a plain read-modify-write) would leave a bit clear. Run it
// under -race.
func TestConcurrentSet(t *testing.T) {
	const (
		workers = 8
		nbits   = 1 << 14
	)
	s := New(nbits)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := uint64(g); i < nbits; i += workers {
				s.Set(i)
				if !s.Test(i) {
					t.Errorf("bit %d clear right after Set", i)
					return
				}
			}
		})
	}
	// A reader running alongside must only ever see bits turn on.
	wg.Go(func() {
		var last uint64
		for {
			n := s.Count()
			if n < last {
				t.Errorf("Count went down from %d to %d", last, n)
				return
			}
			last = n
			if n == nbits {
				return
			}
		}
	})
	wg.Wait()
	if got := s.Count(); got != nbits {
		t.Fatalf("Count %d after concurrent Set, want %d", got, nbits)
	}
}

var sinkBool bool
var sinkUint uint64

func benchIndexes(n uint64) []uint64 {
	r := rand.New(rand.NewPCG(1, 2))
	idx := make([]uint64, 1<<16)
	for i := range idx {
		idx[i] = r.Uint64N(n)
	}
	return idx
}

var benchSizes = []struct {
	name  string
	nbits uint64
}{
	{"bits=64K", 1 << 16},  // 8 KiB, L1
	{"bits=512M", 1 << 29}, // 64 MiB, beyond L2
}

func BenchmarkSet(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			s := New(sz.nbits)
			idx := benchIndexes(sz.nbits)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.Set(idx[i&(len(idx)-1)])
			}
		})
	}
}

func BenchmarkSetParallel(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			s := New(sz.nbits)
			idx := benchIndexes(sz.nbits)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(len(idx))
				for pb.Next() {
					s.Set(idx[i&(len(idx)-1)])
					i++
				}
			})
		})
	}
}

func BenchmarkTest(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			s := New(sz.nbits)
			idx := benchIndexes(sz.nbits)
			for _, i := range idx[:len(idx)/2] {
				s.Set(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var hits bool
			for i := 0; i < b.N; i++ {
				hits = hits != s.Test(idx[i&(len(idx)-1)])
			}
			sinkBool = hits
		})
	}
}

func BenchmarkCount(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			s := New(sz.nbits)
			b.ReportAllocs()
			b.SetBytes(int64(sz.nbits / 8))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sinkUint += s.Count()
			}
		})
	}
}
