#!/usr/bin/env bash
# Memory over time: `blobcache serve` at its defaults under the reference workload (1 MiB values;
# 10% sets, 45% gets of present keys, 45% of missing ones; through the memcached protocol with
# mcbench), then idle. The server's RSS (/proc) and Go heap in use (its /metrics) are sampled
# every 0.25 s through the load and the idle period, with the write buffers, the index and the
# bloom filter it reports.
#
# Usage: bash bench/scripts/memory_timeline.sh [DATA_DIR] [LOAD_SECONDS] [IDLE_SECONDS] [OUT_PREFIX]
# Writes OUT_PREFIX.csv and OUT_PREFIX.svg (plot_timeline.py). Run from the repository's root.
# SERVE_FLAGS are added to serve's (e.g. "--memory 1G"); VALUE_SIZE and KEYS change the values
# (default 1048576 bytes) and the keys (2048); the memory tier's bytes are sampled too.
set -euo pipefail
data=${1:-/var/tmp/blobcache-memory}
load_s=${2:-60}
idle_s=${3:-60}
out=${4:-memory-timeline}
bin=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$bin"' EXIT

go build -o "$bin/blobcache" ./cmd/blobcache
(cd bench && go build -o "$bin/mcbench" ./cmd/mcbench)
rm -rf "$data"
"$bin/blobcache" serve --dir "$data" --http 127.0.0.1:18090 --memcache 127.0.0.1:18291 ${SERVE_FLAGS:-} >"$bin/serve.out" 2>&1 &
server=$!
for _ in $(seq 50); do grep -q '^serving' "$bin/serve.out" 2>/dev/null && break; sleep 0.1; done

phase=preload
echo "seconds,phase,rss_bytes,heap_inuse_bytes,write_buffer_bytes,index_bytes,bloom_bytes,memory_tier_bytes" >"$out.csv"
sample() {
	local t0 now rss m
	t0=$(date +%s.%N)
	while kill -0 "$server" 2>/dev/null; do
		now=$(date +%s.%N)
		rss=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$server/status" 2>/dev/null || echo 0)
		m=$(curl -s --max-time 1 127.0.0.1:18090/metrics || true)
		metric() { awk -v n="$1" '$1 == n {printf "%.0f", $2}' <<<"$m"; }
		echo "$(echo "$now - $t0" | bc),$(cat "$bin/phase"),$rss,$(metric go_memstats_heap_inuse_bytes),$(metric blobcache_write_buffer_bytes),$(metric blobcache_index_bytes),$(metric blobcache_bloom_bytes),$(metric blobcache_memory_bytes)" >>"$out.csv"
		sleep 0.25
	done
}
echo preload >"$bin/phase"
sample &
sampler=$!
common=(-addr 127.0.0.1:18291 -keys "${KEYS:-2048}" -value-size "${VALUE_SIZE:-1048576}" -conns 8)
"$bin/mcbench" load "${common[@]}" -preload-only >/dev/null
echo load >"$bin/phase"
"$bin/mcbench" load "${common[@]}" -get-ratio 0.9 -miss-ratio 0.5 -duration "${load_s}s" >"$out.load.json"
echo idle >"$bin/phase"
sleep "$idle_s"
kill "$server"
wait "$server" || true
wait "$sampler" || true
python3 "$(dirname "$0")/plot_timeline.py" "$out.csv" "$out.svg"
echo "wrote $out.csv, $out.svg, $out.load.json"
