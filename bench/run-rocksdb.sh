#!/usr/bin/env bash
# Installs Debian's RocksDB (librocksdb-dev 7.8, which grocksdb v1.7.10 builds against), builds
# blobcache-bench with the rocksdb tag and runs it with every engine. Arguments are passed to
# blobcache-bench, e.g.:
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
exec bin/blobcache-bench-rocksdb "$@"
