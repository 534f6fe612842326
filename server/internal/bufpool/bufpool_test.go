package bufpool

import "testing"

func TestClass(t *testing.T) {
	tests := []struct{ n, size int }{
		{0, 4096}, {1, 4096}, {4096, 4096}, {4097, 5120}, {5120, 5120}, {5121, 6144},
		{8192, 8192}, {8193, 10240}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1<<18},
		{64 << 20, 64 << 20}, {64<<20 + 20, 80 << 20}, {MaxPooled, MaxPooled},
	}
	seen := map[int]int{}
	for _, tt := range tests {
		idx, size := Class(tt.n)
		if size != tt.size || idx < 0 || idx >= len(pools) {
			t.Errorf("Class(%d) = %d, %d; want size %d", tt.n, idx, size, tt.size)
		}
		if prev, ok := seen[idx]; ok && prev != size {
			t.Errorf("class %d has sizes %d and %d", idx, prev, size)
		}
		seen[idx] = size
	}
	if idx, size := Class(MaxPooled + 1); idx != -1 || size != MaxPooled+1 {
		t.Errorf("Class(MaxPooled+1) = %d, %d", idx, size)
	}
	// Classes grow with n and waste at most a quarter.
	prevIdx := 0
	for n := 1; n <= MaxPooled; n = n*9/8 + 1 {
		idx, size := Class(n)
		if idx < prevIdx || size < n || (n > 4096 && size > n+n/4+1) {
			t.Fatalf("Class(%d) = %d, %d after index %d", n, idx, size, prevIdx)
		}
		prevIdx = idx
	}
}

func TestGetPut(t *testing.T) {
	b := Get(5000)
	if len(*b) != 5000 || cap(*b) != 5120 {
		t.Fatalf("len %d cap %d", len(*b), cap(*b))
	}
	Put(b)
	b = Get(5100)
	if len(*b) != 5100 || cap(*b) != 5120 {
		t.Fatalf("len %d cap %d", len(*b), cap(*b))
	}
	Put(b)
	big := Get(MaxPooled + 1)
	Put(big) // not pooled; must not panic
}
