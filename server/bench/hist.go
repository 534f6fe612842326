package bench

import (
	"math/bits"
	"time"
)

// Histogram counts durations in log-linear buckets: 16 per power of two of nanoseconds.
// Not safe for concurrent use: give each worker its own and Merge them.
type Histogram struct {
	Counts [64 * 16]uint64
	N      uint64
	Max    time.Duration
}

func bucket(ns uint64) int {
	if ns < 16 {
		return int(ns)
	}
	e := bits.Len64(ns) - 5 // ns >> e is in [16, 32)
	return (e+1)*16 + int(ns>>e) - 16
}

// lower is the smallest duration of bucket i.
func lower(i int) uint64 {
	if i < 16 {
		return uint64(i)
	}
	e := i/16 - 1
	return uint64(16+i%16) << e
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	ns := uint64(max(d, 0))
	h.Counts[bucket(ns)]++
	h.N++
	h.Max = max(h.Max, d)
}

// Merge adds o's counts.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.N += o.N
	h.Max = max(h.Max, o.Max)
}

// Quantile returns the duration below which a fraction q of the samples fall (the middle of
// the bucket that holds it).
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.N == 0 {
		return 0
	}
	rank := uint64(q * float64(h.N))
	if rank >= h.N {
		rank = h.N - 1
	}
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen > rank {
			lo, hi := lower(i), lower(i+1)
			return min(time.Duration((lo+hi)/2), h.Max)
		}
	}
	return h.Max
}
