#!/usr/bin/env bash
# Installs Debian's RocksDB (librocksdb-dev 7.8, which grocksdb v1.7.10 builds against), builds
# blobcache-bench with the rocksdb tag (and, per engine, a binary holding only that engine, for
# the children) and runs it with every engine. Arguments are passed to blobcache-bench, e.g.:
#
#   bench/run-rocksdb.sh                          # the full run, every phase
#   bench/run-rocksdb.sh -phases mixed -repeat 3  # the headline run, three times
#   bench/run-rocksdb.sh -quick                   # seconds
#   bench/run-rocksdb.sh -phases mixed -engines rocksdb -rocksdb-l0-files 0   # memtables a seventh of the budget
#
# The build uses the library in the parent directory (go.mod's replace). To measure a fixed
# version of it while the working tree changes, point GOWORK at a go.work whose replace names a
# copy (e.g. `git archive HEAD` unpacked elsewhere): GOWORK is passed through to go build.
#
# Needs root for apt-get (skipped when the library is already installed) and for dropping the
# page cache between phases (without root the report says it was not dropped).
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -e /usr/include/rocksdb/c.h ]; then
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y librocksdb-dev
fi
mkdir -p bin
go build -tags rocksdb -o bin/blobcache-bench-rocksdb ./cmd/blobcache-bench
# Each engine's children run from a binary that links only that engine, so that a child's memory
# (peak RSS) is its engine's, not the other engines' code and static initializers (RocksDB's C++
# library alone adds ~10 MiB to every child that loads it), and without the chart code (nocharts:
# gonum/plot parses its fonts at start-up, ~4 MiB of every child's RSS; a child draws nothing).
# Pass -engine-exe "" to run every child from the binary above.
go build -tags nocharts,nopebble,nobadger -o bin/child-blobcache ./cmd/blobcache-bench
go build -tags nocharts,rocksdb,nopebble,nobadger -o bin/child-rocksdb ./cmd/blobcache-bench
go build -tags nocharts,nobadger -o bin/child-pebble ./cmd/blobcache-bench
go build -tags nocharts,nopebble -o bin/child-badger ./cmd/blobcache-bench
exec bin/blobcache-bench-rocksdb \
	-engine-exe "blobcache*=bin/child-blobcache,floor=bin/child-blobcache,rocksdb=bin/child-rocksdb,pebble=bin/child-pebble,badger=bin/child-badger" \
	"$@"
