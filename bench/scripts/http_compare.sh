#!/bin/bash
# http_compare.sh: HTTP GET of random stored blobs, blobcache serve against nginx serving the same
# bytes as static files (sendfile on), through the same load generator (wrk, 2 threads, 32
# connections), one server at a time. Prints a line per cell: requests/s and the p99 latency.
#
#   bash bench/scripts/http_compare.sh SIZE KEYS SECONDS [ROUNDS]
#
# blobcache serve runs with $SERVE_FLAGS (e.g. "--memory 4G"); its blobs are PUT once before the
# rounds, nginx's files written once. Each server starts afresh in each round; with WARMUP=N, wrk
# first runs N seconds unmeasured against it (a restarted blobcache serve has an empty memory
# tier). With RANGE=N, each request asks for N bytes at a random offset of its blob (a Range
# header). With DELAY_MS=N, each connection waits N ms after each answer before its next request
# (wrk's delay()): the load then runs below both servers' capacity, about 32 / (N ms + the
# latency) requests a second, the same offered load for both, so that their latencies compare
# at the same load rather than each at its own saturation. With MCBENCH naming an mcbench binary
# (`cd bench && go build ./cmd/mcbench`), each round also runs `mcbench httpnull`, a net/http
# server that stores nothing and answers every GET with SIZE fixed bytes: what the Go runtime and
# net/http cost, apart from the cache. With CGROUP_MEM (e.g. 800M), each server runs in a memory
# cgroup of that limit, which the page cache it fills counts against as well as its own memory
# (as memaslap_cell.sh's): with more data than that, both read from the device. Needs nginx
# (Debian nginx-light) and wrk.
set -euo pipefail
size=$1 keys=$2 secs=$3 rounds=${4:-3}
work=${WORK:-/var/tmp/httpcmp}
root=$(cd "$(dirname "$0")/../.." && pwd)
bcport=22280 ngport=22281 nullport=22282
rm -rf "$work" && mkdir -p "$work/files" "$work/data" "$work/nginx"
(cd "$root" && go build -o "$work/blobcache" ./cmd/blobcache)
python3 - "$work/files" "$keys" "$size" <<'PY'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    with open(os.path.join(d, f"key-{i}"), "wb") as f:
        f.write(os.urandom(size))
PY
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$ngport; root $work/files; }
}
CONF
lua() { # path prefix -> a wrk script asking for random keys under it (RANGE bytes of each)
  lua_request "$1"
  if [ -n "${DELAY_MS:-}" ]; then
    echo "delay = function() return $DELAY_MS end" >> "$work/get.lua"
  fi
}
lua_request() {
  if [ -n "${RANGE:-}" ]; then
    cat > "$work/get.lua" <<LUA
math.randomseed(os.time())
request = function()
  local off = math.random(0, $size - $RANGE)
  return wrk.format("GET", "$1" .. math.random(0, $keys - 1), {Range = "bytes=" .. off .. "-" .. (off + $RANGE - 1)})
end
LUA
    return
  fi
  cat > "$work/get.lua" <<LUA
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "$1" .. math.random(0, $keys - 1))
end
LUA
}
confined() { # command...: runs it in the memory cgroup of CGROUP_MEM, if set
  if [ -n "${CGROUP_MEM:-}" ]; then
    local cg=/sys/fs/cgroup/http-compare
    [ -d /sys/fs/cgroup/memory ] && cg=/sys/fs/cgroup/memory/http-compare
    mkdir -p $cg
    if [ -f $cg/memory.max ]; then echo "$(numfmt --from=iec "$CGROUP_MEM")" > $cg/memory.max
    else echo "$(numfmt --from=iec "$CGROUP_MEM")" > $cg/memory.limit_in_bytes; fi
    echo $BASHPID > $cg/cgroup.procs
  fi
  exec "$@"
}
start_blobcache() { # [flags, default $SERVE_FLAGS]
  (confined "$work/blobcache" serve --dir "$work/data" --http 127.0.0.1:$bcport --memcache "" --log-level warn ${1-${SERVE_FLAGS:-}}) >> "$work/serve.log" 2>&1 &
  bcpid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$bcport/healthz" > /dev/null && return; sleep 0.1; done
  echo "blobcache did not start" >&2; exit 1
}
# Load blobcache once, over one keep-alive connection.
CGROUP_MEM= start_blobcache
python3 - "$work/files" "$keys" "$bcport" <<'PY'
import http.client, os, sys
d, n, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port)
for i in range(n):
    with open(os.path.join(d, f"key-{i}"), "rb") as f:
        body = f.read()
    c.request("PUT", f"/v1/blobs/key-{i}", body)
    r = c.getresponse(); r.read()
    if r.status >= 300:
        sys.exit(f"PUT key-{i}: {r.status}")
PY
kill $bcpid; wait $bcpid 2> /dev/null || true
drop() {
  if [ -n "${DROP:-}" ]; then sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1; fi
}
run() { # name base-url path-prefix
  lua "$3"
  if [ "${WARMUP:-0}" -gt 0 ]; then
    wrk -t 2 -c 32 -d "${WARMUP}s" -s "$work/get.lua" "$2" > /dev/null 2>&1
  fi
  out=$(wrk -t 2 -c 32 -d "${secs}s" --latency -s "$work/get.lua" "$2" 2>&1)
  rps=$(echo "$out" | awk '/^Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  errs=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  echo "$1 size=$size keys=$keys req/s=$rps p99=$p99 non2xx=${errs:-0}"
}
for r in $(seq "$rounds"); do
  drop
  start_blobcache
  run blobcache "http://127.0.0.1:$bcport" /v1/blobs/key-
  kill $bcpid; wait $bcpid 2> /dev/null || true
  if [ -n "${SERVE_FLAGS_B:-}" ]; then
    drop
    start_blobcache "$SERVE_FLAGS_B"
    run blobcache-b "http://127.0.0.1:$bcport" /v1/blobs/key-
    kill $bcpid; wait $bcpid 2> /dev/null || true
  fi
  drop
  (confined nginx -c "$work/nginx/nginx.conf")
  sleep 0.3
  run nginx "http://127.0.0.1:$ngport" /key-
  kill "$(cat "$work/nginx/nginx.pid")"; sleep 0.3
  if [ -n "${MCBENCH:-}" ]; then
    "$MCBENCH" httpnull -addr 127.0.0.1:$nullport -value-size "$size" &
    nullpid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$nullport/key-0" > /dev/null && break; sleep 0.1; done
    run httpnull "http://127.0.0.1:$nullport" /key-
    kill $nullpid; wait $nullpid 2> /dev/null || true
  fi
done
