package workload

import (
	"bytes"
	"math"
	"testing"
)

func TestKeysUniqueAndDisjoint(t *testing.T) {
	seen := make(map[string]bool)
	var buf [KeyLen]byte
	for _, space := range []byte{Present, Absent} {
		for i := uint64(0); i < 50000; i++ {
			k := string(Key(buf[:], space, i))
			if seen[k] {
				t.Fatalf("key %q (space %c, index %d) generated twice", k, space, i)
			}
			seen[k] = true
		}
	}
}

func TestKeyDeterministic(t *testing.T) {
	var a, b [KeyLen]byte
	if !bytes.Equal(Key(a[:], Present, 42), Key(b[:], Present, 42)) {
		t.Fatal("Key is not a function of its index")
	}
}

// Keys written in index order must arrive in random key order, or LSM engines would see a
// sequential load and flatter themselves.
func TestKeysNotSorted(t *testing.T) {
	var a, b [KeyLen]byte
	ascending := 0
	const n = 10000
	for i := uint64(0); i < n; i++ {
		if bytes.Compare(Key(a[:], Present, i), Key(b[:], Present, i+1)) < 0 {
			ascending++
		}
	}
	if frac := float64(ascending) / n; math.Abs(frac-0.5) > 0.03 {
		t.Fatalf("%.3f of consecutive keys ascend, want about 0.5", frac)
	}
}

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		s        Sizes
		min, max int
	}{
		{Fixed(1 << 20), 1 << 20, 1 << 20},
		{Sizes{Min: 100, Max: 500, Seed: 1}, 100, 500},
		{Sizes{Min: 100, Max: 500, Seed: 2}, 100, 500},
	} {
		const n = 200000
		var sum float64
		lo, hi := math.MaxInt, 0
		buckets := make([]int, 4)
		for i := uint64(0); i < n; i++ {
			v := tc.s.Size(i)
			if v < tc.min || v > tc.max {
				t.Fatalf("%+v: size %d outside [%d, %d]", tc.s, v, tc.min, tc.max)
			}
			lo, hi = min(lo, v), max(hi, v)
			sum += float64(v)
			if tc.max > tc.min {
				buckets[(v-tc.min)*4/(tc.max-tc.min+1)]++
			}
		}
		if lo != tc.min || hi != tc.max {
			t.Errorf("%+v: sizes span [%d, %d], want [%d, %d]", tc.s, lo, hi, tc.min, tc.max)
		}
		if mean := sum / n; math.Abs(mean-tc.s.Mean())/tc.s.Mean() > 0.01 {
			t.Errorf("%+v: mean %.1f, want %.1f within 1%%", tc.s, mean, tc.s.Mean())
		}
		if tc.max > tc.min {
			for q, c := range buckets {
				if f := float64(c) / n; math.Abs(f-0.25) > 0.01 {
					t.Errorf("%+v: quarter %d holds %.3f of sizes, want 0.25 within 0.01", tc.s, q, f)
				}
			}
		}
	}
}

func TestOpMixWithinOnePercent(t *testing.T) {
	for _, mix := range []Mix{SeedMix, {Put: 1}, {Put: 0.5, GetMiss: 0.5}, {Put: 2, GetHit: 9, GetMiss: 9}} {
		p := NewPicker(mix, 7)
		const n = 200000
		var counts [3]int
		for range n {
			counts[p.Op()]++
		}
		sum := mix.Put + mix.GetHit + mix.GetMiss
		want := [3]float64{mix.Put / sum, mix.GetHit / sum, mix.GetMiss / sum}
		for op, c := range counts {
			if got := float64(c) / n; math.Abs(got-want[op]) > 0.01 {
				t.Errorf("mix %+v: %v is %.4f of ops, want %.4f within 0.01", mix, Op(op), got, want[op])
			}
		}
	}
}

func TestPickersDiffer(t *testing.T) {
	a, b := NewPicker(SeedMix, 1), NewPicker(SeedMix, 2)
	same := 0
	for range 1000 {
		if a.Index(1<<40) == b.Index(1<<40) {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("pickers with different seeds drew %d equal indexes", same)
	}
}

func TestIndexUniform(t *testing.T) {
	p := NewPicker(SeedMix, 3)
	const n, buckets = 100000, 10
	var counts [buckets]int
	for range n {
		counts[p.Index(buckets)]++
	}
	for b, c := range counts {
		if f := float64(c) / n; math.Abs(f-0.1) > 0.01 {
			t.Errorf("bucket %d drew %.3f, want 0.1 within 0.01", b, f)
		}
	}
}

func TestPayloadValues(t *testing.T) {
	p := NewPayload(1<<20, 1)
	v := p.Value(5, 1<<20)
	if len(v) != 1<<20 {
		t.Fatalf("value of %d bytes, want %d", len(v), 1<<20)
	}
	if !bytes.Equal(v, p.Value(5, 1<<20)) {
		t.Fatal("Value is not a function of its index")
	}
	// Random bytes: every byte value appears, none dominates.
	var hist [256]int
	for _, c := range v {
		hist[c]++
	}
	for c, n := range hist {
		if n == 0 || n > 2*len(v)/256 {
			t.Fatalf("byte %#x appears %d times in 1 MiB of payload", c, n)
		}
	}
}

// Absent keys must sort among the present ones: an absent key outside the key range of every
// file would let an LSM engine skip its filters (the mistake of the first runs, whose keys began
// with the space byte).
func TestAbsentKeysInterleaved(t *testing.T) {
	var a, b [KeyLen]byte
	const n = 1000
	lo, hi := Key(a[:], Present, 0), Key(b[:], Present, 0)
	lo, hi = append([]byte(nil), lo...), append([]byte(nil), hi...)
	for i := uint64(1); i < n; i++ {
		k := Key(a[:], Present, i)
		if bytes.Compare(k, lo) < 0 {
			lo = append(lo[:0], k...)
		}
		if bytes.Compare(k, hi) > 0 {
			hi = append(hi[:0], k...)
		}
	}
	p := NewPicker(SeedMix, 1)
	inside := 0
	for range n {
		k := Key(a[:], Absent, p.Index(1<<40))
		if bytes.Compare(k, lo) > 0 && bytes.Compare(k, hi) < 0 {
			inside++
		}
	}
	// n random points fall inside the range of n others with probability (n-1)/(n+1).
	if inside < n*98/100 {
		t.Errorf("%d of %d absent keys sort inside the present keys' range, want nearly all", inside, n)
	}
}
