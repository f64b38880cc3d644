#!/usr/bin/env bash
# Object gateway throughput against nginx, same run, same disk, same requests, release build.
#   bash bench/gateway.sh [duration-seconds] [connections] [rounds]      (defaults 5, 16 and 5)
#   WORKLOADS="get-4k" bash bench/gateway.sh …    (a subset of get-1m get-4k put-1m; default all)
#   WORKLOADS="get-4k floor-4k nio-4k" bash bench/gateway.sh …    adds the floors (below)
#   WORKLOADS="put-1m put-1m-md5" bash bench/gateway.sh …    adds PUTs with Content-MD5 (below)
#
# Workloads (wrk, 2 threads, CONNECTIONS connections, bench/gateway.lua cycling through a list
# of request targets): GET of 1 MiB objects, GET of 4 KiB objects, PUT of 1 MiB bodies.
# The gateway requests are SigV4-presigned by boto3 with the root credentials
# (bench/gateway_load.py); nginx gets the very same request lines (it ignores the query) and
# serves the same bytes from files in the same temporary directory; it takes PUT through its
# DAV module (`dav_methods PUT`). The opt-in floor-4k workload sends the 4 KiB GETs without
# their query: the gateway refuses each (403, S3 XML) before any signature or store work, so its
# rate is about the most this HTTP stack and admission answer a small request with, beside
# nginx's 200s for the same lines; it has no goal. The opt-in nio-4k workload sends the same lines
# as get-4k to bench/NIOFloor instead of the gateway: SwiftNIO's HTTP/1 server answering each with
# 4 KiB from memory and nothing else, what the gateway's HTTP stack costs before any of its own
# work (no goal). The opt-in put-1m-md5 workload is put-1m with each body's Content-MD5, as the
# Java and JavaScript SDKs and rclone send it (no goal): nginx ignores it; the gateway checks it
# against the MD5 it computes for the ETag. Prints objects/s, MiB/s, p99 latency and the ratio
# gateway/nginx. Each round runs every workload against nginx and then the gateway; the ratio
# reported is the median of the rounds' ratios, since this kind of shared 2-core machine drifts
# by 20% or more from one minute to the next. Goals: GET 1 MiB >= 0.9, GET 4 KiB >= 0.7,
# PUT 1 MiB >= 0.6. The gateway fsyncs every object and commits it in SQLite; nginx's DAV PUT
# only renames a temporary file. So each round also measures the disk's ceiling for durable
# 1 MiB writes (bench/disk_ceiling.py: the store's write, fsync, rename and directory fsync,
# CONNECTIONS writers, nothing else) and reports PUT against it too: no PUT that fsyncs can beat it.
# Each run also reports the server's CPU time per request (user + system of the gateway process,
# or of nginx's workers, from /proc), which drifts far less than throughput on a shared machine:
# compare two builds with it. The summary also gives its system part: the kernel's work for the
# server (sendfile, TCP, and the loopback delivery to wrk that runs inside the server's sends).
#   BASELINE_BIN=path/to/older/tollgate bash bench/gateway.sh …    compares two builds in one run:
# each round then also runs every workload against the baseline build (the server is restarted
# on the same data and port, and warmed up, before each build's turn; the builds take turns
# going first), and the summary adds gateway/baseline per workload. The drift between separate
# runs is larger than most changes.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
CONNECTIONS=${2:-16}
ROUNDS=${3:-5}
for tool in wrk nginx; do
  command -v $tool >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null; }
done
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}
SECRET="bench-root-secret-0123456789abcdefghijklmn"
KEY_ID="TGBENCHROOT"

. bench/lib.sh
export LOG_LEVEL=${LOG_LEVEL:-warning}
bench_scratch bench
FPID=""
cleanup_more() {
  if [ -n "$FPID" ]; then kill "$FPID" 2>/dev/null || true; wait "$FPID" 2>/dev/null || true; fi
}
bench_config "$SECRET" bench   # KEY_ID as above
NPORT=$(free_port)
start_server "$BIN"

# nginx: files under $WORK (the same disk).
mkdir -p "$WORK/nginx-root"
start_nginx auto "  sendfile on;
  tcp_nopush on;
  keepalive_timeout 75s;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$NPORT;
    root $WORK/nginx-root;
    location / {
      dav_methods PUT;
      create_full_put_path on;
      client_max_body_size 4m;
      client_body_buffer_size 2m;
    }
  }"

