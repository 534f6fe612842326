package ghost

import (
	"math/rand/v2"
	"sync"
	"testing"
)

func TestAddContainsRemove(t *testing.T) {
	s := New(10000) // room to spare: a bucket takes 7, and 500 random hashes fill some unevenly
	r := rand.New(rand.NewPCG(1, 2))
	hs := make([]uint64, 500)
	for i := range hs {
		hs[i] = r.Uint64()
		s.Add(hs[i])
	}
	for _, h := range hs {
		if !s.Contains(h) {
			t.Fatalf("%#x added, not contained", h)
		}
	}
	for _, h := range hs[:250] {
		if !s.Remove(h) {
			t.Fatalf("Remove(%#x) = false for a member", h)
		}
		if s.Remove(h) || s.Contains(h) {
			t.Fatalf("%#x still a member after Remove", h)
		}
	}
	for _, h := range hs[250:] {
		if !s.Contains(h) {
			t.Fatalf("%#x lost by removing others", h)
		}
	}
	fp := 0
	for range 100000 {
		if s.Contains(r.Uint64()) {
			fp++
		}
	}
	if fp > 0 {
		t.Fatalf("%d false positives in 100000 lookups", fp)
	}
}

// TestBounded checks that the set forgets the oldest hashes once full, keeps most of the newest,
// and never grows.
func TestBounded(t *testing.T) {
	const n = 7000
	s := New(n)
	if s.Cap() < n || s.Cap() > n+7 {
		t.Fatalf("Cap %d for %d", s.Cap(), n)
	}
	bytes := s.Bytes()
	r := rand.New(rand.NewPCG(3, 4))
	hs := make([]uint64, 10*n)
	for i := range hs {
		hs[i] = r.Uint64()
		s.Add(hs[i])
	}
	if s.Bytes() != bytes {
		t.Fatalf("memory grew from %d to %d", bytes, s.Bytes())
	}
	count := func(hs []uint64) int {
		k := 0
		for _, h := range hs {
			if s.Contains(h) {
				k++
			}
		}
		return k
	}
	if old := count(hs[:5*n]); old > 0 {
		t.Fatalf("%d of the oldest %d hashes still remembered", old, 5*n)
	}
	// FIFO per bucket: the newest n/2 are in buckets that took at most a few more since.
	if recent := count(hs[len(hs)-n/2:]); recent < n/2*95/100 {
		t.Fatalf("only %d of the newest %d hashes remembered", recent, n/2)
	}
	if total := count(hs); total > s.Cap() {
		t.Fatalf("%d members, capacity %d", total, s.Cap())
	}
}

func TestConcurrent(t *testing.T) {
	s := New(1 << 12)
	var wg sync.WaitGroup
	removed := make([]int, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range uint64(20000) {
				h := i * 0x9e3779b97f4a7c15
				s.Add(h)
				if s.Remove(h) {
					removed[g]++
				}
			}
		}()
	}
	wg.Wait()
	if removed[0]+removed[1]+removed[2]+removed[3] == 0 {
		t.Fatal("no Remove found its hash")
	}
}

func BenchmarkAddRemove(b *testing.B) {
	s := New(1 << 20)
	b.ReportAllocs()
	h := uint64(1)
	for b.Loop() {
		h = h*0x9e3779b97f4a7c15 + 1
		if !s.Remove(h) {
			s.Add(h)
		}
	}
}
