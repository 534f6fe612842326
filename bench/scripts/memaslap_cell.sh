#!/bin/bash
# memaslap_cell.sh: one memaslap cell against one server, started fresh on an empty directory
# and stopped after. Prints one line: the server, the value size, memaslap's TPS, the hits per
# second (gets less get_misses, over the run), the misses, the server's CPU ticks, its CPU
# microseconds per memaslap operation (us/op), its peak RSS; memaslap's own CPU microseconds per
# operation (slap_us/op), the machine's idle seconds during the load (idle, all CPUs; 100 ticks a
# second assumed), and the server's voluntary and involuntary context switches per operation
# (vcs/op, ics/op: its threads' counts, from /proc).
#
#   bash bench/scripts/memaslap_cell.sh SERVER SIZE SECONDS
#
# For a blobcache server the line ends with the disk bound it chose (bound=): the directory is new
# each run, so the bound is a share of what the file system has free then.
#
# SERVER is memcached (-m 4096, everything in RAM), null (`mcbench null`, a server that stores
# nothing and answers every get with one value of SIZE bytes; $MCBENCH names the binary), ext (memcached -m $EXT_MEM, default 800, with
# extstore on the work directory), or the path of a blobcache binary, run as `serve` with $SERVE_FLAGS (default
# "--memory 4G"). The load: memaslap's 9:1 get:set, 2 threads, $CONNS connections (default 32),
# a key window of $WIN keys a connection (default 10k, 1k past 16 KiB), values of SIZE bytes.
# Alternate servers by calling it in turn; the session-14 and -15 memaslap cells of
# docs/BENCHMARKS.md ("Values from memory to the socket by reference") were run this way.
#
# With METRICS set, a blobcache server also serves HTTP on 127.0.0.1:22190, and the line adds
# what its /metrics say after the load: the blobs it holds, the memory tier's values, and the gets
# the tier answered and did not.
#
# SLAP_ARGS adds memaslap options to both loads, e.g. "-d 10" for gets of 10 keys at once.
#
# With WARMUP=N, the same load first runs N seconds unmeasured, so that the measured part finds
# the servers' memory filled (the fill's page faults are outside it).
#
# With CGROUP_MEM (e.g. 800M), the server runs in a memory cgroup of its own with that limit,
# which the page cache it fills counts against as well as its own memory: "the same RAM" for a
# server that keeps values on disk, whatever the machine's RAM. Needs root and the memory
# controller (cgroup v1 at /sys/fs/cgroup/memory, or v2). The line then also reports the
# device bytes read during the load (from /proc/diskstats, all devices).
set -euo pipefail
server=$1 size=$2 secs=$3
work=${WORK:-/var/tmp/memaslap-cell}
port=22122
slap=$(command -v memaslap || command -v memcaslap)
rm -rf "$work/data" && mkdir -p "$work/data"
case $server in
  memcached) memcached -l 127.0.0.1 -p $port -U 0 -m 4096 -I 2m -t 2 -c 4096 -u root & ;;
  null) "${MCBENCH:-mcbench}" null -addr 127.0.0.1:$port -value-size "$size" & ;;
  ext) memcached -l 127.0.0.1 -p $port -U 0 -m ${EXT_MEM:-800} -I 2m -t 2 -c 4096 -u root \
         -o "ext_path=$work/data/extstore:16G,ext_threads=2" & ;;
  *) "$server" serve --dir "$work/data" --memcache 127.0.0.1:$port --http "${METRICS:+127.0.0.1:22190}" --log-level warn \
       ${SERVE_FLAGS:---memory 4G} >> "$work/server.log" 2>&1 & ;;
esac
pid=$!
if [ -n "${CGROUP_MEM:-}" ]; then
  bytes=$(numfmt --from=iec "$CGROUP_MEM")
  if [ -d /sys/fs/cgroup/memory ]; then
    cg=/sys/fs/cgroup/memory/memaslap-cell
    rmdir $cg 2> /dev/null || true
    mkdir -p $cg && echo $bytes > $cg/memory.limit_in_bytes
    echo $pid > $cg/cgroup.procs
  else
    cg=/sys/fs/cgroup/memaslap-cell
    rmdir $cg 2> /dev/null || true
    mkdir -p $cg && echo $bytes > $cg/memory.max
    echo $pid > $cg/cgroup.procs
  fi
