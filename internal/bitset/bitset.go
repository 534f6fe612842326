package bitset

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// BlockWords is the number of words in a block: 8 words, 512 bits, 64 bytes,
// one cache line on the CPUs we target.
const BlockWords = 8

const lineBytes = BlockWords * 8

// Set is a fixed-size bitset of atomic words. The zero value is an empty set
// of length 0; use New.
type Set struct {
	words []atomic.Uint64
}

// New returns a set of at least nbits bits, all clear. The size is rounded up
// to a whole number of 64-bit words.
func New(nbits uint64) *Set {
	n := nbits / 64
	if nbits%64 != 0 {
		n++
	}
	return &Set{words: alignedWords(int(n))}
}

// alignedWords allocates n words starting on a 64-byte boundary, so that a
// block of BlockWords words never straddles two cache lines. Go's allocator
// happens to give this for most sizes today but does not promise it, so we
// over-allocate by one line less a word and skip to the boundary. The heap
// does not move objects, so the alignment holds for the life of the slice; if
// it ever did not, only speed would suffer, never correctness.
func alignedWords(n int) []atomic.Uint64 {
	if n == 0 {
		return nil
	}
	buf := make([]atomic.Uint64, n+BlockWords-1)
	mis := int(uintptr(unsafe.Pointer(&buf[0])) % lineBytes)
	off := 0
	if mis != 0 {
		off = (lineBytes - mis) / 8
	}
	return buf[off : off+n : off+n]
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

// Block returns block b, words BlockWords*b to BlockWords*b+7, as an array so
// that indexing it with a value below BlockWords needs no bounds check. The
// block is one 64-byte cache line. It panics if the block is not wholly
// inside the set.
func (s *Set) Block(b int) *[BlockWords]atomic.Uint64 {
	return (*[BlockWords]atomic.Uint64)(s.words[b*BlockWords : b*BlockWords+BlockWords])
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
