#!/bin/bash
# memaslap_compare.sh: blobcache serve against memcached, in RAM and with extstore, through the
# same load generator (memaslap from Debian's libmemcached-tools, installed as memcaslap), one
# server at a time, in one run. Prints a markdown table: ops/s (memaslap's final TPS), the
# server's CPU seconds and peak RSS over the measured run, and the ratio to memcached in RAM.
#
#   bash bench/scripts/memaslap_compare.sh [seconds] [workdir]
#
# Each cell: a fresh server, memaslap's default 9:1 get:set mix over a fixed key window
# (concurrency x window keys), 2 threads, 32 connections, values of one fixed size, for the given
# time (memaslap fills the window with sets as it starts, inside the run). Servers:
#   memcached        -m 4096 (everything fits in RAM)
#   memcached+ext    -m 256 with extstore on the work directory (values mostly on flash)
#   blobcache        blobcache serve at its defaults (built from this tree), plus $SERVE_FLAGS
#   null             mcbench null: stores nothing, answers every get with a value from memory;
#                    the most this load generator and the loopback allow on the machine
# Besides ops/s, each row says how many gets missed (memaslap's get_misses over its cmd_get) and
# the hits per second: a server that drops values answers faster and serves less.
set -euo pipefail
secs=${1:-20}
work=${2:-/var/tmp/memaslap-compare}
slap=$(command -v memaslap || command -v memcaslap || true)
if [ -z "$slap" ] || ! command -v memcached > /dev/null; then
  echo "needs memcached and memaslap (apt-get install memcached libmemcached-tools)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
(cd "$root" && go build -o "$work/blobcache" ./cmd/blobcache)
(cd "$root/bench" && go build -o "$work/mcbench" ./cmd/mcbench)
port=22122

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
peak_rss() { awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$1/status"; }

start_server() { # kind size -> sets pid
  rm -rf "$work/data" && mkdir -p "$work/data"
  case $1 in
    memcached) memcached -l 127.0.0.1 -p $port -U 0 -m 4096 -I 2m -t 2 -c 4096 -u root & ;;
    memcached+ext) memcached -l 127.0.0.1 -p $port -U 0 -m 256 -I 2m -t 2 -c 4096 -u root \
      -o "ext_path=$work/data/extstore:16G,ext_threads=2" & ;;
    blobcache) "$work/blobcache" serve --dir "$work/data" --memcache 127.0.0.1:$port --http "" \
      --log-level warn ${SERVE_FLAGS:-} >> "$work/server.log" 2>&1 & ;;
    null) "$work/mcbench" null --addr 127.0.0.1:$port --value-size "$2" & ;;
  esac
  pid=$!
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/$port) 2> /dev/null && return 0
    sleep 0.1
  done
  echo "server $1 did not start" >&2
  exit 1
}

hz=$(getconf CLK_TCK)
echo "Machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -r); $(memcached -V); memaslap at $slap; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| value | window keys | server | ops/s | gets missed | hits/s | server CPU s | server peak RSS MiB | ops/s against memcached in RAM |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for size in 4096 102400; do
  win=10k
  [ $size -gt 16384 ] && win=1k # 32 x 1k keys x 100 KiB: 3.2 GB, in memcached's 4 GiB
  base=
  for kind in memcached memcached+ext blobcache null; do
    start_server $kind $size
    c0=$(cpu_ticks $pid)
    out=$("$slap" -s 127.0.0.1:$port -T 2 -c 32 -w $win -X $size -t ${secs}s 2>&1 || true)
    c1=$(cpu_ticks $pid)
    rss=$(peak_rss $pid)
    kill $pid; wait $pid 2> /dev/null || true
    tps=$(echo "$out" | awk '/^Run time/ {for (i = 1; i <= NF; i++) if ($i == "TPS:") print $(i+1)}' | tail -1)
    # memaslap prints the error lines a server sends; a run with any measured refusals, not
    # operations (keys with control bytes were refused until 2026-11-25), so it is not reported.
    errors=$(echo "$out" | grep -c 'ERROR' || true)
    if [ "$errors" -gt 0 ]; then
      echo "| $((size / 1024)) KiB | 32 x $win | $kind | $errors error replies: not measured | | | | | |"
      continue
    fi
    [ -z "$base" ] && base=$tps
    ratio=$(awk -v a="$tps" -v b="$base" 'BEGIN {if (b > 0) printf "%.2fx", a / b}')
    cpu=$(awk -v t=$((c1 - c0)) -v hz=$hz 'BEGIN {printf "%.1f", t / hz}')
    gets=$(echo "$out" | awk '/^cmd_get:/ {v = $2} END {print v + 0}')
    missed=$(echo "$out" | awk '/^get_misses:/ {v = $2} END {print v + 0}')
    miss=$(awk -v m="$missed" -v g="$gets" 'BEGIN {if (g > 0) printf "%.1f%%", 100 * m / g}')
    hits=$(awk -v m="$missed" -v g="$gets" -v s="$secs" 'BEGIN {printf "%d", (g - m) / s}')
    echo "| $((size / 1024)) KiB | 32 x $win | $kind | $tps | $miss | $hits | $cpu | $rss | $ratio |"
  done
done
rm -rf "$work/data"
