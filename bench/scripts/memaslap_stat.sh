#!/bin/bash
# memaslap_stat.sh: system calls, context switches and CPU per request of a server under
# memaslap 9:1 get:set (2 threads, 32 connections), from `perf stat` of the server's process.
#
#   bash bench/scripts/memaslap_stat.sh SERVER SIZE
#
# SERVER is memcached (-m 4096), null (`mcbench null`, a server that stores nothing; $MCBENCH
# names the binary) or the path of a blobcache binary (serve --memory 4G, plus $SERVE_FLAGS).
# The server starts fresh, takes 3 s of load, then `perf stat -e raw_syscalls:sys_enter,
# context-switches,task-clock` counts 6 s of an 8 s run. Prints one line: the server, memaslap's
# TPS, and per request the system calls, context switches and microseconds of CPU. $WIN sets
# memaslap's key window a connection (default 10k). Needs perf, memcached and memaslap.
set -euo pipefail
server=$1 size=$2
work=${WORK:-/var/tmp/memaslap-stat}; port=22122
slap=$(command -v memaslap || command -v memcaslap)
rm -rf "$work" && mkdir -p "$work/data"
case $server in
  memcached) memcached -l 127.0.0.1 -p $port -U 0 -m 4096 -I 2m -t 2 -c 4096 -u root & ;;
  null) "${MCBENCH:-mcbench}" null -addr 127.0.0.1:$port -value-size "$size" & ;;
  *) "$server" serve --dir "$work/data" --memcache 127.0.0.1:$port --http "" --log-level warn \
       --memory 4G ${SERVE_FLAGS:-} >> "$work/log" 2>&1 & ;;
esac
pid=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
"$slap" -s 127.0.0.1:$port -T 2 -c 32 -w "${WIN:-10k}" -X "$size" -t 3s > /dev/null 2>&1
"$slap" -s 127.0.0.1:$port -T 2 -c 32 -w "${WIN:-10k}" -X "$size" -t 8s > "$work/slap" 2>&1 &
sp=$!
sleep 1
perf stat -e raw_syscalls:sys_enter,context-switches,task-clock -p $pid -o "$work/stat" -- sleep 6
wait $sp
kill $pid
wait $pid 2> /dev/null || true
tps=$(awk '/^Run time/ {for (i = 1; i <= NF; i++) if ($i == "TPS:") print $(i + 1)}' "$work/slap" | tail -1)
awk -v tps="$tps" -v s="$(basename "$server")" '
  /raw_syscalls/ {sc = $1} /context-switches/ {cs = $1} /task-clock/ {tc = $1}
  END {gsub(",", "", sc); gsub(",", "", cs); gsub(",", "", tc); n = tps * 6
       printf "%s tps=%d syscalls/req=%.2f cs/req=%.3f cpu_us/req=%.2f\n", s, tps, sc / n, cs / n, tc * 1000 / n}' "$work/stat"