python3 bench/gateway_load.py prepare "$WORK" "http://127.0.0.1:$GPORT" "http://127.0.0.1:$NPORT" "$KEY_ID" "$SECRET"
sed 's/?.*//' "$WORK/get-4k.txt" > "$WORK/floor-4k.txt"   # unsigned: refused by the gateway
cp "$WORK/get-4k.txt" "$WORK/nio-4k.txt"                     # the same lines, to bench/NIOFloor
case " ${WORKLOADS:-} " in *" nio-4k "*)
  swift build -c release --static-swift-stdlib --product NIOFloor >&2
  FPORT=$(free_port)
  "$(swift build -c release --static-swift-stdlib --show-bin-path)/NIOFloor" "$FPORT" & FPID=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$FPORT/" && break; sleep 0.1; done
  curl -sf -o /dev/null "http://127.0.0.1:$FPORT/" || { echo "NIOFloor did not come up" >&2; exit 1; } ;;
esac
# How many page-cache folios sendfile walks for one 1 MiB object (bench/folios.py; root only).
echo "page-cache folios of a 1 MiB object: gateway $(python3 bench/folios.py "$(find "$WORK/data" -type f -size 1048576c | head -1)" | awk '{print $2}'), nginx $(python3 bench/folios.py "$WORK/nginx-root/bench/get-1m/obj-0000" | awk '{print $2}')" >&2

# CPU time (clock ticks) of the server's processes: the gateway, nginx's workers, or
# bench/NIOFloor; user + system, or system alone with `system`.
cpu_ticks() { # gateway|nginx|nio [system]
  local pids=$PID
  [ "$1" = nginx ] && pids=$(pgrep -P "$(cat "$WORK/nginx.pid")")
  [ "$1" = nio ] && pids=$FPID
  local fields='$14 + $15'; [ "${2:-}" = system ] && fields='$15'
  local total=0
  for p in $pids; do total=$((total + $(awk "{print $fields}" "/proc/$p/stat"))); done
  echo $total
}
TICK_US=$((1000000 / $(getconf CLK_TCK)))

run() { # gateway|nginx|nio targets-file [PUT bytes] -> "objects/s p99 server-cpu-µs-per-request system-µs"
  local server=$1; shift
  local base=$NG; [ "$server" = gateway ] && base=$GW; [ "$server" = nio ] && base="http://127.0.0.1:$FPORT"
  local before system; before=$(cpu_ticks "$server"); system=$(cpu_ticks "$server" system)
  wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s bench/gateway.lua "$base" -- "$@" > "$WORK/wrk.txt"
  local ticks=$(( $(cpu_ticks "$server") - before )); system=$(( $(cpu_ticks "$server" system) - system ))
  local refused="Non-2xx\\|"; [ "$server-$(basename "$1")" = gateway-floor-4k.txt ] && refused=""
  if grep -q "${refused}Socket errors" "$WORK/wrk.txt"; then
    echo "errors for $base $*:" >&2; cat "$WORK/wrk.txt" >&2; exit 1
  fi
  local requests; requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
  echo "$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt") $(awk '$1=="99%" {print $2}' "$WORK/wrk.txt") $((ticks * TICK_US / requests)) $((system * TICK_US / requests))"
}

GW="http://127.0.0.1:$GPORT"; NG="http://127.0.0.1:$NPORT"
PUT_MD5=$(gateway_lua_md5 1048576)
run gateway "$WORK/get-4k.txt" >/dev/null   # warm-up (page cache, connections)
run nginx "$WORK/get-4k.txt" >/dev/null
RUNNING=$BIN
use() { # binary: the gateway runs this build (restarted and warmed up when it changes)
  [ "$RUNNING" = "$1" ] && return
  start_server "$1"; RUNNING=$1
  wrk -t2 -c"$CONNECTIONS" -d1s -s bench/gateway.lua "$GW" -- "$WORK/get-4k.txt" >/dev/null
}
echo "rounds $ROUNDS x ${DURATION}s per workload and server, concurrency $CONNECTIONS" >&2
: > "$WORK/results.txt"
for round in $(seq "$ROUNDS"); do
  # With a baseline, the two builds take turns going first (a PUT finds the directories the
  # build before it made).
  SERVERS="nginx gateway"
  [ -n "${BASELINE_BIN:-}" ] && { [ $((round % 2)) = 1 ] && SERVERS="nginx baseline gateway" || SERVERS="nginx gateway baseline"; }
  for workload in ${WORKLOADS:-get-1m get-4k put-1m}; do
    servers=$SERVERS; [ $workload = nio-4k ] && servers="nginx nio"
    for server in $servers; do
      args=("$WORK/$workload.txt"); [ $workload = put-1m ] && args+=(PUT 1048576)
      [ $workload = put-1m-md5 ] && args=("$WORK/put-1m.txt" PUT 1048576 "$PUT_MD5")
      case $server in baseline) use "$BASELINE_BIN" ;; gateway) use "$BIN" ;; esac
      read -r rps p99 cpu system < <(run "${server/baseline/gateway}" "${args[@]}")
      echo "$round $workload $server $rps $p99 $cpu $system" | tee -a "$WORK/results.txt" >&2
    done
  done
  case " ${WORKLOADS:-put-1m} " in *" put-1m "*) ;; *) continue ;; esac
  rm -rf "$WORK/disk"
  echo "$round put-1m disk $(python3 bench/disk_ceiling.py "$WORK/disk" "$DURATION" "$CONNECTIONS") - - -" | tee -a "$WORK/results.txt" >&2
  rm -rf "$WORK/disk"
