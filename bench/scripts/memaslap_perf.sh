#!/bin/bash
# memaslap_perf.sh: where a server's CPU goes under memaslap 9:1 get:set (2 threads, 32
# connections): the server started fresh, $WARM seconds of load (default 5), then `perf record`
# of the server's process for SECONDS-2 seconds while the load goes on.
#
#   bash bench/scripts/memaslap_perf.sh SERVER SIZE SECONDS OUT [switches]
#
# SERVER is memcached (-m 4096), null (`mcbench null`, a server that stores nothing; $MCBENCH names
# the binary) or the path of a blobcache binary (serve --memory 4G, or $SERVE_FLAGS). OUT is the
# perf.data written; memaslap's output goes to OUT.slap. With "switches", it records the
# scheduler's context switches across the machine (sched:sched_switch -a, 3 s) instead of the
# server's CPU samples (-g -F 999). Read with `perf report -i OUT --no-children --sort sym`, or
# `--sort comm` for the switches. Needs perf, memcached and memaslap (memcaslap).
set -euo pipefail
server=$1 size=$2 secs=$3 out=$4 mode=${5:-cpu}
work=${WORK:-/var/tmp/memaslap-perf}; port=22122
slap=$(command -v memaslap || command -v memcaslap)
rm -rf "$work" && mkdir -p "$work/data"
case $server in
  memcached) memcached -l 127.0.0.1 -p $port -U 0 -m 4096 -I 2m -t 2 -c 4096 -u root & ;;
  null) "${MCBENCH:-mcbench}" null -addr 127.0.0.1:$port -value-size "$size" & ;;
  *) "$server" serve --dir "$work/data" --memcache 127.0.0.1:$port --http "" --log-level warn \
       ${SERVE_FLAGS:---memory 4G} >> "$work/log" 2>&1 & ;;
esac
pid=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
win=10k; [ "$size" -gt 16384 ] && win=1k
"$slap" -s 127.0.0.1:$port -T 2 -c 32 -w $win -X "$size" -t "${WARM:-5}s" > /dev/null 2>&1
"$slap" -s 127.0.0.1:$port -T 2 -c 32 -w $win -X "$size" -t "${secs}s" > "$out.slap" 2>&1 &
sp=$!
sleep 1
if [ "$mode" = switches ]; then
  perf record -e sched:sched_switch -a -o "$out" -- sleep 3 2> /dev/null
else
  perf record -F 999 -g -p $pid -o "$out" -- sleep $((secs - 2)) 2> /dev/null
fi
wait $sp
kill $pid; wait $pid 2> /dev/null || true
grep TPS "$out.slap" | tail -1
