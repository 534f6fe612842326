#!/bin/bash
# http_loop_compare.sh: one round of HTTP GETs of 4 KiB values against `mcbench httploop` (a
# server that stores nothing, on event loops of its own), nginx and blobcache serve (`--memory
# 4G`), one at a time, each after 5 s of the same load: wrk -t 2 -c 32, 15 s, --latency. Prints
# a line per server: requests/s, p50, p99.
#
#   bash bench/scripts/http_loop_compare.sh MCBENCH
#
# It uses the work directory a run of `http_compare.sh 4096 16384 ...` leaves (its nginx files and
# config, its blobcache binary and data with the blobs PUT): run that once first. With DELAY_MS=N,
# each connection waits N ms after each answer (the same offered load for all three); without,
# each server runs at its saturation. With PERF set, `perf stat` counts each server's process
# for 5 s of the run, and the line adds system calls, context switches and CPU µs a request (the
# syscall tracepoint slows every call: do not compare those rounds' latencies).
set -u
mcbench=$1
work=${WORK:-/var/tmp/httpcmp}
keys=16384
lua() { # path prefix -> wrk script
  { echo 'math.randomseed(os.time())'
    echo 'request = function()'
    echo "  return wrk.format(\"GET\", \"$1\" .. math.random(0, $keys - 1))"
    echo 'end'
    [ -n "${DELAY_MS:-}" ] && echo "delay = function() return $DELAY_MS end"
  } > "$work/loop-$2.lua"
  echo "$work/loop-$2.lua"
}
run() { # name url script pids
  wrk -t 2 -c 32 -d 5s -s "$3" "$2" > /dev/null 2>&1
  wrk -t 2 -c 32 -d 15s --latency -s "$3" "$2" > "$work/loop-wrk.txt" 2>&1 &
  local wp=$! extra=""
  sleep 3
  if [ -n "${PERF:-}" ]; then
    local st
    st=$(perf stat -x, -e context-switches,raw_syscalls:sys_enter,task-clock -p "$4" -- sleep 5 2>&1)
    extra=$(echo "$st" | awk -F, '/context-switches/ {cs=$1} /sys_enter/ {sc=$1} /task-clock/ {tc=$1} END {print cs, sc, tc}')
  fi
  wait $wp
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$work/loop-wrk.txt")
  p50=$(awk '/ 50%/ {print $2}' "$work/loop-wrk.txt")
  p99=$(awk '/ 99%/ {print $2}' "$work/loop-wrk.txt")
  if [ -n "$extra" ]; then
    set -- $1 $extra
    python3 -c "r=$rps; print('%-10s req/s %8.0f p50 %s p99 %s syscalls/req %.2f switches/req %.2f cpu_us/req %.1f' % ('$1', r, '$p50', '$p99', $3/5/r, $2/5/r, $4*1000/5/r))"
  else
    printf '%-10s req/s %8.0f p50 %s p99 %s\n' "$1" "$rps" "$p50" "$p99"
  fi
}
"$mcbench" httploop -addr 127.0.0.1:22283 -value-size 4096 & lp=$!
sleep 0.5
run httploop http://127.0.0.1:22283 "$(lua /key- ng)" $lp
kill $lp; wait $lp 2> /dev/null
nginx -c "$work/nginx/nginx.conf"; sleep 0.5
run nginx http://127.0.0.1:22281 "$(lua /key- ng)" "$(pgrep -f 'nginx: worker' | paste -sd,)"
kill "$(cat "$work/nginx/nginx.pid")"; sleep 0.5
"$work/blobcache" serve --dir "$work/data" --http 127.0.0.1:22280 --memcache "" --log-level warn --memory 4G > /dev/null 2>&1 & bp=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:22280/healthz" > /dev/null && break; sleep 0.1; done
run blobcache http://127.0.0.1:22280 "$(lua /v1/blobs/key- bc)" $bp
kill $bp; wait $bp 2> /dev/null
