package ghost

import (
	"math/bits"
	"sync/atomic"
)

// bucketSlots is the number of words of a bucket: a cursor, then the fingerprints.
const bucketSlots = 8

// Set is a bounded set of key hashes. See the package documentation.
type Set struct {
	// words holds the buckets, bucketSlots words each: word 0 counts the adds to the bucket
	// (the next slot to overwrite is 1 + count%7), words 1..7 are fingerprints (0: empty).
	words   []atomic.Uint32
	buckets uint64
}

// New returns a set that remembers about n hashes (at least one bucket's worth).
func New(n int) *Set {
	b := uint64(max((n+bucketSlots-2)/(bucketSlots-1), 1))
	return &Set{words: make([]atomic.Uint32, b*bucketSlots), buckets: b}
}

// Cap is the number of hashes the set holds when full.
func (s *Set) Cap() int { return int(s.buckets) * (bucketSlots - 1) }

// Bytes is the memory of the set.
func (s *Set) Bytes() int64 { return int64(len(s.words)) * 4 }

// slot returns h's bucket and fingerprint: the bucket from the high half of h (scaled to the
// bucket count by a multiply), the fingerprint from the low half, never 0.
func (s *Set) slot(h uint64) ([]atomic.Uint32, uint32) {
	i, _ := bits.Mul64(h&^0xffffffff, s.buckets)
	b := s.words[i*bucketSlots : (i+1)*bucketSlots : (i+1)*bucketSlots]
	return b, uint32(h) | 1
}

// Add remembers h, forgetting the oldest hash of its bucket if the bucket is full. Adding a
// member again changes nothing.
func (s *Set) Add(h uint64) {
	b, fp := s.slot(h)
	for i := 1; i < bucketSlots; i++ {
		if b[i].Load() == fp {
			return
		}
	}
	n := b[0].Add(1)
	b[1+n%(bucketSlots-1)].Store(fp)
}

// Contains reports whether h is remembered.
func (s *Set) Contains(h uint64) bool {
	b, fp := s.slot(h)
	for i := 1; i < bucketSlots; i++ {
		if b[i].Load() == fp {
			return true
		}
	}
	return false
}

// Remove forgets h and reports whether it was remembered. Of several concurrent Removes of one
// hash, one returns true.
func (s *Set) Remove(h uint64) bool {
	b, fp := s.slot(h)
	for i := 1; i < bucketSlots; i++ {
		if b[i].Load() == fp && b[i].CompareAndSwap(fp, 0) {
			return true
		}
	}
	return false
}
