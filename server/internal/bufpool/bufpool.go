package bufpool

import (
	"math/bits"
	"sync"
)

const (
	minShift = 12 // the smallest class, 4 KiB
	// MaxPooled is the largest pooled buffer.
	MaxPooled = 128 << 20
)

var pools [1 + (27-minShift)*4]sync.Pool

// Class returns the index and the capacity of the class that holds n bytes; the index is -1
// past MaxPooled.
func Class(n int) (idx, size int) {
	if n <= 1<<minShift {
		return 0, 1 << minShift
	}
	k := bits.Len(uint(n-1)) - 1 // 2^k < n <= 2^(k+1)
	step := 1 << (k - 2)
	q := (n + step - 1) / step // 5..8
	size = q * step
	if size > MaxPooled {
		return -1, n
	}
	return 1 + (k-minShift)*4 + (q - 5), size
}

// Get returns a buffer of length n; cap(*b) is its class size.
func Get(n int) *[]byte {
	idx, size := Class(n)
	if idx >= 0 {
		if b, ok := pools[idx].Get().(*[]byte); ok {
			*b = (*b)[:n]
			return b
		}
	}
	b := make([]byte, n, size)
	return &b
}

// Put returns a buffer obtained from Get. The caller must not use it afterwards.
func Put(b *[]byte) {
	idx, size := Class(cap(*b))
	if idx >= 0 && size == cap(*b) {
		pools[idx].Put(b)
	}
}
