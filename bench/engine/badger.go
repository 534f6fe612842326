//go:build !nobadger

package engine

import (
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

func init() {
	register("badger", "Badger v4 with key-value separation (values of 512 B and more in the value log)", openBadger)
}

type badgerEngine struct {
	db       *badger.DB
	settings []Setting
}

// badgerValueThreshold: values of this size and more go to the value log, the design closest to
// BlobCache's. The capacity test's 100-500 B values stay in the LSM tree; the 1 KiB and 1 MiB
// values of the other phases are separated.
const badgerValueThreshold = 512

// Budget: a quarter each to the two memtables, the block cache and the index cache.
func openBadger(cfg Config) (Engine, error) {
	q := cfg.MemoryBudget / 4
	opts := badger.DefaultOptions(cfg.Dir).
		WithMemTableSize(q).
		WithNumMemtables(2).
		WithBlockCacheSize(q).
		WithIndexCacheSize(q).
		WithValueThreshold(badgerValueThreshold).
		WithCompression(options.None).
		WithDetectConflicts(false).
		WithSyncWrites(false).
		WithNumCompactors(2).
		WithLoggingLevel(badger.WARNING)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, err
	}
	s := []Setting{
		{"version", "v4.9.6"},
		{"MemTableSize x NumMemtables", fmt.Sprintf("%s x 2", mib(q))},
		{"BlockCacheSize", mib(q)},
		{"IndexCacheSize", mib(q)},
		{"ValueThreshold", fmt.Sprintf("%d B (smaller values stay in the LSM tree)", badgerValueThreshold)},
		{"Compression", "none"},
		{"SyncWrites", "false"},
		{"DetectConflicts", "false"},
		{"NumCompactors", "2"},
		{"other", "Badger defaults (4 KiB blocks, 1% bloom FPR, 1 GiB value log files, ...)"},
	}
	return &badgerEngine{db: db, settings: s}, nil
}

func (e *badgerEngine) Put(key, value []byte) error {
	return e.db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) })
}

func (e *badgerEngine) Get(key, buf []byte) (n int, found bool, err error) {
	err = e.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err != nil {
			return err
		}
		found = true
		return it.Value(func(v []byte) error {
			copy(buf, v)
			n = len(v)
			return nil
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	return n, found, err
}

func (e *badgerEngine) Flush() error { return e.db.Sync() }

func (e *badgerEngine) Close() error { return e.db.Close() }

func (e *badgerEngine) Settings() []Setting { return e.settings }

func (e *badgerEngine) Counters() map[string]int64 {
	bc, ic := e.db.BlockCacheMetrics(), e.db.IndexCacheMetrics()
	out := map[string]int64{"tables": int64(len(e.db.Tables()))}
	if bc != nil {
		out["block_cache_hits"], out["block_cache_misses"] = int64(bc.Hits()), int64(bc.Misses())
	}
	if ic != nil {
		out["index_cache_hits"], out["index_cache_misses"] = int64(ic.Hits()), int64(ic.Misses())
	}
	lsm, vlog := e.db.Size()
	out["lsm_bytes"], out["vlog_bytes"] = lsm, vlog
	return out
}
