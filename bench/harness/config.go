package harness

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/seed57392e9e/blobcache/bench/engine"
	"github.com/seed57392e9e/blobcache/bench/workload"
)

// Phases, in the order the driver runs them.
const (
	PhaseMixed    = "mixed"    // seed 000: 10% 1 MiB writes, 45% hits, 45% misses
	PhaseIOPerGet = "iopg"     // seed 002: I/Os per Get against dataset size
	PhaseCapacity = "capacity" // seed 001: millions of small values
)

// AllPhases lists the phases.
var AllPhases = []string{PhaseMixed, PhaseIOPerGet, PhaseCapacity}

// Config is every knob of a run. The driver passes it to each child as JSON.
type Config struct {
	Dir          string `json:"dir"`           // parent of the engines' data directories
	MemoryBudget int64  `json:"memory_budget"` // bytes of caches and buffers per engine
	Goroutines   int    `json:"goroutines"`    // concurrent callers in every window
	Seed         uint64 `json:"seed"`
	DropCaches   bool   `json:"drop_caches"` // drop the page cache where a phase asks for a cold start
	// DropSettle is how long a child waits after dropping the page cache before the cold
	// window starts. A guest that hands freed memory back to its host (free page reporting)
	// makes the first touch of that memory several times dearer once it has been handed back,
	// a couple of seconds after the drop: a window started at once runs partly in one state and
	// partly in the other, by how fast the engine is. Waiting puts every engine in the same one.
	// A child also waits after the drop it makes as it starts, before its first load: otherwise
	// its loads would write into the page cache the engine before it left, freed moments before.
	DropSettle time.Duration `json:"drop_settle,omitempty"`
	Progress   bool          `json:"progress"`

	MixedPreload int `json:"mixed_preload"` // blobs written before the mixed window
	MixedOps     int `json:"mixed_ops"`     // operations in the mixed window
	MixedValue   int `json:"mixed_value"`   // bytes per blob

	IOKeys   []int64 `json:"io_keys"`   // dataset sizes, in keys, ascending
	IOValue  int     `json:"io_value"`  // bytes per value
	IOGets   int     `json:"io_gets"`   // measured Gets per window
	IOWarmup int     `json:"io_warmup"` // unmeasured Gets after each load and cache drop

	CapKeys  int64 `json:"cap_keys"` // values loaded
	CapMin   int   `json:"cap_min"`  // value size range
	CapMax   int   `json:"cap_max"`
	CapGets  int   `json:"cap_gets"` // Gets per cold and hot window
	CapHot   int   `json:"cap_hot"`  // keys in the hot set
	Deadline int   `json:"deadline"` // seconds a child may run before the driver stops it (0: none)

	// RocksDBL0Files sizes RocksDB's memtables in the mixed phase so that the phase's data makes
	// about this many L0 files: seed 000's 455 by default, its ratio of data to memtable. 0: the
	// budget split seven ways. The other phases always split the budget.
	RocksDBL0Files int `json:"rocksdb_l0_files"`
	// BlobcacheBuffer is blobcache-prod's WriteBufferSize in bytes (0: a seventh of the budget).
	BlobcacheBuffer int64 `json:"blobcache_buffer"`
	// BlobcacheDirectBuffer is blobcache-direct's WriteBufferSize in bytes (0: a seventh of the
	// budget). The default, 3 MiB, is the smallest size of a sweep (2, 3, 4, 6 MiB, data bigger
	// than RAM; BENCHMARKS.md) whose throughput matched the larger sizes' with few Puts waiting.
	BlobcacheDirectBuffer int64 `json:"blobcache_direct_buffer,omitempty"`
	// BlobcacheRead is the BlobCache engines' read path: engine.ReadAt or engine.Reader.
	BlobcacheRead string `json:"blobcache_read"`
	// BlobcacheVerify turns on blobcache-prod's VerifyOnRead.
	BlobcacheVerify bool `json:"blobcache_verify,omitempty"`
	// BlobcacheMemory is the BlobCache engines' Options.MemorySize, the memory tier (0: none,
	// the library's default).
	BlobcacheMemory int64 `json:"blobcache_memory,omitempty"`
	// BlobcacheMemoryOnWrite makes the memory tier take values as they are written
	// (Options.MemoryAdmission MemoryOnWrite) instead of on their second hit.
	BlobcacheMemoryOnWrite bool `json:"blobcache_memory_on_write,omitempty"`
	// BlobcacheBuffered is the BlobCache engines' page-cache use beyond their defaults: "" (the
	// engine's own), "reads" (BufferedReads), "writes" (BufferedWrites), "both", or "none"
	// (DirectWrites: no batch through the page cache).
	BlobcacheBuffered string `json:"blobcache_buffered,omitempty"`
	// ProfileDir, if set, gets a CPU profile of every measured window of every child and a heap
	// profile at its end (<engine>-<phase>-<rep>-<window>.cpu.pprof and .heap.pprof); loads and
	// warm-ups are not profiled.
	ProfileDir string `json:"profile_dir,omitempty"`
	// ChildEnv is added to every child's environment (GOGC, GOMEMLIMIT...): process settings a
	// service would set too, recorded so the report can say so.
	ChildEnv []string `json:"child_env,omitempty"`
}

