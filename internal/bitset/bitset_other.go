//go:build !linux

package bitset

import "sync/atomic"

// allocHuge returns n words. Only Linux has transparent huge pages to ask
// for (bitset_linux.go); elsewhere the set is sized the same but allocated
// plainly.
func allocHuge(n int) []atomic.Uint64 {
	return make([]atomic.Uint64, n)
}
