#!/usr/bin/env bash
# The gateway on the s3 backend against Ceph RGW itself: same objects, same run, release build.
#   bash bench/rgw.sh [duration-seconds] [connections] [rounds]      (defaults 5, 16 and 3)
#   WORKLOADS="get-4k" bash bench/rgw.sh …     a subset of get-1m get-4k put-1m (default all)
#   MEMORY=0 bash bench/rgw.sh …               without the memory run (below)
#   TOLLGATE_CEPH_DIR=DIR bash bench/rgw.sh …  a running cluster of .ci/ceph/cluster.sh (else one is started)
#   SIGN_PAYLOAD=0 bash bench/rgw.sh …         the gateway sends uploads UNSIGNED-PAYLOAD (Storage.SignPayload false)
#   WORKLOADS="put-1m put-1m-md5" bash bench/rgw.sh …   adds PUTs with Content-MD5 (below)
#   SYSCALLS=1 bash bench/rgw.sh …             also counts the gateway's write, writev and read
#                                              system calls per request (perf stat, each gateway run)
#   PROXY=1 bash bench/rgw.sh …                adds a third side: nginx as a plain reverse proxy in
#                                              front of RGW (below)
#   GC_FLUSH=1 bash bench/rgw.sh …             runs RGW's garbage collection to its end before each
#                                              side's run (below)
#
# Workloads (wrk, 2 threads, CONNECTIONS connections, bench/gateway.lua cycling through presigned
# SigV4 targets): GET of 1 MiB objects, GET of 4 KiB objects, PUT of 1 MiB bodies; the opt-in
# put-1m-md5 is put-1m with each body's Content-MD5, which the gateway forwards and the backend
# checks, so the gateway sends those bodies unsigned even with SignPayload on. The objects
# are uploaded once through the gateway, which stores them in RGW; the gateway's targets name
# them in the gateway's bucket, RGW's the same objects in the backend bucket, so both serve the
# same bytes (bench/rgw_load.py). Each round runs every workload against RGW directly, then
# through the gateway; the ratio is the median of the rounds' ratios. Goals: GET 1 MiB >= 0.85,
# PUT 1 MiB >= 0.8, GET 4 KiB >= 0.7 of direct RGW. Each run also reports CPU per request of
# each server (from /proc, user + system): the gateway, radosgw, and the OSD (ceph-osd); all of
# them share the machine's cores with wrk, so the gateway's CPU is taken from RGW's.
# The proxy side (PROXY=1) sends RGW's own presigned requests through nginx (`proxy_pass`, kept
# connections, streaming both ways in buffers of 256 KiB like the gateway's batches, 2 workers):
# what a proxy in C that checks, signs and hashes nothing keeps of RGW on this machine, the
# ceiling of any gateway here. Its ratio has no goal; its CPU is its workers'.
# RGW frees an overwritten object's data in its garbage collection, every minute here, whichever
# side's run that falls in (the PUT workloads overwrite their objects). With GC_FLUSH=1 the script
# runs it (`radosgw-admin gc process --include-all`) before each side's run, so each run pays only
# for its own requests' foreground work, the same for both sides.
# The memory run (MEMORY, default 1): 64 concurrent 100 MiB uploads through the gateway, then 64
# concurrent downloads of them (MEMORY_CONCURRENCY, MEMORY_MIB), printing the gateway's peak RSS
# (VmHWM); goal < 200 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
CONNECTIONS=${2:-16}
ROUNDS=${3:-3}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
if [ "${PROXY:-0}" = 1 ]; then command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; }; fi
if [ "${SYSCALLS:-0}" = 1 ]; then command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null; }; fi
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}
SECRET="bench-root-secret-0123456789abcdefghijklmn"
KEY_ID="TGBENCHROOT"

. bench/lib.sh
export LOG_LEVEL=${LOG_LEVEL:-warning}
bench_scratch rgw
OWN_CLUSTER=""
cleanup_more() {
  if [ -n "$OWN_CLUSTER" ]; then bash .ci/ceph/cluster.sh stop "$OWN_CLUSTER" >/dev/null 2>&1 || true; fi
}
CEPH=${TOLLGATE_CEPH_DIR:-}
if [ -z "$CEPH" ]; then
  CEPH="$WORK/ceph"; OWN_CLUSTER=$CEPH
  bash .ci/ceph/cluster.sh start "$CEPH" >/dev/null
