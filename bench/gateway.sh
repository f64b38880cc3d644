#!/usr/bin/env bash
# Object gateway throughput against nginx, same run, same disk, same requests, release build.
#   bash bench/gateway.sh [duration-seconds] [connections]      (defaults 10 and 16)
#
# Workloads (wrk, 2 threads, CONNECTIONS connections, bench/gateway.lua cycling through a list
# of request targets): GET of 1 MiB objects, GET of 4 KiB objects, PUT of 1 MiB bodies.
# The gateway requests are SigV4-presigned by boto3 with the root credentials
# (bench/gateway_load.py); nginx gets the very same request lines (it ignores the query) and
# serves the same bytes from files in the same temporary directory; it takes PUT through its
# DAV module (`dav_methods PUT`). Prints objects/s, MiB/s, p99 latency and the ratio
# gateway/nginx. Goals: GET 1 MiB >= 0.6, GET 4 KiB >= 0.4 (PUT has no goal: the gateway
# fsyncs every object and commits it in SQLite, nginx's DAV PUT only renames a temp file).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
CONNECTIONS=${2:-16}
for tool in wrk nginx; do
  command -v $tool >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null; }
done
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}
SECRET="bench-root-secret-0123456789abcdefghijklmn"
KEY_ID="TGBENCHROOT"

WORK=$(mktemp -d -p "${BENCH_DIR:-${TMPDIR:-/tmp}}" tollgate-bench.XXXXXX)
PID=""
cleanup() {
  [ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
  [ -f "$WORK/nginx.pid" ] && { kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true; }
  sleep 0.2
  rm -rf "$WORK"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(port); GPORT=$(port); NPORT=$(port)

cp -r policy "$WORK/policy"
cat > "$WORK/config.json" <<JSON
{"AccessKeyID": "$KEY_ID", "AccessKeySecret": "$SECRET", "RoleArn": "",
 "TokenExpireTime": "900", "PolicyFile": "policy/all_policy.txt",
 "ListenAddress": "127.0.0.1", "Port": $PORT, "GatewayAddress": "127.0.0.1", "GatewayPort": $GPORT,
 "Variables": {"BUCKET_NAME": "bench"}, "DataDirectory": "data"}
JSON
LOG_LEVEL=${LOG_LEVEL:-warning} "$BIN" serve --config "$WORK/config.json" > "$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done

# nginx: unprivileged config, temp prefix, loopback port, files under $WORK (the same disk).
mkdir -p "$WORK/nginx-root" "$WORK/nginx-tmp"
USER_LINE=""; [ "$(id -u)" = 0 ] && USER_LINE="user root;"
cat > "$WORK/nginx.conf" <<NGINX
$USER_LINE
worker_processes auto;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  client_body_temp_path $WORK/nginx-tmp/body;
  proxy_temp_path $WORK/nginx-tmp/proxy;
  fastcgi_temp_path $WORK/nginx-tmp/fastcgi;
  uwsgi_temp_path $WORK/nginx-tmp/uwsgi;
  scgi_temp_path $WORK/nginx-tmp/scgi;
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
  }
}
NGINX
nginx -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log"
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$NPORT/" && break; sleep 0.1; done

python3 bench/gateway_load.py prepare "$WORK" "http://127.0.0.1:$GPORT" "http://127.0.0.1:$NPORT" "$KEY_ID" "$SECRET"

run() { # base-url targets-file [PUT bytes] -> "objects/s p99"
  local base=$1; shift
  wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s bench/gateway.lua "$base" -- "$@" > "$WORK/wrk.txt"
  if grep -q "Non-2xx\|Socket errors" "$WORK/wrk.txt"; then
    echo "errors for $base $*:" >&2; cat "$WORK/wrk.txt" >&2; exit 1
  fi
  echo "$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt") $(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")"
}

GW="http://127.0.0.1:$GPORT"; NG="http://127.0.0.1:$NPORT"
run "$GW" "$WORK/get-4k.txt" >/dev/null   # warm-up (page cache, connections)
run "$NG" "$WORK/get-4k.txt" >/dev/null
printf "%-12s %-8s %12s %10s %10s\n" workload server "objects/s" "MiB/s" p99
declare -A RPS
for workload in get-1m get-4k put-1m; do
  for server in nginx gateway; do
    base=$NG; [ $server = gateway ] && base=$GW
    args=("$WORK/$workload.txt"); [ $workload = put-1m ] && args+=(PUT 1048576)
    read -r rps p99 < <(run "$base" "${args[@]}")
    RPS[$workload-$server]=$rps
    size=1; [ $workload = get-4k ] && size=0.00390625
    printf "%-12s %-8s %12s %10.1f %10s\n" "$workload" "$server" "$rps" "$(python3 -c "print($rps*$size)")" "$p99"
  done
done
echo
python3 - "${RPS[get-1m-gateway]}" "${RPS[get-1m-nginx]}" "${RPS[get-4k-gateway]}" "${RPS[get-4k-nginx]}" \
          "${RPS[put-1m-gateway]}" "${RPS[put-1m-nginx]}" "$CONNECTIONS" <<'PY'
import sys
g1, n1, g4, n4, gp, np_, c = map(float, sys.argv[1:])
def line(name, r, goal):
    verdict = "" if goal is None else (f"(goal >= {goal}): " + ("ok" if r >= goal else "BELOW GOAL"))
    print(f"ratio gateway/nginx {name:<10} {r:5.2f} {verdict}")
print(f"concurrency {int(c)}")
line("GET 1 MiB", g1 / n1, 0.6)
line("GET 4 KiB", g4 / n4, 0.4)
line("PUT 1 MiB", gp / np_, None)
PY
if grep -qi "error\|fatal" "$WORK/server.log"; then echo "server log:"; grep -i "error\|fatal" "$WORK/server.log" | head -5; fi
