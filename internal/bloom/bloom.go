package bloom

import (
	"math"
	"math/bits"

	"github.com/seed57392e9e/blobcache/internal/bitset"
)

const (
	// DefaultBitsPerKey is the bits per key New uses when given 0 or less:
	// about 1% false positives at the designed load (1.035% by the model in
	// the tests; TestFPR measures it, docs/BENCHMARKS.md has the figure). A
	// filter rounded up to whole huge pages holds more bits per key and does
	// better.
	DefaultBitsPerKey = 12

	// K is the number of probes per key: the bits it sets in its word. With
	// one 64-bit word per key, 5 is within 0.1 percentage point of the best
	// K from 10 to 20 bits per key (simulated: at 12, K = 4 gives 1.15%, 5
	// gives 1.04%, 6 gives 1.05%), and fewer probes cost fewer instructions.
	// It is a constant so that Test is straight-line code.
	K = 5

	// MaxBytes caps the bit array at 8 GiB. New clamps to it (the filter stays
	// correct, only its false-positive rate rises) and Decode rejects files
	// that claim more.
	MaxBytes = 1 << 33

	maxWords = MaxBytes / 8 // 2^30, below 2^32 so the word reduction cannot overflow
)

// Filter is a register-blocked bloom filter over 64-bit key hashes. It is
// safe for concurrent use; see the package documentation.
type Filter struct {
	// bits is held by value to save Test one dependent load; the Set is
	// only a slice header, so copying it shares the words. Its length, in
	// [1, maxWords], is the filter's size.
	bits bitset.Set
}

// New returns an empty filter sized for expectedKeys keys at bitsPerKey bits
// each (DefaultBitsPerKey if bitsPerKey <= 0): that many bits rounded up to
// whole words, and from bitset.HugeMinBytes up to whole huge pages (the
// filter uses every bit it holds), at least one word and at most MaxBytes.
func New(expectedKeys uint64, bitsPerKey int) *Filter {
	return newFilter(sizeWords(expectedKeys, defaultBPK(bitsPerKey)))
}

func defaultBPK(bitsPerKey int) int {
	if bitsPerKey <= 0 {
		return DefaultBitsPerKey
	}
	return bitsPerKey
}

// sizeWords returns the number of words for n keys at bitsPerKey (> 0), in
// [1, maxWords]: bitset.WordsFor of the bits they need.
func sizeWords(n uint64, bitsPerKey int) uint64 {
	// n*bitsPerKey can overflow; compare by division first. maxWords is a
	// whole number of huge pages, so WordsFor keeps it in range.
	if n > maxWords*64/uint64(bitsPerKey) {
		return maxWords
	}
	return bitset.WordsFor(max(1, n*uint64(bitsPerKey)))
}

// newFilter returns an empty filter of nwords words; nwords must be a size
// bitset.WordsFor returns, so that the set is exactly that long.
func newFilter(nwords uint64) *Filter {
	return &Filter{bits: *bitset.New(nwords * 64)}
}

// Probe layout. A key hash h (uniform over 64 bits, as xxHash64 is) is used
// as is: its high 32 bits choose the word, its low 30 bits are the K probes,
// six bits each (bits 0-5, 6-11, 12-17, 18-23, 24-29), each the index of the
// bit it sets in the word. The two parts are disjoint bits of h, so they are
// independent, and the probes are independent and uniform over the 64 bits
// of the word; two probes may pick the same bit (then the key sets fewer
// than K bits). Bits 30-31 of h are unused.

// word returns the word of hash h: its high 32 bits scaled to [0, words) by
// a multiply and a shift (Lemire's range reduction), which costs far less
// than a modulo.
func (f *Filter) word(h uint64) int {
	return int((h >> 32) * uint64(f.bits.Words()) >> 32)
}

// setBits returns w with the K bits of hash h set. Each term compiles to one
// BTSQ on amd64 (bit test and set, which takes its count mod 64, so the &63
// costs nothing); a chain of them on w needs no zeroed register and no shift
// by a variable count, which would tie up CX.
func setBits(w, h uint64) uint64 {
	return w | 1<<(h&63) | 1<<(h>>6&63) | 1<<(h>>12&63) | 1<<(h>>18&63) | 1<<(h>>24&63)
}

// Add inserts hash h: one atomic load of its word and, only if some of its
// bits are clear, one atomic OR of those bits. Skipping the OR when the bits
// are set means re-adding a present key writes nothing and leaves the cache
// line shared with other cores' readers.
func (f *Filter) Add(h uint64) {
	p := f.bits.Word(f.word(h))
	w := p.Load()
	if s := setBits(w, h); s != w {
		p.Or(s ^ w)
	}
}

