package bloom

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// randHashes returns n random nonzero hashes, standing in for xxHash64 of
// distinct keys.
func randHashes(r *rand.Rand, n int) []uint64 {
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = r.Uint64()
		if hs[i] == 0 { // as the cache does
			hs[i] = 1
		}
	}
	return hs
}

func newRand(t testing.TB) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x5eed))
}

func TestChooseK(t *testing.T) {
	for _, tc := range []struct{ bitsPerKey, k int }{
		{1, 1}, {2, 1}, {4, 3}, {6, 4}, {8, 5}, {9, 6}, {10, 6}, {11, 7}, {12, 7}, {16, MaxK}, {64, MaxK},
	} {
		if got := chooseK(tc.bitsPerKey); got != tc.k {
			t.Errorf("chooseK(%d) = %d, want %d", tc.bitsPerKey, got, tc.k)
		}
	}
}

func TestNewSizing(t *testing.T) {
	for _, tc := range []struct {
		keys       uint64
		bitsPerKey int
		blocks     uint64
		k          int
	}{
		{0, 10, 1, 6},
		{1, 10, 1, 6},
		{51, 10, 1, 6}, // 510 bits
		{52, 10, 2, 6}, // 520 bits
		{52, 0, 2, 6},  // default bits per key
		{52, -3, 2, 6}, // default bits per key
		{1 << 20, 10, 20480, 6},
		{1_000_000, 10, 19532, 6}, // ceil(10e6 / 512)
		{1_000_000, 16, 31250, MaxK},
		{1 << 40, 10, maxBlocks, 6},
		{math.MaxUint64, 64, maxBlocks, MaxK},
	} {
		var f *Filter
		if tc.blocks == maxBlocks {
			// Do not allocate 8 GiB: check the arithmetic through a stub.
			f = &Filter{nblocks: sizeBlocks(tc.keys, tc.bitsPerKey), k: chooseK(defaultBPK(tc.bitsPerKey))}
		} else {
			f = New(tc.keys, tc.bitsPerKey)
			if got := int64(f.bits.Len() / 8); got != f.Bytes() {
				t.Errorf("New(%d, %d): bit array %d bytes, Bytes() %d", tc.keys, tc.bitsPerKey, got, f.Bytes())
			}
		}
		if f.Blocks() != tc.blocks || f.K() != tc.k || f.Bytes() != int64(tc.blocks)*64 {
			t.Errorf("New(%d, %d): %d blocks, k %d, %d bytes; want %d blocks, k %d",
				tc.keys, tc.bitsPerKey, f.Blocks(), f.K(), f.Bytes(), tc.blocks, tc.k)
		}
	}
}

func TestNoFalseNegatives(t *testing.T) {
	r := newRand(t)
	for _, tc := range []struct {
		keys       int
		sizedFor   uint64
		bitsPerKey int
	}{
		{1, 1, 10},
		{1000, 1, 10}, // one block, hopelessly overloaded
		{100_000, 100_000, 10},
		{100_000, 100_000, 1},
		{100_000, 100_000, 64}, // k = MaxK: every 9-bit window of the product
		{100_000, 10_000, 10},
	} {
		f := New(tc.sizedFor, tc.bitsPerKey)
		hs := randHashes(r, tc.keys)
		for _, h := range hs {
			f.Add(h)
		}
		hs = append(hs, 1, math.MaxUint64, 1<<32, 1<<32-1) // edges of both halves
		for _, h := range hs[tc.keys:] {
			f.Add(h)
		}
		for _, h := range hs {
			if !f.Test(h) {
				t.Fatalf("%+v: false negative for %#x", tc, h)
			}
		}
	}
}

