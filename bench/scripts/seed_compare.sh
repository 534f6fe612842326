#!/bin/bash
# seed_compare.sh: the reference workload (seed 000's mixed phase) with BlobCache, the seed's own
# code (miretskiy/blobcache) and the floor engine in each round, for issue 28's comparison with
# the seed. The bench module cannot depend on the seed's module (the Go proxy refuses it), so this
# builds a scratch copy of the bench, from the committed tree, with the engine in
# seed_engine.go.txt and a replace directive to a patched copy of the checkout given.
#
#   bash bench/scripts/seed_compare.sh SEED_CHECKOUT [ROUNDS]
#
# SEED_CHECKOUT is a directory holding the seed's source (e.g. `git archive` of its newest
# snapshot). Its io_linux.go calls syscall.PosixFadvise, which Go's syscall package lacks on
# Linux; the copy calls x/sys's unix.Fadvise instead, the one change made to it. SETTLE (e.g.
# 10s) is passed as -drop-settle: each engine starts, and its window starts, that long after a
# drop of the page cache.
set -euo pipefail
seed=$1 rounds=${2:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${WORK:-/var/tmp/seedcmp}
rm -rf "$work" && mkdir -p "$work/main"
cp -r "$seed" "$work/seed"
sed -i -e 's/syscall\.POSIX_FADV_SEQUENTIAL/unix.FADV_SEQUENTIAL/' \
  -e 's/syscall\.POSIX_FADV_DONTNEED/unix.FADV_DONTNEED/' \
  -e 's/return syscall\.PosixFadvise(int(fd), offset, length, linuxHint)/return unix.Fadvise(int(fd), int64(offset), length, linuxHint)/' \
  "$work/seed/io_linux.go"
git -C "$root" archive HEAD | tar -x -C "$work/main"
cp "$root/bench/scripts/seed_engine.go.txt" "$work/main/bench/engine/seed.go"
sed -i 's/"badger", "floor"}/"badger", "floor", "seed"}/' "$work/main/bench/engine/engine.go"
(cd "$work/main/bench" &&
  go mod edit -require github.com/miretskiy/blobcache@v0.0.0 -replace "github.com/miretskiy/blobcache=$work/seed" &&
  go mod tidy > /dev/null 2>&1 &&
  go build -o "$work/blobcache-bench" ./cmd/blobcache-bench)
for r in $(seq "$rounds"); do
  "$work/blobcache-bench" -phases mixed -engines blobcache,seed,floor -mixed-preload 2000 -mixed-ops 20000 \
    -goroutines 4 ${SETTLE:+-drop-settle "$SETTLE"} -dir "${DIR:-/tmp/blobcache-bench}" -json "$work/round$r.json" |
    grep -E '^\| (blobcache|seed|floor) \|'
done
