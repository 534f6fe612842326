#!/bin/bash
# memaslap_perfstat.sh: the system calls and context switches per request of one server under
# memaslap 9:1 get:set (2 threads, 32 connections), counted by perf stat on the server's process.
#
#   bash bench/scripts/memaslap_perfstat.sh KIND SIZE SECONDS
#
# KIND: memcached (-m 4096), new (blobcache serve --memory 4G, from $work/blobcache-new), null
# (mcbench null, from $work/mcbench). Needs memcached, memaslap (memcaslap) and perf.
set -u
work=${WORK:-/var/tmp/mc}; port=22122; kind=$1; size=$2; secs=$3
rm -rf $work/data && mkdir -p $work/data
case $kind in
  memcached) memcached -l 127.0.0.1 -p $port -U 0 -m 4096 -I 2m -t 2 -c 4096 -u root & ;;
  new) $work/blobcache-new serve --dir $work/data --memcache 127.0.0.1:$port --http "" --log-level warn --memory 4G >> $work/server.log 2>&1 & ;;
  null) $work/mcbench null -addr 127.0.0.1:$port -value-size $size > /dev/null 2>&1 & ;;
esac
pid=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
win=10k; [ $size -gt 16384 ] && win=1k
perf stat -e raw_syscalls:sys_enter,context-switches -p $pid -x, -o /tmp/perfstat.$kind -- sleep $secs &
ps=$!
out=$(memcaslap -s 127.0.0.1:$port -T 2 -c 32 -w $win -X $size -t ${secs}s 2>&1)
wait $ps
kill $pid; wait $pid 2>/dev/null
ops=$(echo "$out" | awk '/^Run time/ {for (i=1;i<=NF;i++) if ($i=="Ops:") print $(i+1)}' | tail -1)
sc=$(awk -F, '/raw_syscalls/ {print $1}' /tmp/perfstat.$kind); cs=$(awk -F, '/context-switches/ {print $1}' /tmp/perfstat.$kind)
echo "$kind size=$size ops=$ops syscalls/op=$(echo "scale=2; $sc/$ops" | bc) ctxsw/op=$(echo "scale=3; $cs/$ops" | bc)"
