package bitset

import (
	"math/bits"
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/internal/hugemem"
)

const (
	// HugePageBytes is the size of an x86-64 transparent huge page. Sets of
	// at least HugeMinBytes are sized in whole huge pages and start on a huge
	// page boundary, so that the kernel can back them with huge pages: a
	// random probe into a set of tens of MiB then misses the TLB far less
	// often.
	HugePageBytes = hugemem.PageBytes

	// HugeMinBytes is the smallest set sized in huge pages. Below it a set is
	// exact (whole words): it spans few 4 KiB pages, so TLB misses are rare
	// anyway, and rounding it up would multiply its memory. From it up, the
	// rounding at most doubles the set (and a bloom filter uses the extra
	// bits, so they lower its false-positive rate).
	HugeMinBytes = 1 << 20

	hugePageWords = HugePageBytes / 8
)

// Set is a fixed-size bitset of atomic words. The zero value is an empty set
// of length 0; use New.
type Set struct {
	words []atomic.Uint64
}

// WordsFor returns the number of 64-bit words New(nbits) allocates: nbits
// rounded up to whole words, and, if that is at least HugeMinBytes, up to
// whole huge pages. The rule does not depend on the OS, so that a set's size,
// and the file of a filter built on it, is the same everywhere.
func WordsFor(nbits uint64) uint64 {
	n := nbits/64 + min(nbits%64, 1)
	if n*8 >= HugeMinBytes {
		n = (n + hugePageWords - 1) / hugePageWords * hugePageWords
	}
	return n
}

// New returns a set of WordsFor(nbits) words, at least nbits bits, all clear.
// On Linux a set of HugeMinBytes or more starts on a HugePageBytes boundary
// and is advised to the kernel as huge-page memory (see allocHuge); its heap
// allocation is up to one huge page larger than the set, for the alignment.
func New(nbits uint64) *Set {
	n := WordsFor(nbits)
	if n*8 >= HugeMinBytes {
		return &Set{words: allocHuge(int(n))}
	}
	return &Set{words: make([]atomic.Uint64, n)}
}

// Len returns the number of bits in the set: Words() * 64.
func (s *Set) Len() uint64 { return uint64(len(s.words)) * 64 }

// Words returns the number of 64-bit words in the set.
func (s *Set) Words() int { return len(s.words) }

// Set sets bit i with one atomic OR.
func (s *Set) Set(i uint64) {
	s.words[i/64].Or(1 << (i % 64))
}

// Test reports whether bit i is set, with one atomic load.
func (s *Set) Test(i uint64) bool {
	return s.words[i/64].Load()&(1<<(i%64)) != 0
}

// Word returns word w, for a caller that loads it and then ORs into it
// with one bounds check.
func (s *Set) Word(w int) *atomic.Uint64 {
	return &s.words[w]
}

// OrWord sets the bits of mask in word w with one atomic OR.
func (s *Set) OrWord(w int, mask uint64) {
	s.words[w].Or(mask)
}

// LoadWord atomically loads word w.
func (s *Set) LoadWord(w int) uint64 {
	return s.words[w].Load()
}

// StoreWord atomically replaces word w with v. It is meant for loading a set
// saved to disk; it can clear bits, so it must not race with readers that
// rely on bits never turning off.
func (s *Set) StoreWord(w int, v uint64) {
	s.words[w].Store(v)
}

// Count returns the number of set bits (the population count of all words).
// It reads every word: O(Len), meant for statistics, not hot paths.
func (s *Set) Count() uint64 {
	var n uint64
	for i := range s.words {
		n += uint64(bits.OnesCount64(s.words[i].Load()))
	}
	return n
}

// Clear clears every bit, one atomic store per word.
func (s *Set) Clear() {
	for i := range s.words {
		s.words[i].Store(0)
	}
}
