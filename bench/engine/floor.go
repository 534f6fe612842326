package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

func init() {
	register("floor", "not a store: the least I/O any engine serving hits from the page cache does, one buffered write per Put appended to one file, one pread per hit, a map for an index", openFloor)
}

// floorEngine is the comparator below every engine: it does only the I/O of the bytes. A Put is
// one pwrite of the value at the end of one append-only file (buffered, so the page cache keeps
// the bytes, as RocksDB's writes keep them), a Get one pread of it into the caller's buffer. The
// index is a Go map under a lock; nothing is checked, synced, evicted or recovered, and a key's
// older versions are never reclaimed. An engine that serves hits from the page cache cannot do
// less work for the same operations, so the floor's ops/s and CPU bound what any of them can
// reach on the machine of the run; an engine that keeps the values in its own memory can, at
// the cost of its RSS.
type floorEngine struct {
	f   *os.File
	end atomic.Int64

	mu  sync.RWMutex
	loc map[string]floorLoc
}

type floorLoc struct{ off, n int64 }

func openFloor(cfg Config) (Engine, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(cfg.Dir, "floor.log"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &floorEngine{f: f, loc: make(map[string]floorLoc, cfg.ExpectedKeys)}, nil
}

func (e *floorEngine) Put(key, value []byte) error {
	n := int64(len(value))
	off := e.end.Add(n) - n
	if _, err := e.f.WriteAt(value, off); err != nil {
		return fmt.Errorf("floor: write %d bytes at %d: %w", n, off, err)
	}
	e.mu.Lock()
	e.loc[string(key)] = floorLoc{off, n}
	e.mu.Unlock()
	return nil
}

func (e *floorEngine) Get(key, buf []byte) (int, bool, error) {
	e.mu.RLock()
	l, ok := e.loc[string(key)]
	e.mu.RUnlock()
	if !ok {
		return 0, false, nil
	}
	n := min(l.n, int64(len(buf)))
	if _, err := e.f.ReadAt(buf[:n], l.off); err != nil {
		return 0, true, fmt.Errorf("floor: read %d bytes at %d: %w", n, l.off, err)
	}
	return int(l.n), true, nil
}

// Flush has nothing to wait for: every Put is in the page cache when it returns.
func (e *floorEngine) Flush() error { return nil }

func (e *floorEngine) Close() error { return e.f.Close() }

func (e *floorEngine) Settings() []Setting {
	return []Setting{
		{"writes", "one buffered pwrite per Put, appended to one file (no checksum, no sync)"},
		{"reads", "one pread per hit into the caller's buffer (the page cache serves it)"},
		{"index", "a Go map under a sync.RWMutex"},
		{"space", "never reclaimed (the file holds every version written)"},
	}
}

func (e *floorEngine) Counters() map[string]int64 { return nil }