fi
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
win=10k
[ "$size" -gt 16384 ] && win=1k
win=${WIN:-$win}
if [ "${WARMUP:-0}" -gt 0 ]; then
  "$slap" -s 127.0.0.1:$port -T 2 -c "${CONNS:-32}" -w "$win" -X "$size" ${SLAP_ARGS:-} -t "${WARMUP}s" > /dev/null 2>&1
fi
c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
# The machine's idle ticks, and the server's voluntary and involuntary context switches (all its
# threads): beside the server's CPU, what the cell costs the load generator and the scheduler.
idle() { awk '/^cpu / {print $5 + $6}' /proc/stat; }
switches() { cat /proc/$pid/task/*/status 2> /dev/null | awk '/^voluntary_ctxt/ {v += $2} /^nonvoluntary_ctxt/ {n += $2} END {print v + 0, n + 0}'; }
i0=$(idle)
read -r v0 n0 < <(switches)
# read_bytes: the bytes read from whole disks so far (/proc/diskstats, sectors of 512 bytes).
read_bytes() { awk '$3 !~ /[0-9]$/ || $3 ~ /^nvme[0-9]+n[0-9]+$/ {s += $6} END {printf "%.0f\n", s * 512}' /proc/diskstats; }
r0=$(read_bytes)
# memaslap's own CPU (user and system seconds, bash's time keyword).
slapcpu=$(mktemp)
out=$( { TIMEFORMAT='%U %S'; time "$slap" -s 127.0.0.1:$port -T 2 -c "${CONNS:-32}" -w "$win" -X "$size" ${SLAP_ARGS:-} -t "${secs}s" 2>&1; } 2> "$slapcpu")
c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
i1=$(idle)
read -r v1 n1 < <(switches)
r1=$(read_bytes)
rss=$(awk '/VmHWM/ {print int($2 / 1024)}' /proc/$pid/status)
tier=""
if [ -n "${METRICS:-}" ] && [ "$server" != memcached ] && [ "$server" != ext ]; then
  # What the cache held and where its gets went, from the server's /metrics after the load.
  tier=$(curl -s 127.0.0.1:22190/metrics | awk '$1 ~ /^blobcache_(blobs|memory_items|memory_hits_total|memory_misses_total)$/ {
    sub(/^blobcache_/, "", $1); printf " %s=%.0f", $1, $2 }')
fi
kill $pid
wait $pid 2> /dev/null || true
case $server in
  memcached|null|ext) ;;
  # The disk bound the server chose for its new directory (MaxSizeAuto): a file system near full
  # gives a small one, and the cell then measures eviction and reinsertion as well.
  *) tier="$tier bound=$(grep -o 'disk bound [0-9.]* [KMGT]iB' "$work/server.log" | tail -1 | awk '{print $3 $4}')" ;;
esac
tps=$(echo "$out" | awk '/^Run time/ {for (i = 1; i <= NF; i++) if ($i == "TPS:") print $(i + 1)}' | tail -1)
gets=$(echo "$out" | awk '/^cmd_get:/ {v = $2} END {print v + 0}')
missed=$(echo "$out" | awk '/^get_misses:/ {v = $2} END {print v + 0}')
ops=$(echo "$out" | awk '/^Run time/ {for (i = 1; i <= NF; i++) if ($i == "Ops:") v = $(i + 1)} END {print v + 0}')
usop=$(awk -v t=$((c1 - c0)) -v n="$ops" 'BEGIN {if (n > 0) printf "%.1f", t * 10000 / n}')
# memaslap's CPU per operation, the machine's idle seconds (all CPUs), the server's switches per
# operation.
side=$(awk -v n="$ops" -v di=$((i1 - i0)) -v dv=$((v1 - v0)) -v dn=$((n1 - n0)) '
  NR == 1 && n > 0 {printf " slap_us/op=%.1f idle=%.1fs vcs/op=%.3f ics/op=%.3f", ($1 + $2) * 1e6 / n, di / 100, dv / n, dn / n}' "$slapcpu")
rm -f "$slapcpu"
echo "$(basename "$server") size=$size tps=$tps hits/s=$(((gets - missed) / secs)) missed=$missed/$gets cpu=$((c1 - c0))ticks us/op=$usop rss=${rss}MiB read=$(((r1 - r0) >> 20))MiB$side$tier"
