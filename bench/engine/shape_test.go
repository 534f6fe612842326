package engine

import "testing"

func TestRocksShape(t *testing.T) {
	const budget = 1 << 30
	for _, tc := range []struct {
		name         string
		dataset      int64
		l0           int
		wantMemtable int64
	}{
		// The mixed workload's default dataset: 2048 preloaded + 4000 written 1 MiB blobs.
		{"seed shape", 6048 << 20, SeedL0Files, (6048 << 20) / SeedL0Files},
		{"budget split when off", 6048 << 20, 0, budget / 7},
		{"budget split without a dataset size", 0, SeedL0Files, budget / 7},
		{"never under 1 MiB", 100 << 20, SeedL0Files, 1 << 20},
		{"never over a seventh of the budget", 100 << 30, 10, budget / 7},
	} {
		s := rocksShape(budget, tc.dataset, tc.l0)
		if s.Memtable != tc.wantMemtable {
			t.Errorf("%s: memtable %d, want %d", tc.name, s.Memtable, tc.wantMemtable)
		}
		if got := rocksInflight*s.Memtable + s.BlockCache; got != budget {
			t.Errorf("%s: memtables and block cache take %d, want the budget %d", tc.name, got, budget)
		}
		if s.BlockCache < budget/7 {
			t.Errorf("%s: block cache %d under a seventh of the budget", tc.name, s.BlockCache)
		}
	}
	// The seed shape leaves about SeedL0Files memtables' worth of data.
	s := rocksShape(budget, 6048<<20, SeedL0Files)
	if files := (6048 << 20) / s.Memtable; files < SeedL0Files || files > SeedL0Files+1 {
		t.Errorf("dataset makes %d memtables, want %d", files, SeedL0Files)
	}
}

func TestBlobcacheWriteBuffer(t *testing.T) {
	const budget = 1 << 30
	for _, tc := range []struct {
		name  string
		asked int64
		want  int64
	}{
		{"budget split", 0, 146 << 20},
		{"asked", 16 << 20, 16 << 20},
		{"asked, rounded to MiB", 16<<20 + 5, 16 << 20},
		{"at least 1 MiB", 1000, 1 << 20},
		{"never over a seventh of the budget", 1 << 30, 146 << 20},
	} {
		if got := blobcacheWriteBuffer(budget, tc.asked); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
