// Package bench is the home of blobcache-bench, the side-by-side benchmark of BlobCache against
// RocksDB, Pebble and Badger. It is a module of its own so the library's go.mod stays small.
//
//   - workload: keys, value sizes, value bytes and the operation mix, all deterministic.
//   - hist: the latency histogram behind every percentile.
//   - procfs: parsers of /proc/self/io, /proc/diskstats and /proc/self/status.
//   - engine: one file per engine behind one interface; RocksDB needs the rocksdb build tag.
//   - harness: the phases a child process runs and the driver that starts one child per engine.
//   - report: the markdown tables, the JSON file and the PNG charts.
//
// The command is cmd/blobcache-bench; docs/BENCHMARKS.md has the commands and the figures.
package bench
