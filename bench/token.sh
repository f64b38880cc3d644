#!/usr/bin/env bash
# Token endpoint throughput: GET / (mint a token) against GET /healthz (a trivial route of the
# same server), measured in the same run with wrk, release build. Prints requests/s, p99 latency
# and the ratio token/trivial (goal >= 0.8).
#   bash bench/token.sh [duration-seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
CONNECTIONS=${2:-32}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
BIN=$(bash .ci/build-release.sh)

WORK=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
cp -r policy "$WORK/policy"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
GPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$WORK/config.json" <<JSON
{"AccessKeyID": "", "AccessKeySecret": "bench-root-secret-0123456789abcdefghijklmn", "RoleArn": "",
 "TokenExpireTime": "900", "PolicyFile": "policy/all_policy.txt",
 "ListenAddress": "127.0.0.1", "Port": $PORT, "GatewayAddress": "127.0.0.1", "GatewayPort": $GPORT,
 "Variables": {"BUCKET_NAME": "bench"}}
JSON
"$BIN" serve --config "$WORK/config.json" > "$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done

run() { # path -> "rps p99ms"
  wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$PORT$1" > "$WORK/wrk.txt"
  local rps p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")
  grep -q "Non-2xx" "$WORK/wrk.txt" && { echo "non-2xx responses for $1" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
  echo "$rps $p99"
}
wrk -t2 -c"$CONNECTIONS" -d2s "http://127.0.0.1:$PORT/" >/dev/null   # warm-up
read -r TRIVIAL_RPS TRIVIAL_P99 < <(run /healthz)
read -r TOKEN_RPS TOKEN_P99 < <(run /)
printf "%-22s %12s %10s\n" "route" "requests/s" "p99"
printf "%-22s %12s %10s\n" "GET /healthz (trivial)" "$TRIVIAL_RPS" "$TRIVIAL_P99"
printf "%-22s %12s %10s\n" "GET / (token)" "$TOKEN_RPS" "$TOKEN_P99"
python3 -c "r=$TOKEN_RPS/$TRIVIAL_RPS; print(f'ratio token/trivial: {r:.2f} (goal >= 0.8): ' + ('ok' if r >= 0.8 else 'BELOW GOAL'))"