// Test reports whether hash h may have been added: false means certainly
// not. It is one atomic load and a compare (are the key's bits already in
// the word?), with no branch on the bits it reads, so a hit and a miss cost
// the same; its one branch is the bounds check on the word index, never
// taken. It is small enough to inline (cost 78 of the compiler's 80 in Go
// 1.26: check with go build -gcflags=-m after changing it).
func (f *Filter) Test(h uint64) bool {
	// f.word(h), spelled out: the call would cost the inliner's budget.
	w := f.bits.LoadWord(int((h >> 32) * uint64(f.bits.Words()) >> 32))
	return setBits(w, h) == w
}

// TestMany sets out[i] to Test(hs[i]) for every i (out must be at least as long as hs).
//
// It works in two passes over each run of up to manyRun hashes: the first only loads each key's
// word into a local array, the second tests the bits. The loads are independent, and the first
// pass's loop is so short that the processor keeps many of its cache misses in flight at once;
// with the bit tests in the same loop, fewer iterations fit in its window and fewer misses
// overlap. Nothing between the loads is an atomic read-modify-write (as a per-key miss counter
// would be), which would serialize them.
func (f *Filter) TestMany(hs []uint64, out []bool) {
	words := uint64(f.bits.Words())
	out = out[:len(hs)]
	var ws [manyRun]uint64
	for len(hs) > 0 {
		n := min(len(hs), manyRun)
		for i, h := range hs[:n] {
			ws[i] = f.bits.LoadWord(int((h >> 32) * words >> 32))
		}
		for i, h := range hs[:n] {
			out[i] = setBits(ws[i], h) == ws[i]
		}
		hs, out = hs[n:], out[n:]
	}
}

// manyRun is how many words TestMany loads before it tests any.
const manyRun = 64

// K returns the number of probes per key: K.
func (f *Filter) K() int { return K }

// Words returns the number of 64-bit words.
func (f *Filter) Words() uint64 { return uint64(f.bits.Words()) }

// Bytes returns the size of the bit array. A filter of bitset.HugeMinBytes or
// more also holds up to one huge page (2 MiB) of alignment slack in its heap
// allocation, never written (see bitset.New).
func (f *Filter) Bytes() int64 { return int64(f.bits.Words()) * 8 }

// FillRatio returns the fraction of bits set, in [0, 1]. It reads every word.
func (f *Filter) FillRatio() float64 {
	return float64(f.bits.Count()) / float64(f.bits.Len())
}

// EstimatedFPR returns the probability that Test answers true for a random
// hash not added, computed from the bits actually set: a query lands on a
// word uniformly, and if c of the word's 64 bits are set its K independent
// uniform probes all hit set bits with probability exactly (c/64)^K. So the
// rate is the mean of that over words. Unlike fill^K it accounts for uneven
// words, and unlike a formula in Keys it counts stale keys, duplicate adds
// and a loaded file as they are. It reads every word.
func (f *Filter) EstimatedFPR() float64 {
	var hist [65]uint64 // hist[c]: words with c bits set
	for w := range f.bits.Words() {
		hist[bits.OnesCount64(f.bits.LoadWord(w))]++
	}
	var sum float64
	for c, n := range hist {
		sum += float64(n) * math.Pow(float64(c)/64, K)
	}
	return sum / float64(f.bits.Words())
}

// Keys estimates how many distinct hashes were added, from the fill ratio.
// A shared counter bumped by every Add would make all writers fight over one
// cache line, so instead we invert the expected fill: with lambda keys per
// word on average (Poisson) and K uniform probes per key, the expected
// fraction of clear bits is exp(lambda*((1-1/64)^K - 1)). The estimate is
// within about 1% for a filter at its designed load (see TestKeysEstimate),
// counts a re-added key once, and grows less precise as the filter saturates;
// a full filter reports the largest count it can distinguish. It reads
// every word.
func (f *Filter) Keys() uint64 {
	total := f.bits.Len()
	clear := total - f.bits.Count()
	if clear == total {
		return 0
	}
	if clear == 0 {
		clear = 1
	}
	perWord := math.Log(float64(clear)/float64(total)) / (math.Pow(1-1.0/64, K) - 1)
	return uint64(math.Round(perWord * float64(f.bits.Words())))
}
