package hist

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	// Every value falls in a bucket whose bounds hold it, and buckets are in value order.
	prevHi := uint64(0)
	for i := 0; i < nBucket; i++ {
		lo, hi := bounds(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		prevHi = hi
		if hi == math.MaxUint64 {
			break
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		v := r.Uint64() >> r.UintN(64)
		lo, hi := bounds(bucket(v))
		if v < lo || v > hi {
			t.Fatalf("value %d in bucket %d with bounds [%d, %d]", v, bucket(v), lo, hi)
		}
		if v >= linear && float64(hi-lo)/float64(lo) > 1.0/sub {
			t.Fatalf("bucket of %d is [%d, %d]: wider than 1/%d", v, lo, hi, sub)
		}
	}
}

func TestQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		draw func(*rand.Rand) time.Duration
	}{
		{"uniform 0-10ms", func(r *rand.Rand) time.Duration { return time.Duration(r.Int64N(int64(10 * time.Millisecond))) }},
		{"exponential 50us", func(r *rand.Rand) time.Duration { return time.Duration(r.ExpFloat64() * 50e3) }},
		{"small ns", func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(300)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			h := New()
			vals := make([]float64, 0, 200000)
			for range cap(vals) {
				d := tc.draw(r)
				h.Record(d)
				vals = append(vals, float64(d))
			}
			sort.Float64s(vals)
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
				exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
				got := float64(h.Quantile(q))
				if math.Abs(got-exact) > exact/sub+1 {
					t.Errorf("q%.3f = %.0f, exact %.0f: off by more than 1/%d", q, got, exact, sub)
				}
			}
			if h.Count() != uint64(len(vals)) {
				t.Errorf("count %d, want %d", h.Count(), len(vals))
			}
			if h.Max() != time.Duration(vals[len(vals)-1]) {
				t.Errorf("max %v, want %v", h.Max(), time.Duration(vals[len(vals)-1]))
			}
		})
	}
}

func TestMerge(t *testing.T) {
	a, b, all := New(), New(), New()
	for i := range 1000 {
		d := time.Duration(i) * time.Microsecond
		all.Record(d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(b)
	if a.Summarize() != all.Summarize() {
		t.Fatalf("merged %+v, want %+v", a.Summarize(), all.Summarize())
	}
}

func TestEmptyAndSingle(t *testing.T) {
	h := New()
	if h.Quantile(0.99) != 0 || h.Mean() != 0 || h.Count() != 0 {
		t.Fatal("empty histogram reports values")
	}
	h.Record(123456 * time.Nanosecond)
	for _, q := range []float64{0, 0.5, 1} {
		if got := h.Quantile(q); got != 123456 {
			t.Errorf("single value: q%v = %v, want 123.456µs", q, got)
		}
	}
	s := h.Summarize()
	if s.P50Us != 123.456 || s.Count != 1 {
		t.Errorf("summary %+v", s)
	}
}
