package index

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/seed57392e9e/blobcache/internal/bloom"
)

func TestLocSize(t *testing.T) {
	if got := unsafe.Sizeof(Loc{}); got != 12 {
		t.Fatalf("Loc is %d bytes, want 12", got)
	}
}

// TestModel runs random Put/Get/Delete/DeleteIf/Len/Range sequences against each implementation
// and a plain map, over key pools of several sizes (the crowded shard of HashTable grows from 8
// slots through a dozen sizes and runs wrap around its end).
func TestModel(t *testing.T) {
	seed := testSeed(t)
	sizes := []struct{ pool, ops int }{{16, 2000}, {300, 20000}, {5000, 100000}, {40000, 300000}}
	if testing.Short() || raceEnabled {
		sizes = sizes[:3]
	}
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			for i, sz := range sizes {
				runModel(t, im.new(), seed+uint64(i), sz.pool, sz.ops)
			}
		})
	}
}

func runModel(t *testing.T, idx Index, seed uint64, poolSize, ops int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, uint64(poolSize)))
	gen := hashGen{r}
	pool := make([]uint64, poolSize)
	for i := range pool {
		pool[i] = gen.next()
	}
	model := map[uint64]Loc{}
	hits := map[uint64]int{} // hit counts from Touch and SetHits since the key's last Put
	randLoc := func() Loc {
		return Loc{Segment: 1 + r.Uint32N(6), Offset: r.Uint32(), Length: r.Uint32()}
	}
	fail := func(op int, format string, args ...any) {
		t.Helper()
		args = append([]any{seed, poolSize, op}, args...)
		t.Fatalf("seed %d pool %d op %d: "+format, args...)
	}
	checkAll := func(op int) {
		t.Helper()
		if idx.Len() != len(model) {
			fail(op, "Len %d, model %d", idx.Len(), len(model))
		}
		seen := map[uint64]bool{}
		idx.Range(func(h uint64, loc Loc) bool {
			if seen[h] {
				fail(op, "Range: %#x twice", h)
			}
			seen[h] = true
			if want, ok := model[h]; !ok || want != loc {
				fail(op, "Range: %#x -> %v, model %v %v", h, loc, want, ok)
			}
			return true
		})
		// Hit counts move with their entries (backward shifts, growth).
		for h, loc := range model {
			if got := idx.Hits(h, loc); got != hits[h] {
				fail(op, "Hits(%#x) = %d, model %d", h, got, hits[h])
			}
			if l, n, ok := idx.Lookup(h); !ok || l != loc || n != hits[h] {
				fail(op, "Lookup(%#x) = %v, %d hits, %v; model %v, %d", h, l, n, ok, loc, hits[h])
			}
		}
		if len(seen) != len(model) {
			fail(op, "Range saw %d entries, model has %d", len(seen), len(model))
		}
		// Stopping early calls fn exactly as many times as asked.
		if k := min(len(model), 3); k > 0 {
			calls := 0
			idx.Range(func(uint64, Loc) bool { calls++; return calls < k })
			if calls != k {
				fail(op, "Range stopped after %d calls, want %d", calls, k)
			}
		}
		checkIndex(t, idx)
	}
	for op := 0; op < ops; op++ {
		h := pool[r.IntN(len(pool))]
		want, present := model[h]
		switch p := r.IntN(110); {
		case p < 40:
			loc := randLoc()
			old, replaced := idx.Put(h, loc)
			if replaced != present || old != want {
				fail(op, "Put(%#x) = %v %v, model %v %v", h, old, replaced, want, present)
			}
			model[h] = loc
			delete(hits, h)
		case p >= 100:
			loc := want
			if r.IntN(4) == 0 {
				loc = randLoc() // a hit on a record the key no longer has: not counted
			}
			match := present && loc == want
			switch {
			case p < 105:
				idx.Touch(h, loc)
				if match {
					hits[h] = min(hits[h]+1, MaxHits)
				}
			case p < 107:
				n := r.IntN(MaxHits + 2)
				idx.SetHits(h, loc, n)
				if match {
					hits[h] = min(n, MaxHits)
				}
			default:
				want := 0
				if match {
					want = hits[h]
				}
				if got := idx.Hits(h, loc); got != want {
					fail(op, "Hits(%#x, %v) = %d, model %d", h, loc, got, want)
				}
			}
		case p < 60:
			got, ok := idx.Get(h)
			if ok != present || got != want {
				fail(op, "Get(%#x) = %v %v, model %v %v", h, got, ok, want, present)
			}
		case p < 80:
			old, ok := idx.Delete(h)
			if ok != present || old != want {
				fail(op, "Delete(%#x) = %v %v, model %v %v", h, old, ok, want, present)
			}
			delete(model, h)
			delete(hits, h)
		default:
			seg := 1 + r.Uint32N(6)
			if present && r.IntN(2) == 0 {
				seg = want.Segment
			}
			old, ok := idx.DeleteIf(h, seg)
			wantOK := present && want.Segment == seg
			var wantOld Loc
			if wantOK {
				wantOld = want
				delete(model, h)
				delete(hits, h)
			}
			if ok != wantOK || old != wantOld {
				fail(op, "DeleteIf(%#x, %d) = %v %v, model %v %v", h, seg, old, ok, want, present)
			}
		}
		if op%16 == 0 && idx.Len() != len(model) {
			fail(op, "Len %d, model %d", idx.Len(), len(model))
		}
		if op%max(poolSize/2, 50) == 0 {
			checkAll(op)
		}
	}
	checkAll(ops)
	// Drain: every entry deletes, and the index is empty again.
	for h := range model {
		if _, ok := idx.Delete(h); !ok {
			fail(ops, "drain: Delete(%#x) missed", h)
		}
		delete(model, h)
	}
	checkAll(ops)
}

