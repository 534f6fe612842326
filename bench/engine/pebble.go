//go:build !nopebble

package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
)

func init() {
	register("pebble", "Pebble v1.1.5 (seed 002's reference engine), bloom filters on every level, no WAL", openPebble)
}

type pebbleEngine struct {
	db       *pebble.DB
	cache    *pebble.Cache
	settings []Setting
}

// quietLogger drops Pebble's informational lines; fatal ones still stop the process.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)              {}
func (quietLogger) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Budget: Pebble charges its memtables to the block cache (Cache.Reserve), so the cache is given
// the whole budget and the memtables (two of a quarter each: one filling, one flushing) take
// their share out of it, leaving at least half for blocks. Filters on every level, the last
// included, so a miss can be answered without a data block (seed 002 leaves the last level
// out; that costs misses an I/O).
func openPebble(cfg Config) (Engine, error) {
	cacheBytes := cfg.MemoryBudget
	memtable := cfg.MemoryBudget / 4
	cache := pebble.NewCache(cacheBytes)
	opts := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                uint64(memtable),
		MemTableStopWritesThreshold: 2,
		DisableWAL:                  true,
		MaxConcurrentCompactions:    func() int { return 2 },
		Logger:                      quietLogger{},
		Levels:                      make([]pebble.LevelOptions, 7),
	}
	for i := range opts.Levels {
		l := &opts.Levels[i]
		l.BlockSize = 4 << 10
		l.FilterPolicy = bloom.FilterPolicy(10)
		l.FilterType = pebble.TableFilter
		l.Compression = pebble.NoCompression
		l.EnsureDefaults()
	}
	opts.EnsureDefaults()
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		cache.Unref()
		return nil, err
	}
	s := []Setting{
		{"version", "v1.1.5"},
		{"Cache (block cache)", mib(cacheBytes) + ", the memtables charged to it (Pebble reserves memtable memory in the cache)"},
		{"MemTableSize x MemTableStopWritesThreshold", fmt.Sprintf("%s x 2", mib(memtable))},
		{"DisableWAL", "true (a cache, like BlobCache, which has no WAL)"},
		{"FilterPolicy", "bloom 10 bits/key, table filters, all 7 levels"},
		{"BlockSize", "4 KiB"},
		{"Compression", "none (values are random bytes)"},
		{"MaxConcurrentCompactions", "2"},
		{"other", "Pebble defaults (L0CompactionThreshold 4, LBaseMaxBytes 64 MiB, ...)"},
	}
	return &pebbleEngine{db: db, cache: cache, settings: s}, nil
}

func (e *pebbleEngine) Put(key, value []byte) error { return e.db.Set(key, value, pebble.NoSync) }

func (e *pebbleEngine) Get(key, buf []byte) (int, bool, error) {
	v, closer, err := e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	copy(buf, v)
	n := len(v)
	return n, true, closer.Close()
}

// Flush flushes the memtable and waits (up to a minute) until no compaction has run for half a
// second, so the reads measured next do not race compactions.
func (e *pebbleEngine) Flush() error {
	if err := e.db.Flush(); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	idle := 0
	for idle < 5 && time.Now().Before(deadline) {
		if e.db.Metrics().Compact.NumInProgress == 0 {
			idle++
		} else {
			idle = 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func (e *pebbleEngine) Close() error {
	err := e.db.Close()
	e.cache.Unref()
	return err
}

func (e *pebbleEngine) Settings() []Setting { return e.settings }

func (e *pebbleEngine) Counters() map[string]int64 {
	m := e.db.Metrics()
	var files, levels int64
	for _, l := range m.Levels {
		files += l.NumFiles
		if l.NumFiles > 0 {
			levels++
		}
	}
	return map[string]int64{
		"block_cache_hits": m.BlockCache.Hits, "block_cache_misses": m.BlockCache.Misses,
		"block_cache_bytes": m.BlockCache.Size, "sstables": files, "levels_used": levels,
		"compactions": m.Compact.Count, "filter_hits": m.Filter.Hits, "filter_misses": m.Filter.Misses,
		"table_cache_hits": m.TableCache.Hits, "table_cache_misses": m.TableCache.Misses,
	}
}
