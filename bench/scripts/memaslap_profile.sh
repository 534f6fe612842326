#!/bin/bash
# memaslap_profile.sh: a CPU profile of one server under memaslap 9:1 get:set in steady state,
# kernel and user stacks (perf record -F 999 -g), as session 25's profiles in docs/BENCHMARKS.md.
#
#   bash bench/scripts/memaslap_profile.sh SERVER OUT.data SIZE [CONNS] [WIN]
#
# SERVER is memcached (-m 4096) or the path of a blobcache binary (serve --memory 4G, or
# $SERVE_FLAGS). The load runs $WARMUP seconds (default 60) unmeasured, then 15 s with perf
# recording the server; memaslap's counts of that window are printed (gets, misses, TPS). Samples
# at 999 Hz are about 1 ms of CPU each: `perf report -i OUT.data -n --no-children --sort symbol
# -g none` divided by the operations gives CPU per operation.
set -u
server=$1 out=$2 size=$3 conns=${4:-32} win=${5:-1k}
port=22122
work=/var/tmp/memaslap-profile
slap=$(command -v memaslap || command -v memcaslap)
rm -rf "$work" && mkdir -p "$work/data"
case $server in
  memcached) memcached -l 127.0.0.1 -p $port -U 0 -m 4096 -I 2m -t 2 -c 4096 -u root & ;;
  *) "$server" serve --dir "$work/data" --memcache 127.0.0.1:$port --http "" --log-level warn \
       ${SERVE_FLAGS:---memory 4G} > "$work/server.log" 2>&1 & ;;
esac
pid=$!
sleep 1
"$slap" -s 127.0.0.1:$port -T 2 -c "$conns" -w "$win" -X "$size" -t "${WARMUP:-60}s" > /dev/null 2>&1
perf record -F 999 -g -p $pid -o "$out" -- sleep 15 > /dev/null 2>&1 &
rec=$!
"$slap" -s 127.0.0.1:$port -T 2 -c "$conns" -w "$win" -X "$size" -t 15s 2>&1 | grep -E "^cmd_get|^get_misses|TPS"
wait $rec
kill $pid
wait $pid 2> /dev/null
