// Package bench is the home of blobcache-bench, the side-by-side benchmark of BlobCache against
// RocksDB, Pebble and Badger, and of mcbench, which compares `blobcache serve` with memcached
// through the memcached protocol. It is a module of its own so the library's go.mod stays small.
//
//   - workload: keys, value sizes, value bytes and the operation mix, all deterministic.
//   - hist: the latency histogram behind every percentile.
//   - procfs: parsers of /proc/self/io, /proc/diskstats, /proc/<pid>/status and /proc/<pid>/stat.
//   - engine: one file per engine behind one interface; RocksDB needs the rocksdb build tag.
//     floor is not a store but the least I/O any engine serving hits from the page cache does,
//     the bound the others are read against.
//   - harness: the phases a child process runs and the driver that starts one child per engine.
//   - report: the markdown tables, the JSON file and the PNG charts.
//   - memcached: a memcached text-protocol client and the load generator behind mcbench.
//   - trace: request traces (libCacheSim's oracleGeneral, CSV, synthetic Zipf) for hit ratios.
//   - replay: a trace replayed against BlobCache as a look-aside cache (blobcache-bench trace);
//     scripts/libcachesim_compare.py runs libCacheSim's policies on the same traces beside it.
//
// The commands are cmd/blobcache-bench and cmd/mcbench (whose null subcommand is a server that
// stores nothing, the ceiling of a memcached-protocol load on the machine), and cmd/fillcost,
// which measures the kernel's cost of filling the page cache; docs/BENCHMARKS.md has the commands
// and the figures.
package bench
