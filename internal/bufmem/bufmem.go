package bufmem

import (
	"runtime"
	"sync/atomic"
)

// live is the bytes of tracked buffers not yet collected.
var live atomic.Int64

// Track counts n bytes, the buffer that p (the start of its own allocation) holds, until the
// collector frees p. The uncounting runs in a cleanup goroutine some time after the collection.
func Track[T any](p *T, n int) {
	live.Add(int64(n))
	runtime.AddCleanup(p, uncount, int64(n))
}

func uncount(n int64) { live.Add(-n) }

// Bytes returns the bytes of tracked buffers that are alive, or collected so recently that their
// cleanup has not run yet.
func Bytes() int64 { return live.Load() }
