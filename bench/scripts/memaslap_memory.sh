#!/bin/bash
# memaslap_memory.sh: blobcache serve with memory tiers of different sizes, through memaslap
# (Debian's libmemcached-tools, installed as memcaslap), one server at a time, alternated round
# by round. Prints a line a cell: the value size, the --memory flag, memaslap's TPS, the hits per
# second (gets less get_misses, over the run), the server's CPU ticks and peak RSS.
#
#   bash bench/scripts/memaslap_memory.sh [seconds] [rounds] [workdir]
#
# Each cell: a fresh server on an empty directory at its defaults plus --memory, memaslap's 9:1
# get:set over 32 connections x a key window (10k keys at 4 KiB, 1k at 100 KiB), 2 threads.
set -euo pipefail
secs=${1:-12}
rounds=${2:-3}
work=${3:-/var/tmp/memaslap-memory}
slap=$(command -v memaslap || command -v memcaslap || true)
if [ -z "$slap" ]; then
  echo "needs memaslap (apt-get install libmemcached-tools)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
(cd "$root" && go build -o "$work/blobcache" ./cmd/blobcache)
port=22122
for _ in $(seq "$rounds"); do
  for size in 4096 102400; do
    win=10k
    [ $size -gt 16384 ] && win=1k
    for memory in 0 64M 4G; do
      rm -rf "$work/data" && mkdir -p "$work/data"
      "$work/blobcache" serve --dir "$work/data" --memcache 127.0.0.1:$port --http "" --log-level warn \
        --memory $memory >> "$work/server.log" 2>&1 &
      pid=$!
      for _ in $(seq 100); do
        (exec 3<>/dev/tcp/127.0.0.1/$port) 2> /dev/null && break
        sleep 0.1
      done
      c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
      out=$("$slap" -s 127.0.0.1:$port -T 2 -c 32 -w $win -X $size -t ${secs}s 2>&1 || true)
      c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
      rss=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status")
      kill $pid
      wait $pid 2> /dev/null || true
      tps=$(echo "$out" | awk '/^Run time/ {for (i = 1; i <= NF; i++) if ($i == "TPS:") print $(i+1)}' | tail -1)
      gets=$(echo "$out" | awk '/^cmd_get:/ {v = $2} END {print v + 0}')
      missed=$(echo "$out" | awk '/^get_misses:/ {v = $2} END {print v + 0}')
      errors=$(echo "$out" | grep -c ERROR || true)
      echo "size=$size memory=$memory tps=$tps hits/s=$(((gets - missed) / secs)) missed=$missed/$gets cpu_ticks=$((c1 - c0)) rss_mib=$rss errors=$errors"
    done
  done
done
rm -rf "$work/data"
