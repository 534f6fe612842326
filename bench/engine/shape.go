package engine

import "fmt"

// SeedL0Files is the number of L0 files seed 000's production RocksDB had at its peak (FIFO
// compaction, 960 MB memtables): every miss probed that many filters.
const SeedL0Files = 455

// rocksInflight is seed 000's "6 inflight": memtables that may be full at once.
const rocksInflight = 6

// minMemtable is the smallest write_buffer_size rocksShape picks: small enough for the L0 file
// counts of this machine's datasets, large enough that a memtable holds a few 1 MiB values.
const minMemtable = 1 << 20

// RocksShape is how RocksDB's budget is split: rocksInflight memtables of Memtable bytes, and
// the rest of the budget as block cache.
type RocksShape struct {
	Memtable   int64  // write_buffer_size
	BlockCache int64  // LRU block cache
	Why        string // how Memtable was chosen, for the settings
}

// rocksShape sizes RocksDB's memtable. With l0Files > 0 and a known dataset, the memtable is
// dataset/l0Files, so that the run's writes leave about l0Files files in L0 (FIFO compaction
// keeps every file in L0): the seed's ratio of data to memtable, which is what made its misses
// probe 455 filters, at this machine's scale. Otherwise (l0Files 0 or no dataset size) it is
// the budget split seven ways, six memtables and a block cache. The memtables never take more
// than 6/7 of the budget; the block cache gets what they leave.
func rocksShape(budget, dataset int64, l0Files int) RocksShape {
	perSeventh := budget / (rocksInflight + 1)
	s := RocksShape{Memtable: perSeventh, Why: "budget/7: six memtables and a block cache share the budget"}
	if l0Files > 0 && dataset > 0 {
		m := dataset / int64(l0Files)
		m = min(max(m, minMemtable), perSeventh)
		s.Memtable = m
		s.Why = fmt.Sprintf("dataset %s / %d L0 files (seed 000: 960 MB memtables, %d L0 files at peak)", mib(dataset), l0Files, SeedL0Files)
	}
	s.BlockCache = budget - rocksInflight*s.Memtable
	return s
}
