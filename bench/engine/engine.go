// Package engine puts BlobCache and the engines it is compared with behind one interface, one
// file per engine. Every engine is given the same memory budget (Config.MemoryBudget) for its
// caches and write buffers, split as its own file says; Settings lists what it was given.
//
// The RocksDB engine is cgo and needs librocksdb; it is compiled only with the rocksdb build
// tag, so the default build needs no C library.
package engine

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Engine is a key-value store under test. Methods are safe for concurrent use.
type Engine interface {
	// Put stores value under key. The engine must not keep value after Put returns.
	Put(key, value []byte) error
	// Get reads the value of key to its end, copying it into buf (as much as fits) and returns
	// its length; found is false when the key is absent.
	Get(key, buf []byte) (n int, found bool, err error)
	// Flush writes buffered writes to the engine's files (memtables, write buffers) and waits
	// for the background work that follows where the engine lets it be waited for.
	Flush() error
	// Close flushes what the engine flushes on close and releases everything.
	Close() error
	// Settings lists the engine's configuration as used, for the report.
	Settings() []Setting
	// Counters returns the engine's own counters (cache hits, read calls...), or nil.
	Counters() map[string]int64
}

// ReadBufferer is implemented by an engine that wants the buffers Get reads into to come from
// it, as a program using it would allocate them: BlobCache hands out huge-page memory
// (blobcache.NewReadBuffer), so that a direct read of a value is one device request. Other
// engines copy into the buffer and get plain Go memory. n is the bytes for every goroutine's
// buffer together.
type ReadBufferer interface {
	ReadBuffer(n int) []byte
}

// Setting is one configuration value of an engine.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Config is what every engine is opened with.
type Config struct {
	Dir          string // data directory, empty or absent
	MemoryBudget int64  // bytes for caches and write buffers
	ExpectedKeys int64  // the most keys the phase will write
	DatasetBytes int64  // value bytes the phase will have written at its end (0: not known)

	// RocksDBL0Files sizes RocksDB's memtables so that DatasetBytes makes about this many L0
	// files, seed 000's shape at this machine's scale (0: the budget split seven ways).
	RocksDBL0Files int
	// BlobcacheWriteBuffer is blobcache-prod's WriteBufferSize (0: the budget split seven ways).
	BlobcacheWriteBuffer int64
	// BlobcacheDirectWriteBuffer is blobcache-direct's WriteBufferSize (0: the budget split
	// seven ways).
	BlobcacheDirectWriteBuffer int64
	// BlobcacheRead is how the BlobCache engines read a hit: ReadAt (into the caller's buffer)
	// or Reader (Get, then Read from the returned reader).
	BlobcacheRead string
	// BlobcacheVerify turns on blobcache-prod's VerifyOnRead: every hit checks the value's
	// CRC-32C, as RocksDB checks every block it reads (its default).
	BlobcacheVerify bool
	// BlobcacheMemory is every BlobCache engine's Options.MemorySize (0: no memory tier, the
	// library's default).
	BlobcacheMemory int64
	// BlobcacheMemoryOnWrite sets MemoryAdmission to MemoryOnWrite (with BlobcacheMemory).
	BlobcacheMemoryOnWrite bool
	// BlobcacheBuffered turns on every BlobCache engine's BufferedReads ("reads"),
	// BufferedWrites ("writes") or both ("both"), or DirectWrites ("none": no batch goes
	// through the page cache, whatever the write route would pick); "" leaves the engine's own.
	BlobcacheBuffered string
}

// BlobCache read paths (Config.BlobcacheRead).
const (
	ReadAt = "readat" // Cache.ReadAt: one positioned read into the caller's buffer, no allocation
	Reader = "reader" // Cache.Get and io.Reader: a pooled buffer, then a copy into the caller's
)

// Opener opens an engine.
type Opener func(Config) (Engine, error)

type entry struct {
	open Opener
	desc string
}

var registry = map[string]entry{}

// register adds an engine; each engine file calls it from init.
func register(name, desc string, open Opener) { registry[name] = entry{open, desc} }

// ErrUnknown is returned by Open for an engine that is not compiled in.
var ErrUnknown = errors.New("engine: unknown engine")

// Open opens the named engine.
func Open(name string, cfg Config) (Engine, error) {
	e, ok := registry[name]
	if !ok {
		hint := ""
		if name == "rocksdb" {
			hint = " (build with -tags rocksdb; see run-rocksdb.sh)"
		}
		return nil, fmt.Errorf("%w %q%s", ErrUnknown, name, hint)
	}
	return e.open(cfg)
}

// order is the order of engines in tables and charts: BlobCache first, then the others.
var order = []string{"blobcache", "blobcache-prod", "blobcache-direct", "rocksdb", "pebble", "badger", "floor"}

// Names lists the engines compiled in: those of order first, then any other, sorted.
func Names() []string {
	var out []string
	for _, n := range order {
		if _, ok := registry[n]; ok {
			out = append(out, n)
		}
	}
	var rest []string
	for n := range registry {
		if !slices.Contains(order, n) {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// Describe returns the one-line description of an engine.
func Describe(name string) string { return registry[name].desc }

// mib formats a byte count in MiB for settings.
func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