fi
# shellcheck disable=SC1091
. "$CEPH/cluster.env"
PREFIX="b$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')-"
printf '%s' "$RGW_ACCESS_KEY" > "$WORK/rgw-access-key"
printf '%s' "$RGW_SECRET_KEY" > "$WORK/rgw-secret-key"
bench_config "$SECRET" bench "\"Storage\": {\"Backend\": \"s3\", \"Endpoint\": \"$RGW_ENDPOINT\", \"BucketPrefix\": \"$PREFIX\",
 \"AccessKeyIDFile\": \"rgw-access-key\", \"AccessKeySecretFile\": \"rgw-secret-key\", \"BackendMinimumPartSize\": ${RGW_MULTIPART_MIN_PART_SIZE:-1},
 \"SignPayload\": $([ "${SIGN_PAYLOAD:-1}" = 1 ] && echo true || echo false)}"
start_server "$BIN"
GW="http://127.0.0.1:$GPORT"
python3 bench/rgw_load.py prepare "$WORK" "$GW" "$KEY_ID" "$SECRET" "$RGW_ENDPOINT" "$RGW_ACCESS_KEY" "$RGW_SECRET_KEY" "${PREFIX}bench"
SIDES="rgw gateway"
if [ "${PROXY:-0}" = 1 ]; then
  SIDES="rgw gateway proxy"
  NPORT=$(free_port)
  start_nginx 2 "  upstream rgw { server ${RGW_ENDPOINT#http://}; keepalive 64; }
  server {
    listen 127.0.0.1:$NPORT;
    client_max_body_size 0;
    client_body_buffer_size 256k;
    proxy_request_buffering off;
    proxy_buffering off;
    proxy_buffer_size 256k;
    proxy_buffers 4 256k;
    proxy_busy_buffers_size 256k;
    location / {
      proxy_pass http://rgw;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      # RGW's presigned targets are signed for its own host.
      proxy_set_header Host ${RGW_ENDPOINT#http://};
    }
  }"
  for workload in get-1m get-4k put-1m; do cp "$WORK/rgw-$workload.txt" "$WORK/proxy-$workload.txt"; done
fi
# The CPU of the side's own server: the gateway, or nginx's workers.
side_ticks() {
  if [ "$1" = proxy ]; then
    local t=0 worker; for worker in $(pgrep -P "$(cat "$WORK/nginx.pid")"); do t=$((t + $(ticks "$worker"))); done; echo "$t"
  else ticks "$PID"; fi
}

# CPU time (clock ticks, user + system) of a process, and of radosgw and the OSD.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))
run() { # rgw|gateway|proxy workload [PUT bytes] -> "objects/s p99 gateway-or-proxy-µs rgw-µs osd-µs"
  local side=$1 workload=$2; shift 2
  local base=$GW; [ "$side" = rgw ] && base=$RGW_ENDPOINT; [ "$side" = proxy ] && base="http://127.0.0.1:$NPORT"
  local g r o; g=$(side_ticks "$side"); r=$(ticks "$CEPH_RGW_PID"); o=$(ticks "$CEPH_OSD_PID")
  local counting=""
  if [ "${SYSCALLS:-0}" = 1 ] && [ "$side" = gateway ]; then
    perf stat -x, -e syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_read -p "$PID" \
      -o "$WORK/syscalls.txt" -- sleep "$DURATION" &
    counting=$!
  fi
  wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s bench/gateway.lua "$base" -- "$WORK/$side-$workload.txt" "$@" > "$WORK/wrk.txt"
  g=$(( $(side_ticks "$side") - g )); r=$(( $(ticks "$CEPH_RGW_PID") - r )); o=$(( $(ticks "$CEPH_OSD_PID") - o ))
  if grep -q "Non-2xx\|Socket errors" "$WORK/wrk.txt"; then echo "errors for $side $workload:" >&2; cat "$WORK/wrk.txt" >&2; exit 1; fi
  local requests; requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
  if [ -n "$counting" ]; then
    wait "$counting"
    awk -F, -v n="$requests" -v w="$workload" '$3 ~ /sys_enter/ { sub(/.*sys_enter_/, "", $3); line = line sprintf(" %s %.1f", $3, $1 / n) }
      END { print "  gateway system calls per request (" w "):" line }' "$WORK/syscalls.txt" >&2
  fi
  echo "$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt") $(awk '$1=="99%" {print $2}' "$WORK/wrk.txt") $((g * TICK_US / requests)) $((r * TICK_US / requests)) $((o * TICK_US / requests))"
}
for side in $SIDES; do run "$side" get-4k >/dev/null; done   # warm-up (connections, caches)
# put-1m-md5 PUTs to put-1m's targets.
PUT_MD5=$(gateway_lua_md5 1048576)
for side in $SIDES; do cp "$WORK/$side-put-1m.txt" "$WORK/$side-put-1m-md5.txt"; done
echo "rounds $ROUNDS x ${DURATION}s per workload and side, concurrency $CONNECTIONS" >&2
: > "$WORK/results.txt"
for round in $(seq "$ROUNDS"); do
  for workload in ${WORKLOADS:-get-1m get-4k put-1m}; do
    for side in $SIDES; do
      args=(); [ "$workload" = put-1m ] && args=(PUT 1048576)
      [ "$workload" = put-1m-md5 ] && args=(PUT 1048576 "$PUT_MD5")
      if [ "${GC_FLUSH:-0}" = 1 ] && ! radosgw-admin -c "$CEPH_CONF" -n client.rgw gc process --include-all >/dev/null 2>&1; then
        echo "GC_FLUSH: radosgw-admin gc process failed; this run includes RGW's garbage collection" >&2
      fi
      read -r rps p99 g r o < <(run "$side" "$workload" "${args[@]}")
      echo "$round $workload $side $rps $p99 $g $r $o" | tee -a "$WORK/results.txt" >&2
    done
  done
