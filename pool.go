package blobcache

import (
	"math/bits"
	"sync"

	"github.com/seed57392e9e/blobcache/internal/bufmem"
)

// Read buffers are pooled by power-of-two size class, from 4 KiB to 4 MiB, so a Get of a blob in
// steady state allocates nothing but its reader. Every buffer made is counted in bufmem until the
// collector frees it (Stats.ReadBufferBytes).
const (
	minBufShift = 12
	maxBufShift = 22
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufShift
}

// getBuf returns a buffer of length n. Buffers larger than the largest class are not pooled.
func getBuf(n int) *[]byte {
	c := bufClass(n)
	if c >= len(bufPools) {
		b := make([]byte, n)
		bufmem.Track(&b, n)
		return &b
	}
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, 1<<(c+minBufShift))
	bufmem.Track(&b, cap(b))
	return &b
}

func putBuf(p *[]byte) {
	c := bufClass(cap(*p))
	if c < len(bufPools) && cap(*p) == 1<<(c+minBufShift) {
		bufPools[c].Put(p)
	}
}
