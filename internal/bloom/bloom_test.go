package bloom

import (
	"math"
	"math/bits"
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

// mix is 2^64 divided by the golden ratio, rounded to odd: adding it steps
// through hashes that differ in all bits.
const mix = 0x9e3779b97f4a7c15

func newRand(t testing.TB) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x5eed))
}

func TestNewSizing(t *testing.T) {
	for _, tc := range []struct {
		keys       uint64
		bitsPerKey int
		words      uint64
	}{
		{0, 12, 1},
		{1, 12, 1},
		{5, 12, 1},  // 60 bits
		{6, 12, 2},  // 72 bits
		{52, 0, 10}, // default bits per key: 624 bits
		{52, -3, 10},
		{1000, 10, 157},               // ceil(10000 / 64)
		{1 << 16, 16, 1 << 14},        // 128 KiB, exact
		{699_000, 12, 131_063},        // 1,048,504 bytes: just under bitset.HugeMinBytes, exact
		{699_051, 12, 262_144},        // 1,048,577 bytes: one huge page (2 MiB)
		{1 << 20, 12, 262_144},        // 1.5 MiB: one huge page
		{1_500_000, 12, 2 * 262_144},  // 2.15 MiB: two huge pages
		{64 << 20, 12, 96 << 20 >> 3}, // 96 MiB: 48 huge pages, exact
		{1 << 40, 10, maxWords},
		{math.MaxUint64, 64, maxWords},
	} {
		if tc.words == maxWords {
			// Do not allocate 8 GiB: check the arithmetic only.
			if got := sizeWords(tc.keys, defaultBPK(tc.bitsPerKey)); got != tc.words {
				t.Errorf("sizeWords(%d, %d) = %d, want %d", tc.keys, tc.bitsPerKey, got, tc.words)
			}
			continue
		}
		f := New(tc.keys, tc.bitsPerKey)
		if f.Words() != tc.words || f.Bytes() != int64(tc.words)*8 || f.bits.Len() != tc.words*64 || f.K() != K {
			t.Errorf("New(%d, %d): %d words, %d bytes, %d bits, k %d; want %d words, k %d",
				tc.keys, tc.bitsPerKey, f.Words(), f.Bytes(), f.bits.Len(), f.K(), tc.words, K)
		}
	}
}

