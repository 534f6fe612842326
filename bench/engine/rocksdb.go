//go:build rocksdb

package engine

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/linxGnu/grocksdb"
)

func init() {
	register("rocksdb", "RocksDB 7.8 (Debian) through grocksdb v1.7.10, FIFO compaction as in seed 000, no WAL", openRocksDB)
}

type rocksEngine struct {
	db       *grocksdb.DB
	opts     *grocksdb.Options
	ro       *grocksdb.ReadOptions
	wo       *grocksdb.WriteOptions
	settings []Setting
}

// Seed 000's production RocksDB: FIFO compaction, 6 memtables in flight, DirectIO for flushes.
// The memtable is sized by rocksShape: by default so that the run's data makes about as many L0
// files as the seed's 455 at its peak (the seed's ratio of data to memtable); the block cache
// gets the rest of the budget. Index and filter blocks are charged to the block cache (pinned
// for L0, where FIFO keeps every file) so they count against the budget as they do for the
// other engines.
func openRocksDB(cfg Config) (Engine, error) {
	shape := rocksShape(cfg.MemoryBudget, cfg.DatasetBytes, cfg.RocksDBL0Files)
	memtable, cacheBytes := shape.Memtable, shape.BlockCache

	bbto := grocksdb.NewDefaultBlockBasedTableOptions()
	bbto.SetBlockCache(grocksdb.NewLRUCache(uint64(cacheBytes)))
	bbto.SetFilterPolicy(grocksdb.NewBloomFilterFull(10))
	bbto.SetCacheIndexAndFilterBlocks(true)
	bbto.SetPinL0FilterAndIndexBlocksInCache(true)
	bbto.SetBlockSize(4 << 10)

	fifo := grocksdb.NewDefaultFIFOCompactionOptions()
	fifo.SetMaxTableFilesSize(1 << 40) // never drop data during a run

	opts := grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	opts.SetBlockBasedTableFactory(bbto)
	opts.SetCompactionStyle(grocksdb.FIFOCompactionStyle)
	opts.SetFIFOCompactionOptions(fifo)
	opts.SetWriteBufferSize(uint64(memtable))
	opts.SetMaxWriteBufferNumber(rocksInflight)
	opts.SetMinWriteBufferNumberToMerge(1)
	opts.SetUseDirectIOForFlushAndCompaction(true)
	opts.SetCompression(grocksdb.NoCompression)
	opts.SetMaxBackgroundJobs(2)
	opts.EnableStatistics()

	db, err := grocksdb.OpenDb(opts, cfg.Dir)
	if err != nil {
		return nil, err
	}
	wo := grocksdb.NewDefaultWriteOptions()
	wo.DisableWAL(true)
	s := []Setting{
		{"version", "RocksDB 7.8.3 (Debian librocksdb-dev), grocksdb v1.7.10"},
		{"compaction", "FIFO, max_table_files_size 1 TiB (nothing dropped in a run)"},
		{"write_buffer_size x max_write_buffer_number", fmt.Sprintf("%s x %d (seed: 960 MB x 6)", mibf(memtable), rocksInflight)},
		{"write_buffer_size chosen as", shape.Why},
		{"block cache (LRU)", mib(cacheBytes) + ", the rest of the budget"},
		{"filter", "full bloom 10 bits/key per SST; index and filter blocks in the block cache, L0 pinned"},
		{"use_direct_io_for_flush_and_compaction", "true"},
		{"WAL", "disabled (a cache, like BlobCache, which has no WAL)"},
		{"compression", "none"},
		{"max_background_jobs", "2"},
	}
	return &rocksEngine{db: db, opts: opts, ro: grocksdb.NewDefaultReadOptions(), wo: wo, settings: s}, nil
}

func (e *rocksEngine) Put(key, value []byte) error { return e.db.Put(e.wo, key, value) }

func (e *rocksEngine) Get(key, buf []byte) (int, bool, error) {
	h, err := e.db.GetPinned(e.ro, key)
	if err != nil {
		return 0, false, err
	}
	defer h.Destroy()
	if !h.Exists() {
		return 0, false, nil
	}
	v := h.Data()
	copy(buf, v)
	return len(v), true, nil
}

func (e *rocksEngine) Flush() error {
	fo := grocksdb.NewDefaultFlushOptions()
	defer fo.Destroy()
	fo.SetWait(true)
	return e.db.Flush(fo)
}

func (e *rocksEngine) Close() error {
	e.db.Close()
	e.ro.Destroy()
	e.wo.Destroy()
	e.opts.Destroy()
	return nil
}

func (e *rocksEngine) Settings() []Setting { return e.settings }

// Counters picks tickers out of RocksDB's statistics dump ("rocksdb.block.cache.miss COUNT : 12").
func (e *rocksEngine) Counters() map[string]int64 {
	want := map[string]string{
		"rocksdb.block.cache.miss": "block_cache_misses", "rocksdb.block.cache.hit": "block_cache_hits",
		"rocksdb.bloom.filter.useful": "bloom_useful", "rocksdb.bloom.filter.full.positive": "bloom_positive",
		"rocksdb.number.keys.read": "keys_read", "rocksdb.compact.write.bytes": "compact_write_bytes",
		"rocksdb.flush.write.bytes": "flush_write_bytes",
	}
	out := map[string]int64{}
	s := bufio.NewScanner(strings.NewReader(e.opts.GetStatisticsString()))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) >= 4 && f[1] == "COUNT" {
			if name, ok := want[f[0]]; ok {
				n, _ := strconv.ParseInt(f[3], 10, 64)
				out[name] = n
			}
		}
	}
	for prop, name := range map[string]string{
		"rocksdb.num-files-at-level0": "l0_files", "rocksdb.block-cache-usage": "block_cache_usage",
		"rocksdb.cur-size-all-mem-tables": "memtable_bytes", "rocksdb.num-immutable-mem-table": "immutable_memtables",
	} {
		if n, err := strconv.ParseInt(e.db.GetProperty(prop), 10, 64); err == nil {
			out[name] = n
		}
	}
	return out
}

// mibf formats a byte count in MiB with two decimals, for sizes that are not whole MiB.
func mibf(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