done
echo
python3 - "$WORK/results.txt" "$CONNECTIONS" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
data = {}
for round_, workload, side, rps, p99, gateway, rgw, osd in rows:
    data.setdefault((workload, side), []).append((float(rps), float(gateway), float(rgw), float(osd)))
sizes = {"get-1m": 1.0, "get-4k": 1 / 256, "put-1m": 1.0, "put-1m-md5": 1.0}
print(f"{'workload':<8} {'side':<8} {'objects/s':>10} {'MiB/s':>8} {'CPU µs/request: gateway or proxy':>33} {'radosgw':>8} {'osd':>8}   (medians over rounds)")
for workload in ("get-1m", "get-4k", "put-1m", "put-1m-md5"):
    for side in ("rgw", "gateway", "proxy"):
        if (workload, side) not in data: continue
        values = data[(workload, side)]
        med = lambda i: statistics.median(v[i] for v in values)
        print(f"{workload:<8} {side:<8} {med(0):>10.0f} {med(0) * sizes[workload]:>8.1f} {med(1) if side != 'rgw' else 0:>33.0f} {med(2):>8.0f} {med(3):>8.0f}")
print(f"\nconcurrency {sys.argv[2]}")
goals = {"get-1m": ("GET 1 MiB", 0.85), "get-4k": ("GET 4 KiB", 0.7), "put-1m": ("PUT 1 MiB", 0.8), "put-1m-md5": ("PUT MD5", 0.8)}
for workload, (name, goal) in goals.items():
    if (workload, "gateway") not in data: continue
    ratios = [g[0] / r[0] for g, r in zip(data[(workload, "gateway")], data[(workload, "rgw")])]
    ratio = statistics.median(ratios)
    print(f"ratio gateway/rgw {name:<10} {ratio:6.3f} (goal >= {goal}): {'ok' if ratio >= goal else 'BELOW GOAL'}   rounds: {' '.join(f'{r:.2f}' for r in ratios)}")
for workload, (name, _) in goals.items():
    if (workload, "proxy") not in data: continue
    ratios = [p[0] / r[0] for p, r in zip(data[(workload, "proxy")], data[(workload, "rgw")])]
    print(f"ratio nginx/rgw   {name:<10} {statistics.median(ratios):6.3f} (a plain proxy, no goal)   rounds: {' '.join(f'{r:.2f}' for r in ratios)}")
PY
if [ "${MEMORY:-1}" = 1 ]; then
  CONCURRENCY=${MEMORY_CONCURRENCY:-64}; MIB=${MEMORY_MIB:-100}
  python3 bench/rgw_load.py memory "$GW" "$KEY_ID" "$SECRET" "$CONCURRENCY" "$MIB"
  peak=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$PID/status")
  echo "gateway peak RSS with $CONCURRENCY concurrent $MIB MiB uploads, then downloads: $peak MiB (goal < 200 MiB): $([ "$peak" -lt 200 ] && echo ok || echo 'ABOVE GOAL')"
fi
if grep -qi "error\|fatal" "$WORK/server.log"; then echo "server log:"; grep -i "error\|fatal" "$WORK/server.log" | head -5; fi
