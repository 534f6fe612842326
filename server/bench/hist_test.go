package bench

import (
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	prev := -1
	for ns := uint64(0); ns < 1<<40; ns = ns*17/16 + 1 {
		b := bucket(ns)
		if b < prev || lower(b) > ns || lower(b+1) <= ns {
			t.Fatalf("ns %d: bucket %d [%d, %d)", ns, b, lower(b), lower(b+1))
		}
		if ns >= 16 && float64(lower(b+1)-lower(b))/float64(ns) > 1.0/16 {
			t.Fatalf("ns %d: bucket too wide", ns)
		}
		prev = b
	}
}

func TestQuantile(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.Quantile(tc.q)
		if d := float64(got-tc.want) / float64(tc.want); d > 0.04 || d < -0.04 {
			t.Errorf("Quantile(%v) = %v, want about %v", tc.q, got, tc.want)
		}
	}
	var o Histogram
	o.Record(time.Second)
	h.Merge(&o)
	if h.N != 1001 || h.Max != time.Second {
		t.Errorf("Merge: N %d Max %v", h.N, h.Max)
	}
}