// TestAddSetsKBits checks that a key sets at most k bits, all in one block, and
// that Add writes nothing when the key is already present.
func TestAddSetsKBits(t *testing.T) {
	r := newRand(t)
	for _, bpk := range []int{1, 10, 16, 64} {
		f := New(1000, bpk)
		for range 200 {
			f.bits.Clear()
			h := r.Uint64()
			f.Add(h)
			n := f.bits.Count()
			if n < 1 || n > uint64(f.k) {
				t.Fatalf("bpk %d: Add set %d bits, want 1..%d", bpk, n, f.k)
			}
			blk := f.bits.Block(f.block(h))
			var inBlock uint64
			for w := range blk {
				inBlock += uint64(popcount(blk[w].Load()))
			}
			if inBlock != n {
				t.Fatalf("bpk %d: %d of %d bits outside the key's block", bpk, n-inBlock, n)
			}
		}
	}
}

func popcount(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// TestBlockUniform checks that the multiply-shift reduction spreads hashes
// evenly over a block count that is not a power of two.
func TestBlockUniform(t *testing.T) {
	r := newRand(t)
	f := &Filter{nblocks: 1000, k: 6}
	counts := make([]int, f.nblocks)
	const n = 1_000_000
	for range n {
		counts[f.block(r.Uint64())]++
	}
	// Chi-squared with 999 degrees of freedom: mean 999, sd about 45.
	var chi2 float64
	want := float64(n) / float64(f.nblocks)
	for _, c := range counts {
		chi2 += (float64(c) - want) * (float64(c) - want) / want
	}
	if chi2 > 999+6*45 {
		t.Fatalf("chi-squared %.0f over 1000 blocks: block choice is not uniform", chi2)
	}
}

// TestConcurrentAddTest has writers add disjoint keys while readers check that
// every key a writer has published as added tests true. Run it under -race.
func TestConcurrentAddTest(t *testing.T) {
	r := newRand(t)
	const (
		writers = 4
		readers = 4
		perW    = 20_000
	)
	f := New(writers*perW/4, 10) // overloaded 4x, so blocks are shared hard
	keys := make([][]uint64, writers)
	done := make([]atomic.Int64, writers) // keys[w][:done[w]] have been added
	for w := range keys {
		keys[w] = randHashes(r, perW)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i, h := range keys[w] {
				f.Add(h)
				done[w].Store(int64(i + 1))
			}
		})
	}
	for g := range readers {
		wg.Go(func() {
			rr := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				finished := 0
				for w := range writers {
					n := done[w].Load()
					if n == perW {
						finished++
					}
					if n == 0 {
						continue
					}
					for range 8 {
						h := keys[w][rr.Int64N(n)]
						if !f.Test(h) {
							t.Errorf("false negative for a published key %#x", h)
							return
						}
					}
				}
				if finished == writers {
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range keys {
		for _, h := range keys[w] {
			if !f.Test(h) {
				t.Fatalf("false negative for %#x after all writers finished", h)
			}
		}
	}
}

// fprFixture is a 10 bits/key filter holding 1M random hashes, and 1M other
// random hashes to query, shared by the FPR tests.
var fprFixture = sync.OnceValues(func() (*Filter, []uint64) {
	r := rand.New(rand.NewPCG(1, 2))
	f := New(1<<20, DefaultBitsPerKey)
	for _, h := range randHashes(r, 1<<20) {
		f.Add(h)
	}
	return f, randHashes(r, 1<<20)
})

func measureFPR(f *Filter, queries []uint64) float64 {
	pos := 0
	for _, h := range queries {
		if f.Test(h) {
			pos++
		}
	}
	return float64(pos) / float64(len(queries))
}

// TestFPR measures the false-positive rate at 10 bits per key with 2^20 keys
// and 2^20 random queries (a random 64-bit query equals one of the keys with
// probability 2^-44, so every positive is false). The model (modelFPR) gives
// 0.958% for k=6. With 2^20 queries the count of positives has a standard
// deviation of about sqrt(2^20*0.0096) = 100, 1% of the rate, so a correct
// filter lands within 5% of the model; anything past that means the probes
// are not independent or the blocks not uniform.
func TestFPR(t *testing.T) {
	if testing.Short() {
		t.Skip("1M keys")
	}
	f, queries := fprFixture()
	got := measureFPR(f, queries)
	want := modelFPR(float64(blockBits)/DefaultBitsPerKey, f.K())
	t.Logf("k %d, %d blocks: measured FPR %.4f%%, model %.4f%%, EstimatedFPR %.4f%%, fill %.4f",
		f.K(), f.Blocks(), 100*got, 100*want, 100*f.EstimatedFPR(), f.FillRatio())
	if math.Abs(got-want) > 0.05*want {
		t.Errorf("measured FPR %.4f%%, want within 5%% of the model's %.4f%%", 100*got, 100*want)
	}
	if got > 0.01 {
		t.Errorf("measured FPR %.4f%% above 1%% at 10 bits per key", 100*got)
	}
}

// TestEstimatedFPR checks EstimatedFPR against the rate measured on random
// queries, for filters under-, well- and over-loaded. EstimatedFPR is the
// exact expectation for the bits as set, so the gap is sampling noise only:
// we allow 5 standard deviations of the measured rate.
func TestEstimatedFPR(t *testing.T) {
	r := newRand(t)
	for _, tc := range []struct {
		keys       int
		bitsPerKey int
	}{
		{50_000, 10}, // at half load
		{100_000, 10},
		{300_000, 10}, // 3x overloaded
		{100_000, 5},
		{100_000, 16},
	} {
		f := New(100_000, tc.bitsPerKey)
		for _, h := range randHashes(r, tc.keys) {
			f.Add(h)
		}
		const nq = 1 << 20
		got := measureFPR(f, randHashes(r, nq))
		est := f.EstimatedFPR()
		sd := math.Sqrt(est * (1 - est) / nq)
		t.Logf("%+v: measured %.4f%%, estimated %.4f%% (sd %.4f%%)", tc, 100*got, 100*est, 100*sd)
		if math.Abs(got-est) > 5*sd {
			t.Errorf("%+v: EstimatedFPR %.4f%%, measured %.4f%%: more than 5 sd apart", tc, 100*est, 100*got)
		}
	}
	if est := New(1000, 10).EstimatedFPR(); est != 0 {
		t.Errorf("EstimatedFPR of an empty filter = %v, want 0", est)
	}
}

func TestKeysEstimate(t *testing.T) {
	r := newRand(t)
	f := New(200_000, 10)
	if f.Keys() != 0 || f.FillRatio() != 0 {
		t.Fatalf("empty filter: Keys %d, FillRatio %v", f.Keys(), f.FillRatio())
	}
	hs := randHashes(r, 400_000)
	added := 0
	for _, n := range []int{1000, 20_000, 200_000, 400_000} {
		for _, h := range hs[added:n] {
			f.Add(h)
		}
		added = n
		got := f.Keys()
		t.Logf("%d keys: Keys() %d, fill %.4f", n, got, f.FillRatio())
		if d := math.Abs(float64(got)-float64(n)) / float64(n); d > 0.02 {
			t.Errorf("after %d keys Keys() = %d, off by %.1f%%", n, got, 100*d)
		}
	}
	// Re-adding present keys changes nothing.
	before := f.Keys()
	for _, h := range hs[:1000] {
		f.Add(h)
	}
	if after := f.Keys(); after != before {
		t.Errorf("Keys went from %d to %d on re-adding present keys", before, after)
	}
	// A full filter reports a finite count.
	full := New(10, 10)
	for range 10_000 {
		full.Add(r.Uint64())
	}
	if full.FillRatio() != 1 || full.Keys() == 0 || full.EstimatedFPR() != 1 {
		t.Errorf("full filter: fill %v, Keys %d, EstimatedFPR %v", full.FillRatio(), full.Keys(), full.EstimatedFPR())
	}
}

func TestNoAllocs(t *testing.T) {
	f := New(1000, 10)
	h := uint64(0x0123456789abcdef)
	if n := testing.AllocsPerRun(100, func() { f.Add(h); h += mix }); n != 0 {
		t.Errorf("Add allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = f.Test(h); h += mix }); n != 0 {
		t.Errorf("Test allocates %v times", n)
	}
}
