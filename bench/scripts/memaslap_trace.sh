#!/bin/bash
# memaslap_trace.sh: where a blobcache server's goroutines wait for a P under memaslap. Takes a
# 2 s Go execution trace of the server (its /debug/pprof/trace) during memaslap's 9:1 get:set
# load and prints the total scheduler latency (time goroutines were runnable and not running,
# `go tool trace -pprof=sched`) and the six stacks with the most, as session 28's figures in
# docs/BENCHMARKS.md.
#
#   bash bench/scripts/memaslap_trace.sh SERVER OUT.trace [SIZE [memaslap options...]]
#
# SERVER is the path of a blobcache binary, run as `serve --memory 4G --pprof` on a fresh
# directory; SIZE the value size (default 4096); further arguments go to memaslap (e.g. -d 10
# for gets of 10 keys). The load runs 5 s before the trace and 4 s in all.
set -u
server=$1 out=$2 size=${3:-4096}
shift $(($# < 3 ? $# : 3))
work=/var/tmp/memaslap-trace
slap=$(command -v memaslap || command -v memcaslap)
rm -rf "$work" && mkdir -p "$work/data"
"$server" serve --dir "$work/data" --memcache 127.0.0.1:22122 --http 127.0.0.1:22190 --pprof \
  --log-level warn --memory 4G > "$work/server.log" 2>&1 &
pid=$!
sleep 1
"$slap" -s 127.0.0.1:22122 -T 2 -c 32 -w 10k -X "$size" "$@" -t 5s > /dev/null 2>&1
curl -s "127.0.0.1:22190/debug/pprof/trace?seconds=2" -o "$out" &
curlpid=$!
"$slap" -s 127.0.0.1:22122 -T 2 -c 32 -w 10k -X "$size" "$@" -t 4s 2>&1 | grep TPS
wait $curlpid
kill $pid
wait $pid 2> /dev/null
go tool trace -pprof=sched "$out" > "$out.sched" 2> /dev/null
go tool pprof -traces "$out.sched" 2> /dev/null | python3 -c '
import re, sys
rows = []
for blk in sys.stdin.read().split("-" * 11 + "+" + "-" * 55)[1:]:
    lines = [l for l in blk.strip("\n").split("\n") if l.strip()]
    m = lines and re.match(r"\s*([\d.]+)(ns|us|ms|s)\s+(.*)", lines[0])
    if m:
        v = float(m.group(1)) * {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
        rows.append((v, [m.group(3)] + [l.strip() for l in lines[1:]]))
rows.sort(key=lambda r: -r[0])
print("scheduler latency, all goroutines: %.1f ms" % (sum(r[0] for r in rows) / 1000))
for v, f in rows[:6]:
    print("%8.1f ms  %s" % (v / 1000, " < ".join(x.split("/")[-1] for x in f[:5])))
'
