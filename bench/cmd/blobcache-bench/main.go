// Command blobcache-bench runs one workload against several engines, each in its own process,
// and prints one markdown table per phase; it also writes every figure as JSON and draws PNG
// charts.
//
//	blobcache-bench                               # every compiled-in engine, every phase
//	blobcache-bench -quick                        # seconds: tiny data, for CI
//	blobcache-bench -engines blobcache,pebble -phases mixed -repeat 3
//	blobcache-bench trace -oracle t.oracleGeneral.bin -cache 0.01,0.1   # hit ratio on a trace
//	blobcache-bench compress -repeat 3 -json compress.json             # what compression buys and costs
//
// RocksDB is compiled in only with -tags rocksdb (see bench/run-rocksdb.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/seed57392e9e/blobcache/bench/engine"
	"github.com/seed57392e9e/blobcache/bench/harness"
	"github.com/seed57392e9e/blobcache/bench/report"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "blobcache-bench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "trace" {
		return runTrace(args[1:])
	}
	if len(args) > 0 && args[0] == "compress" {
		return runCompress(args[1:])
	}
	fs := flag.NewFlagSet("blobcache-bench", flag.ContinueOnError)
	d := harness.DefaultConfig()
	quick := fs.Bool("quick", false, "tiny data, seconds per engine (for CI); other flags still apply on top")
	engines := fs.String("engines", strings.Join(engine.Names(), ","), "engines to run, comma-separated; compiled in: "+strings.Join(engine.Names(), ","))
	phases := fs.String("phases", strings.Join(harness.AllPhases, ","), "phases to run: mixed (seed 000), iopg (seed 002), capacity (seed 001)")
	reps := fs.Int("repeat", 1, "runs of every phase and engine; tables show the median run")
	jsonOut := fs.String("json", "bench-results.json", "file for every figure, as JSON (empty: none)")
	chartDir := fs.String("charts", "bench-charts", "directory for the PNG charts (empty: none)")
	settings := fs.Bool("settings", true, "print each engine's settings after the tables")
	merge := fs.String("merge", "", "run nothing: render the tables, JSON and charts of these JSON files, comma-separated; a later file's runs of an engine and phase replace an earlier file's")

	dir := fs.String("dir", d.Dir, "parent directory of the engines' data directories (on the disk under test)")
	cacheMB := fs.Int64("cache", d.MemoryBudget>>20, "memory budget per engine for caches and write buffers, MiB")
	goroutines := fs.Int("goroutines", d.Goroutines, "concurrent callers")
	seed := fs.Uint64("seed", d.Seed, "workload seed")
	drop := fs.Bool("drop-caches", d.DropCaches, "drop the page cache before cold windows (needs root)")
	dropSettle := fs.Duration("drop-settle", d.DropSettle, "wait this long after dropping the page cache before a cold window (a guest that hands freed memory back to its host settles)")
	progress := fs.Bool("progress", d.Progress, "progress bars on standard error")
	deadline := fs.Int("deadline", d.Deadline, "seconds a child may run before it is stopped (0: none)")

	rocksL0 := fs.Int("rocksdb-l0-files", d.RocksDBL0Files, "mixed: size RocksDB's memtables so the phase's data makes about this many L0 files (seed 000: 455; 0: a seventh of the budget)")
	engineExe := fs.String("engine-exe", "", "binaries to run engines' children from, engine=path,... (engine may end in * to match a prefix); default: this binary for all")
	bcMemory := fs.Int64("blobcache-memory", 0, "the BlobCache engines' memory tier, MiB (Options.MemorySize; 0: none, the library's default)")
	bcMemoryOnWrite := fs.Bool("blobcache-memory-on-write", false, "with -blobcache-memory: values enter the memory tier as they are written (MemoryAdmission MemoryOnWrite), not on their second hit")
	bcBuffer := fs.Int64("blobcache-buffer", d.BlobcacheBuffer>>20, "blobcache-prod's WriteBufferSize, MiB (x7 buffers; 0: a seventh of the budget)")
	bcDirectBuffer := fs.Int64("blobcache-direct-buffer", d.BlobcacheDirectBuffer>>20, "blobcache-direct's WriteBufferSize, MiB (x7 buffers; 0: a seventh of the budget)")
	bcRead := fs.String("blobcache-read", d.BlobcacheRead, "BlobCache read path: readat (Cache.ReadAt into the caller's buffer) or reader (Get, then Read)")
	bcBuffered := fs.String("blobcache-buffered", "", "BlobCache engines: also read (reads), write (writes) or both (both) through the page cache (BufferedReads, BufferedWrites), or write no batch through it (none: DirectWrites)")
	bcVerify := fs.Bool("blobcache-verify", d.BlobcacheVerify, "blobcache-prod, blobcache-direct: VerifyOnRead (check every hit's CRC-32C, as RocksDB checks its blocks)")
	profile := fs.String("profile", "", "directory for a CPU profile of every measured window of every child and a heap profile at its end (empty: none)")
	childEnv := fs.String("child-env", "", "environment of the children, comma-separated NAME=VALUE (e.g. GOGC=50,GOMEMLIMIT=512MiB); recorded in the JSON")

	mixedPreload := fs.Int("mixed-preload", d.MixedPreload, "mixed: blobs written before the measured window")
	mixedOps := fs.Int("mixed-ops", d.MixedOps, "mixed: operations in the measured window")
	mixedValue := fs.Int("mixed-value", d.MixedValue, "mixed: bytes per blob")

	ioKeys := fs.String("io-keys", "", "iopg: dataset sizes in keys, ascending, k/M/G = 2^10/2^20/2^30 (default 1M,3M,9M)")
	ioValue := fs.Int("io-value", d.IOValue, "iopg: bytes per value")
	ioGets := fs.Int("io-gets", d.IOGets, "iopg: measured Gets per window")
	ioWarmup := fs.Int("io-warmup", d.IOWarmup, "iopg: unmeasured Gets after each load")

	capKeys := fs.Int64("cap-keys", d.CapKeys, "capacity: values loaded")
	capMin := fs.Int("cap-min", d.CapMin, "capacity: smallest value, bytes")
	capMax := fs.Int("cap-max", d.CapMax, "capacity: largest value, bytes")
	capGets := fs.Int("cap-gets", d.CapGets, "capacity: Gets per cold and hot window")
	capHot := fs.Int("cap-hot", d.CapHot, "capacity: keys in the hot set")

	// Child mode: run one phase of one engine and write the result.
	child := fs.Bool("child", false, "internal: run one engine and phase in this process")
	childEngine := fs.String("engine", "", "internal: child's engine")
	childPhase := fs.String("phase", "", "internal: child's phase")
	childData := fs.String("data", "", "internal: child's data directory")
	childResult := fs.String("result", "", "internal: child's result file")
	childConfig := fs.String("config", "", "internal: child's configuration, JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *child {
		return harness.ChildMain(*childConfig, *childEngine, *childPhase, *childData, *childResult)
	}

	if *merge != "" {
		rep, err := report.Merge(split(*merge))
		if err != nil {
			return err
		}
		return output(rep, *settings, *jsonOut, *chartDir)
	}
	cfg := d
	if *quick {
		cfg = harness.QuickConfig()
	}
	// Flags given explicitly override the preset.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	apply := func(name string, f func()) {
		if set[name] {
			f()
		}
	}
	apply("dir", func() { cfg.Dir = *dir })
	apply("cache", func() { cfg.MemoryBudget = *cacheMB << 20 })
	apply("goroutines", func() { cfg.Goroutines = *goroutines })
	apply("seed", func() { cfg.Seed = *seed })
	apply("drop-caches", func() { cfg.DropCaches = *drop })
	apply("drop-settle", func() { cfg.DropSettle = *dropSettle })
	apply("progress", func() { cfg.Progress = *progress })
	apply("deadline", func() { cfg.Deadline = *deadline })
	apply("rocksdb-l0-files", func() { cfg.RocksDBL0Files = *rocksL0 })
	apply("blobcache-buffer", func() { cfg.BlobcacheBuffer = *bcBuffer << 20 })
	apply("blobcache-memory", func() { cfg.BlobcacheMemory = *bcMemory << 20 })
	apply("blobcache-memory-on-write", func() { cfg.BlobcacheMemoryOnWrite = *bcMemoryOnWrite })
	apply("blobcache-direct-buffer", func() { cfg.BlobcacheDirectBuffer = *bcDirectBuffer << 20 })
	apply("blobcache-read", func() { cfg.BlobcacheRead = *bcRead })
	apply("blobcache-verify", func() { cfg.BlobcacheVerify = *bcVerify })
	apply("blobcache-buffered", func() { cfg.BlobcacheBuffered = *bcBuffered })
	apply("mixed-preload", func() { cfg.MixedPreload = *mixedPreload })
	apply("mixed-ops", func() { cfg.MixedOps = *mixedOps })
	apply("mixed-value", func() { cfg.MixedValue = *mixedValue })
	apply("io-value", func() { cfg.IOValue = *ioValue })
	apply("io-gets", func() { cfg.IOGets = *ioGets })
	apply("io-warmup", func() { cfg.IOWarmup = *ioWarmup })
	apply("cap-keys", func() { cfg.CapKeys = *capKeys })
	apply("cap-min", func() { cfg.CapMin = *capMin })
	apply("cap-max", func() { cfg.CapMax = *capMax })
	apply("cap-gets", func() { cfg.CapGets = *capGets })
	apply("cap-hot", func() { cfg.CapHot = *capHot })
	if *ioKeys != "" {
		ks, err := harness.ParseSizes(*ioKeys)
		if err != nil {
			return err
		}
		cfg.IOKeys = ks
	}
	if *profile != "" {
		abs, err := filepath.Abs(*profile)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return err
		}
		cfg.ProfileDir = abs
	}
	cfg.ChildEnv = split(*childEnv)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	exes := map[string]string{}
	for _, kv := range split(*engineExe) {
		name, path, ok := strings.Cut(kv, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("-engine-exe: %q is not engine=path", kv)
		}
		if path, err = filepath.Abs(path); err != nil {
			return err
		}
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("-engine-exe: %w", err)
		}
		exes[name] = path
	}
	drv := &harness.Driver{
		Exe: exe, EngineExe: exes, Cfg: cfg, Engines: split(*engines), Phases: split(*phases), Reps: *reps, ChildEnv: cfg.ChildEnv,
		Log: func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) },
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, runErr := drv.Run(ctx)
	if rep == nil {
		return runErr
	}
	if err := output(rep, *settings, *jsonOut, *chartDir); err != nil {
		return err
	}
	return runErr
}

// output prints the tables and writes the JSON file and the charts.
func output(rep *harness.Report, settings bool, jsonOut, chartDir string) error {
	fmt.Print(report.Markdown(rep))
	if settings {
		fmt.Print("### Engine settings\n\n", report.Settings(rep))
	}
	if jsonOut != "" {
		if err := report.WriteJSON(rep, jsonOut); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "figures:", jsonOut)
	}
	if chartDir != "" {
		files, err := report.Charts(rep, chartDir)
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "charts:", strings.Join(files, " "))
	}
	return nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