done
echo
python3 - "$WORK/results.txt" "$CONNECTIONS" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
rps, cpu, system = {}, {}, {}
for round_, workload, server, value, p99, micros, kernel in rows:
    rps.setdefault((workload, server), []).append(float(value))
    if micros != "-": cpu.setdefault((workload, server), []).append(float(micros))
    if kernel != "-": system.setdefault((workload, server), []).append(float(kernel))
sizes = {"get-1m": 1.0, "get-4k": 1 / 256, "put-1m": 1.0, "put-1m-md5": 1.0, "floor-4k": 1 / 256, "nio-4k": 1 / 256}
# The server measured against nginx in each workload: the gateway, but bench/NIOFloor in nio-4k.
measured = lambda workload: "nio" if workload == "nio-4k" else "gateway"
print(f"{'workload':<12} {'server':<8} {'objects/s':>12} {'MiB/s':>10} {'server CPU µs/request':>22} {'of it system':>13}   (medians over rounds)")
for workload in ("get-1m", "get-4k", "put-1m", "put-1m-md5", "floor-4k", "nio-4k"):
    if (workload, measured(workload)) not in rps: continue
    for server in ("nginx", "baseline", "gateway", "nio"):
        if (workload, server) not in rps: continue
        median = statistics.median(rps[(workload, server)])
        print(f"{workload:<12} {server:<8} {median:>12.0f} {median * sizes[workload]:>10.1f} {statistics.median(cpu[(workload, server)]):>22.0f}"
              f" {statistics.median(system[(workload, server)]):>13.0f}")
print(f"\nconcurrency {sys.argv[2]}")
goals = {"get-1m": ("GET 1 MiB", 0.9), "get-4k": ("GET 4 KiB", 0.7), "put-1m": ("PUT 1 MiB", 0.6),
         "put-1m-md5": ("PUT MD5", None), "floor-4k": ("floor 4 KiB", None),
         "nio-4k": ("NIO 4 KiB", None)}
for workload, (name, goal) in goals.items():
    if (workload, measured(workload)) not in rps: continue
    ratios = [g / n for g, n in zip(rps[(workload, measured(workload))], rps[(workload, "nginx")])]
    ratio = statistics.median(ratios)
    verdict = "(no goal)" if goal is None else f"(goal >= {goal}): " + ("ok" if ratio >= goal else "BELOW GOAL")
    print(f"ratio {measured(workload) + '/nginx':<13} {name:<11} {ratio:6.3f} {verdict}   rounds: {' '.join(f'{r:.2f}' for r in ratios)}")
for workload, (name, goal) in goals.items():
    if (workload, "baseline") not in rps: continue
    base = [b / n for b, n in zip(rps[(workload, "baseline")], rps[(workload, "nginx")])]
    print(f"ratio baseline/nginx {name:<10} {statistics.median(base):6.3f}   rounds: {' '.join(f'{r:.2f}' for r in base)}")
    change = [g / b for g, b in zip(rps[(workload, "gateway")], rps[(workload, "baseline")])]
    ahead = sum(1 for r in change if r > 1)
    print(f"ratio gateway/baseline {name:<10} {statistics.median(change):6.3f}   ahead in {ahead} of {len(change)} rounds; "
          f"CPU µs/request {statistics.median(cpu[(workload, 'baseline')]):.0f} -> {statistics.median(cpu[(workload, 'gateway')]):.0f}")
if ("put-1m", "disk") not in rps: sys.exit(0)
disk = statistics.median(rps[("put-1m", "disk")])
ratios = [g / d for g, d in zip(rps[("put-1m", "gateway")], rps[("put-1m", "disk")])]
print(f"disk ceiling for durable 1 MiB writes: {disk:.0f} objects/s = {disk / statistics.median(rps[('put-1m', 'nginx')]):.2f} x nginx")
print(f"ratio gateway/disk  PUT 1 MiB  {statistics.median(ratios):5.2f}   rounds: {' '.join(f'{r:.2f}' for r in ratios)}")
PY
if grep -qi "error\|fatal" "$WORK/server.log"; then echo "server log:"; grep -i "error\|fatal" "$WORK/server.log" | head -5; fi