func TestHashZeroPanics(t *testing.T) {
	for _, im := range impls {
		idx := im.new()
		for name, f := range map[string]func(){
			"Get":      func() { idx.Get(0) },
			"Put":      func() { idx.Put(0, Loc{}) },
			"Delete":   func() { idx.Delete(0) },
			"DeleteIf": func() { idx.DeleteIf(0, 1) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s.%s(0) did not panic", im.name, name)
					}
				}()
				f()
			}()
		}
	}
}

// TestConcurrent runs writers, readers and Range walks at once (meant for -race). Each writer
// owns its keys, so it can check every result; readers check that stable keys never go missing
// and that no Loc is ever torn; Range must see every stable key exactly once.
func TestConcurrent(t *testing.T) {
	seed := testSeed(t)
	const (
		writers = 3
		readers = 2
		stableN = 3000
		churnN  = 1500 // per writer
	)
	writerOps := 40000
	if raceEnabled || testing.Short() {
		writerOps = 8000
	}
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			idx := im.new()
			r := rand.New(rand.NewPCG(seed, 0))
			gen := hashGen{r}
			used := map[uint64]bool{}
			draw := func(n int) []uint64 {
				hs := make([]uint64, 0, n)
				for len(hs) < n {
					if h := gen.next(); !used[h] {
						used[h] = true
						hs = append(hs, h)
					}
				}
				return hs
			}
			stable := draw(stableN)
			for _, h := range stable {
				idx.Put(h, locFor(h, 1))
			}
			churn := make([][]uint64, writers)
			for w := range churn {
				churn[w] = draw(churnN)
			}

			var wg sync.WaitGroup
			var stop sync.WaitGroup // writers; readers run until writers finish
			done := make(chan struct{})
			errs := make(chan string, 100)
			report := func(format string, args ...any) {
				select {
				case errs <- fmt.Sprintf(format, args...):
				default:
				}
			}
			for w := 0; w < writers; w++ {
				stop.Add(1)
				go func(w int) {
					defer stop.Done()
					r := rand.New(rand.NewPCG(seed, uint64(w+1)))
					keys := churn[w]
					mine := map[uint64]Loc{}
					for op := 0; op < writerOps; op++ {
						h := keys[r.IntN(len(keys))]
						want, present := mine[h]
						switch r.IntN(3) {
						case 0, 1:
							loc := locFor(h, 1+r.Uint32N(4))
							old, ok := idx.Put(h, loc)
							if ok != present || old != want {
								report("writer %d: Put(%#x) = %v %v, want %v %v", w, h, old, ok, want, present)
							}
							mine[h] = loc
						case 2:
							seg := 1 + r.Uint32N(4)
							old, ok := idx.DeleteIf(h, seg)
							if ok != (present && want.Segment == seg) || ok && old != want {
								report("writer %d: DeleteIf(%#x, %d) = %v %v, had %v %v", w, h, seg, old, ok, want, present)
							}
							if ok {
								delete(mine, h)
							}
						}
						if op%16 == 0 {
							want, present := mine[h]
							if got, ok := idx.Get(h); ok != present || got != want {
								report("writer %d: Get(%#x) = %v %v, want %v %v", w, h, got, ok, want, present)
							}
						}
					}
					for h := range mine {
						if _, ok := idx.Delete(h); !ok {
							report("writer %d: Delete(%#x) missed", w, h)
						}
					}
				}(w)
			}
			for rd := 0; rd < readers; rd++ {
				wg.Add(1)
				go func(rd int) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(seed, uint64(100+rd)))
					for i := 0; ; i++ {
						if i%64 == 0 {
							select {
							case <-done:
								return
							default:
							}
						}
						h := stable[r.IntN(len(stable))]
						if got, ok := idx.Get(h); !ok || got != locFor(h, 1) {
							report("reader: stable Get(%#x) = %v %v", h, got, ok)
						}
						c := churn[r.IntN(writers)]
						h = c[r.IntN(len(c))]
						if got, ok := idx.Get(h); ok && !validLoc(h, got) {
							report("reader: torn Get(%#x) = %v", h, got)
						}
					}
				}(rd)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				stableSet := map[uint64]bool{}
				for _, h := range stable {
					stableSet[h] = true
				}
				for {
					select {
					case <-done:
						return
					default:
					}
					seen := map[uint64]bool{}
					nStable := 0
					idx.Range(func(h uint64, loc Loc) bool {
						if seen[h] {
							report("Range: %#x twice", h)
						}
						seen[h] = true
						if !validLoc(h, loc) {
							report("Range: torn %#x -> %v", h, loc)
						}
						if stableSet[h] {
							nStable++
						}
						return true
					})
					if nStable != len(stable) {
						report("Range saw %d of %d stable keys", nStable, len(stable))
					}
				}
			}()
			stop.Wait()
			close(done)
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			if idx.Len() != stableN {
				t.Errorf("Len %d after writers drained, want %d", idx.Len(), stableN)
			}
			checkIndex(t, idx)
		})
	}
}