// DefaultConfig is sized for this project's machine (2 cores, 24 GiB, ~80 GB free disk) to
// finish a run of every engine in tens of minutes.
func DefaultConfig() Config {
	return Config{
		Dir: "/tmp/blobcache-bench", MemoryBudget: 1 << 30, Goroutines: 8, Seed: 1, DropCaches: true, Progress: true,
		MixedPreload: 2048, MixedOps: 40000, MixedValue: 1 << 20,
		IOKeys: []int64{1 << 20, 3 << 20, 9 << 20}, IOValue: 1 << 10, IOGets: 20000, IOWarmup: 20000,
		CapKeys: 5_000_000, CapMin: 100, CapMax: 500, CapGets: 10000, CapHot: 10000,
		Deadline:       1800,
		RocksDBL0Files: engine.SeedL0Files, BlobcacheBuffer: 16 << 20, BlobcacheDirectBuffer: 3 << 20, BlobcacheRead: engine.ReadAt,
	}
}

// QuickConfig is a run of seconds, for CI: every code path, tiny data.
func QuickConfig() Config {
	c := DefaultConfig()
	c.MemoryBudget = 64 << 20
	c.Goroutines = 4
	c.DropCaches = false
	c.Progress = false
	c.MixedPreload, c.MixedOps, c.MixedValue = 16, 400, 64<<10
	c.IOKeys, c.IOGets, c.IOWarmup = []int64{2000, 4000, 8000}, 500, 100
	c.CapKeys, c.CapGets, c.CapHot = 20000, 1000, 500
	c.Deadline = 300
	return c
}

// Validate reports the first unusable value.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("harness: no data directory")
	case c.MemoryBudget < 16<<20:
		return fmt.Errorf("harness: memory budget %d is under 16 MiB", c.MemoryBudget)
	case c.Goroutines < 1:
		return fmt.Errorf("harness: %d goroutines", c.Goroutines)
	case c.MixedValue < 1 || c.IOValue < 1 || c.CapMin < 1 || c.CapMax < c.CapMin:
		return fmt.Errorf("harness: bad value sizes")
	case len(c.IOKeys) == 0:
		return fmt.Errorf("harness: no dataset sizes")
	case c.CapHot < 1:
		return fmt.Errorf("harness: empty hot set")
	case c.RocksDBL0Files < 0 || c.BlobcacheBuffer < 0 || c.BlobcacheDirectBuffer < 0:
		return fmt.Errorf("harness: negative RocksDB L0 files or BlobCache buffer")
	case c.BlobcacheRead != "" && c.BlobcacheRead != engine.ReadAt && c.BlobcacheRead != engine.Reader:
		return fmt.Errorf("harness: BlobCache read path %q is neither %q nor %q", c.BlobcacheRead, engine.ReadAt, engine.Reader)
	}
	for i, n := range c.IOKeys {
		if n < 1 || (i > 0 && n <= c.IOKeys[i-1]) {
			return fmt.Errorf("harness: dataset sizes must be positive and ascending: %v", c.IOKeys)
		}
	}
	return nil
}

// ParseSizes parses a comma-separated list of counts with optional k, M or G suffixes
// (powers of 1000 are ambiguous for keys; these are powers of 1024: 1M = 1048576).
func ParseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := int64(1)
		switch {
		case strings.HasSuffix(f, "k"):
			mult, f = 1<<10, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mult, f = 1<<20, strings.TrimSuffix(f, "M")
		case strings.HasSuffix(f, "G"):
			mult, f = 1<<30, strings.TrimSuffix(f, "G")
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("harness: bad size %q in %q", f, s)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// MixedDatasetBytes is the value bytes the mixed phase has written at its end: the preload and
// the window's expected share of Puts.
func (c Config) MixedDatasetBytes() int64 {
	puts := int64(math.Round(float64(c.MixedOps) * workload.SeedMix.Put / (workload.SeedMix.Put + workload.SeedMix.GetHit + workload.SeedMix.GetMiss)))
	return (int64(c.MixedPreload) + puts) * int64(c.MixedValue)
}