// TestLayout pins the documented layout to one hash: the high 32 bits pick
// the word, and bits 0-29, six at a time, the bits set in it.
func TestLayout(t *testing.T) {
	f := New(50, 12) // 600 bits: 10 words
	if f.Words() != 10 {
		t.Fatalf("%d words, want 10", f.Words())
	}
	const (
		hi    = 0x8000_0000                               // half way: word 5 of 10
		lo    = 1 | 2<<6 | 3<<12 | 63<<18 | 1<<24 | 3<<30 // probes 1, 2, 3, 63, 1; bits 30-31 unused
		h     = hi<<32 | lo
		wantW = 5
		wantM = 1<<63 | 1<<3 | 1<<2 | 1<<1
	)
	f.Add(h)
	for w := range int(f.Words()) {
		want := uint64(0)
		if w == wantW {
			want = wantM
		}
		if got := f.bits.LoadWord(w); got != want {
			t.Errorf("word %d = %#x, want %#x", w, got, want)
		}
	}
	if !f.Test(h) || f.Test(h^1<<3) || f.Test(h^1<<63) || !f.Test(h^3<<30) {
		t.Errorf("Test does not read the bits Add set")
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
		{1000, 1, 10}, // two words, hopelessly overloaded
		{100_000, 100_000, 10},
		{100_000, 100_000, 1},
		{100_000, 100_000, 64},
		{100_000, 10_000, 10},
		{100_000, 1 << 20, 12}, // huge pages
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

// TestAddSetsKBits checks that a key sets at most K bits, all in its word,
// exactly those setBits gives, and that Add writes nothing when the key is
// already present.
func TestAddSetsKBits(t *testing.T) {
	r := newRand(t)
	for _, bpk := range []int{1, 10, 16, 64} {
		f := New(1000, bpk)
		for range 200 {
			f.bits.Clear()
			h := r.Uint64()
			f.Add(h)
			n := f.bits.Count()
			w := f.bits.LoadWord(f.word(h))
			if n < 1 || n > K || w != setBits(0, h) || uint64(bits.OnesCount64(w)) != n {
				t.Fatalf("bpk %d: Add(%#x) set %d bits, word %#x; want 1..%d bits, all in word %#x",
					bpk, h, n, w, K, setBits(0, h))
			}
		}
	}
}

// TestWordUniform checks that the multiply-shift reduction spreads hashes
// evenly over a word count that is not a power of two.
func TestWordUniform(t *testing.T) {
	r := newRand(t)
	f := New(1000*64, 1) // 1000 words
	counts := make([]int, f.Words())
	const n = 1_000_000
	for range n {
		counts[f.word(r.Uint64())]++
	}
	// Chi-squared with 999 degrees of freedom: mean 999, sd about 45.
	var chi2 float64
	want := float64(n) / float64(f.Words())
	for _, c := range counts {
		chi2 += (float64(c) - want) * (float64(c) - want) / want
	}
	if chi2 > 999+6*45 {
		t.Fatalf("chi-squared %.0f over 1000 words: word choice is not uniform", chi2)
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
	f := New(writers*perW/4, 10) // overloaded 4x, so words are shared hard
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

func measureFPR(f *Filter, queries []uint64) float64 {
	pos := 0
	for _, h := range queries {
		if f.Test(h) {
			pos++
		}
	}
	return float64(pos) / float64(len(queries))
}

// modelFPR is the expected false-positive rate of a filter holding lambda
// keys per word on average, each setting K independent uniform bits of its
// word. The number of keys in a word is Poisson(lambda); a word holding j
// keys has taken t = K*j uniform probes. A query whose K probes fall on s
// distinct bits is positive if all s are set, which by inclusion-exclusion
// happens with probability sum over i of (-1)^i C(s,i) (1-i/64)^t; s
// itself is distributed as the number of distinct values among K uniform
// draws from 64: C(64,s) s! S(K,s) / 64^K, with S the Stirling numbers of
// the second kind (for K = 5: 1, 15, 25, 10, 1). The model is exact but for
// the Poisson approximation of the binomial load.
func modelFPR(lambda float64) float64 {
	stirling := [K + 1]float64{0, 1, 15, 25, 10, 1}
	var pDistinct [K + 1]float64
	for s := 1; s <= K; s++ {
		falling := 1.0 // 64!/(64-s)!
		for i := range s {
			falling *= float64(64 - i)
		}
		pDistinct[s] = falling * stirling[s] / math.Pow(64, K)
	}
	hi := int(lambda + 12*math.Sqrt(lambda) + 20)
	var sum float64
	for j := 0; j <= hi; j++ {
		lg, _ := math.Lgamma(float64(j + 1))
		pj := math.Exp(float64(j)*math.Log(lambda) - lambda - lg)
		t := float64(K * j)
		var pos float64
		for s := 1; s <= K; s++ {
			var allSet, binom float64 = 0, 1
			for i := 0; i <= s; i++ {
				allSet += math.Pow(-1, float64(i)) * binom * math.Pow(1-float64(i)/64, t)
				binom = binom * float64(s-i) / float64(i+1)
			}
			pos += pDistinct[s] * allSet
		}
		sum += pj * pos
	}
	return sum
}

func TestModelFPR(t *testing.T) {
	// The limits: an empty filter answers no query positive, a saturated
	// one every query. TestFPR checks the values in between against
	// measurements.
	if got := modelFPR(1e-9); got > 1e-9 {
		t.Errorf("modelFPR of an empty filter = %v", got)
	}
	if got := modelFPR(1e4); math.Abs(got-1) > 1e-9 {
		t.Errorf("modelFPR of a saturated filter = %v", got)
	}
}

// TestFPR measures the false-positive rate at 10, 12 (the default) and 16
// bits per key, each on a 2 MiB filter (one huge page, 2^24 bits) holding
// 2^24/bitsPerKey random hashes, queried with 2^21 other random hashes (a
// random 64-bit query equals one of the keys with probability below 2^-40,
// so every positive is false). The measured rate must be within 5 standard
// deviations of modelFPR; past that the probes are not independent or the
// words not uniform.
func TestFPR(t *testing.T) {
	if testing.Short() {
		t.Skip("millions of keys")
	}
	r := rand.New(rand.NewPCG(1, 2))
	queries := randHashes(r, 1<<21)
	for _, bpk := range []int{10, DefaultBitsPerKey, 16} {
		f := New(1<<24/uint64(bpk), bpk)
		if f.bits.Len() != 1<<24 {
			t.Fatalf("%d bits per key: filter of %d bits, want 2^24", bpk, f.bits.Len())
		}
		n := int(math.Round(float64(1<<24) / float64(bpk)))
		for _, h := range randHashes(r, n) {
			f.Add(h)
		}
		got := measureFPR(f, queries)
		want := modelFPR(float64(64*n) / float64(1<<24))
		sd := math.Sqrt(want * (1 - want) / float64(len(queries)))
		t.Logf("%d bits per key, %d keys: measured FPR %.4f%%, model %.4f%% (sd %.4f%%), EstimatedFPR %.4f%%, fill %.4f",
			bpk, n, 100*got, 100*want, 100*sd, 100*f.EstimatedFPR(), f.FillRatio())
		if math.Abs(got-want) > 5*sd {
			t.Errorf("%d bits per key: measured FPR %.4f%%, want within 5 sd of the model's %.4f%%", bpk, 100*got, 100*want)
		}
		if bpk == DefaultBitsPerKey && got > 0.011 {
			t.Errorf("measured FPR %.4f%% above 1.1%% at the default %d bits per key", 100*got, bpk)
		}
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

// TestKeysEstimate checks Keys on a filter sized for 200K keys at 10 bits
// per key, from nearly empty to twice overloaded. Measured errors are below
// 0.2% at every step; we allow 1%.
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
		if d := math.Abs(float64(got)-float64(n)) / float64(n); d > 0.01 {
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

func TestTestMany(t *testing.T) {
	f := New(1000, DefaultBitsPerKey)
	var hs []uint64
	for i := range uint64(2000) {
		h := i*0x9e3779b97f4a7c15 | 1
		if i%2 == 0 {
			f.Add(h)
		}
		hs = append(hs, h)
	}
	out := make([]bool, len(hs))
	f.TestMany(hs, out)
	for i, h := range hs {
		if out[i] != f.Test(h) {
			t.Fatalf("TestMany[%d] = %v, Test = %v", i, out[i], f.Test(h))
		}
	}
}
