// Package hist is a log-linear histogram of latencies, in nanoseconds, for percentiles.
//
// Values below 256 ns have a bucket each; above, every power of two is cut into 128 buckets, so
// a reported percentile is within 0.4% of the true value. Record is not safe for concurrent use:
// give each goroutine its own Histogram and Merge them at the end.
package hist

import (
	"math"
	"math/bits"
	"time"
)

const (
	subBits = 7
	sub     = 1 << subBits // buckets per power of two
	linear  = 2 * sub      // values below this have their own bucket
	nBucket = (64-subBits)*sub + sub
)

// Histogram counts values in log-linear buckets.
type Histogram struct {
	counts   [nBucket]uint64
	n        uint64
	sum      float64
	min, max uint64
}

// New returns an empty histogram.
func New() *Histogram { return &Histogram{min: math.MaxUint64} }

func bucket(v uint64) int {
	if v < linear {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	return (shift+1)*sub + int(v>>shift) - sub
}

// bounds returns the smallest and largest value of bucket i.
func bounds(i int) (lo, hi uint64) {
	if i < linear {
		return uint64(i), uint64(i)
	}
	shift := i/sub - 1
	m := uint64(i%sub + sub)
	return m << shift, (m+1)<<shift - 1
}

// Record adds one value.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucket(v)]++
	h.n++
	h.sum += float64(v)
	h.min = min(h.min, v)
	h.max = max(h.max, v)
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Mean is the mean value (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Max is the largest value recorded (0 when empty).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the value below which a fraction q of the values lie (0 when empty): the
// middle of the bucket holding the ceil(q*n)-th value, clamped to the recorded minimum and maximum.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bounds(i)
			v := lo + (hi-lo)/2
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// Summary is what reports keep of a histogram.
type Summary struct {
	Count  uint64  `json:"count"`
	MeanUs float64 `json:"mean_us"`
	P50Us  float64 `json:"p50_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
}

// Summarize returns the count, mean, p50, p99, p99.9 and maximum in microseconds.
func (h *Histogram) Summarize() Summary {
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	return Summary{
		Count: h.n, MeanUs: us(h.Mean()),
		P50Us: us(h.Quantile(0.50)), P99Us: us(h.Quantile(0.99)), P999Us: us(h.Quantile(0.999)),
		MaxUs: us(h.Max()),
	}
}