// TestCanonical: an index keeps the top IdentityBits bits of a hash. Hashes that differ only
// below them are one entry (the newest Put wins; Get, Touch and Delete by either reach it); Range
// hands back the canonical hash, whose FilterHash is the one of every hash it stands for; a hash
// whose tag bits are all zero shares its entry with tag 1 and never looks empty.
func TestCanonical(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			idx := impl.new()
			a := uint64(0x5a_12345678_abcdef)
			b := a ^ 0x00_00000000_123456 // the same top 40 bits
			c := a ^ 0x00_00000001_000000 // the lowest kept bit differs
			idx.Put(a, Loc{Segment: 1})
			if old, ok := idx.Put(b, Loc{Segment: 2}); !ok || old.Segment != 1 {
				t.Fatalf("Put of a hash that agrees on the kept bits: replaced %v %v, want segment 1", old, ok)
			}
			if _, ok := idx.Put(c, Loc{Segment: 3}); ok {
				t.Fatal("a hash that differs in a kept bit replaced an entry")
			}
			if loc, ok := idx.Get(a); !ok || loc.Segment != 2 || idx.Len() != 2 {
				t.Fatalf("Get = %v %v, Len %d; want segment 2 and 2 entries", loc, ok, idx.Len())
			}
			idx.Touch(a, Loc{Segment: 2})
			if idx.Hits(b, Loc{Segment: 2}) != 1 {
				t.Fatal("a hit counted through one hash is not seen through the other")
			}
			seen := map[uint64]Loc{}
			idx.Range(func(h uint64, loc Loc) bool { seen[h] = loc; return true })
			if len(seen) != 2 || seen[Canonical(a)].Segment != 2 || seen[Canonical(c)].Segment != 3 {
				t.Fatalf("Range saw %v, want the canonical hashes %#x and %#x", seen, Canonical(a), Canonical(c))
			}
			for h := range seen {
				if Canonical(h) != h {
					t.Fatalf("Range handed back %#x, not canonical", h)
				}
			}
			if FilterHash(a) != FilterHash(b) || FilterHash(a) != FilterHash(Canonical(a)) || FilterHash(a) == FilterHash(c) {
				t.Fatal("FilterHash does not follow Canonical")
			}
			if _, ok := idx.Delete(b); !ok {
				t.Fatal("Delete through the other hash missed")
			}
			zero := uint64(0x07) << 56 // shard 7, tag 0
			idx.Put(zero|0xfff, Loc{Segment: 4})
			if loc, ok := idx.Get(zero | 1<<(64-IdentityBits)); !ok || loc.Segment != 4 {
				t.Fatalf("a tag-0 hash: Get by tag 1 = %v %v", loc, ok)
			}
			if Canonical(zero|1) == 0 || Canonical(zero|1) != zero|1<<(64-IdentityBits) {
				t.Fatalf("Canonical(%#x) = %#x", zero|1, Canonical(zero|1))
			}
			checkIndex(t, idx)
		})
	}
}

// TestFilterHashSpreads: a bloom filter keyed by FilterHash answers as often falsely as one keyed
// by the full hashes: the 40 bits Canonical keeps, spread again, are as good as 64 random bits to
// the filter's word selector and probes.
func TestFilterHashSpreads(t *testing.T) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(5, 6))
	in, out := make([]uint64, n), make([]uint64, n)
	for i := range in {
		in[i], out[i] = r.Uint64()|1, r.Uint64()|1
	}
	fpr := func(key func(uint64) uint64) float64 {
		f := bloom.New(n, 12)
		for _, h := range in {
			f.Add(key(h))
		}
		fp := 0
		for _, h := range out {
			if f.Test(key(h)) {
				fp++
			}
		}
		return float64(fp) / n
	}
	raw, filtered := fpr(func(h uint64) uint64 { return h }), fpr(FilterHash)
	t.Logf("false positives: %.4f%% keyed by the hash, %.4f%% by FilterHash", 100*raw, 100*filtered)
	if filtered > raw*1.15 {
		t.Fatalf("FilterHash makes the filter answer falsely %.4f%% of the time, the raw hash %.4f%%", 100*filtered, 100*raw)
	}
}
