package bitset

import (
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/internal/hugemem"
)

// allocHuge returns n words (a multiple of a huge page) starting on a HugePageBytes boundary,
// advised to the kernel as huge-page memory (see package hugemem).
func allocHuge(n int) []atomic.Uint64 { return hugemem.Slice[atomic.Uint64](n) }
