#!/usr/bin/env bash
# Token endpoint throughput: GET / (mint a token) against GET /healthz (a trivial route of the
# same server), measured in the same run with wrk, release build. Prints requests/s, p99 latency
# and the ratio token/trivial (goal >= 0.9, issue 43).
#   bash bench/token.sh [seconds-per-round] [connections] [rounds]
# With --authenticated, the server has an Authentication section (an RS256 provider whose JWKS
# a loopback server serves) and every GET / carries a login token: authenticated issuance
# against /healthz (goal >= 0.75). (wrk sends the login token to both routes.)
#   bash bench/token.sh --authenticated [seconds-per-round] [connections] [rounds]
# With --instructions, the server runs under callgrind instead and the script prints user-space
# instructions per request for both routes: a figure that does not drift with the machine's load.
#   bash bench/token.sh --instructions [--authenticated] [requests]
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=wrk
AUTHENTICATED=false
GOAL=0.9
if [ "${1:-}" = "--instructions" ]; then MODE=instructions; shift; fi
if [ "${1:-}" = "--authenticated" ]; then AUTHENTICATED=true; GOAL=0.75; shift; fi
DURATION=${1:-4}
CONNECTIONS=${2:-32}
ROUNDS=${3:-7}
TOOL=$([ "$MODE" = wrk ] && echo wrk || echo valgrind)
command -v "$TOOL" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$TOOL" >/dev/null; }
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}

. bench/lib.sh
bench_scratch token
JWKS_PID=""
cleanup_more() { if [ -n "$JWKS_PID" ]; then kill "$JWKS_PID" 2>/dev/null || true; fi; }
bench_config bench-root-secret-0123456789abcdefghijklmn bench \
  '"RateLimits": {"PerAddressPerMinute": 600000000, "PerSubjectPerMinute": 600000000}'
HEADER=()
if [ "$AUTHENTICATED" = true ]; then
  python3 -c 'import jwt, cryptography' 2>/dev/null || python3 -m pip install -q pyjwt cryptography
  JPORT=$(free_port)
  python3 bench/jwks_server.py "$JPORT" "$WORK/token" &
  JWKS_PID=$!
  for _ in $(seq 100); do [ -s "$WORK/token" ] && break; sleep 0.1; done
  python3 - "$WORK/config.json" "$JPORT" <<'PY'
import json, sys
path, port = sys.argv[1], sys.argv[2]
config = json.load(open(path))
config["Authentication"] = {"Providers": [{"Issuer": f"http://127.0.0.1:{port}", "JWKSURL": f"http://127.0.0.1:{port}/jwks.json",
                                           "Audiences": ["bench-app"], "Algorithms": ["RS256"]}],
                            "DefaultRole": "default"}
json.dump(config, open(path, "w"))
PY
  HEADER=(-H "Authorization: Bearer $(cat "$WORK/token")")
fi
if [ "$MODE" = instructions ]; then
  REQUESTS=${1:-2000}
  # Valgrind cannot read the debug info of the static-stdlib build; the symbols are enough.
  strip --strip-debug -o "$WORK/tollgate" "$BIN"
  start_server valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.%p" "$WORK/tollgate"
  requests() { # path count: sequential keep-alive requests (with the login token, if any)
    python3 - "$PORT" "$1" "$2" "${HEADER[1]:-}" <<'PY'
import http.client, sys
port, path, count, header = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
headers = dict([header.split(": ", 1)]) if header else {}
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(count):
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    response.read()
    assert response.status == 200, response.status
PY
  }
  for path in /healthz /; do
    requests "$path" 300                      # warm-up, not counted
    callgrind_control -z "$PID" >/dev/null 2>&1
    requests "$path" "$REQUESTS"
    callgrind_control -d "$PID" >/dev/null 2>&1
    sleep 1
    TOTAL=$(cat "$WORK"/callgrind.*.* | awk '/^summary:/ {s += $2} END {print s}')
    rm -f "$WORK"/callgrind.*.*
    echo "$path $((TOTAL / REQUESTS))" >> "$WORK/instructions.txt"
  done
  awk '{n[$1] = $2; printf "%-9s %8d instructions per request\n", $1, $2}
       END {printf "instructions trivial/token: %.2f (the throughput ratio if user-space work were all that counted)\n", n["/healthz"] / n["/"]}' "$WORK/instructions.txt"
  exit 0
fi

start_server "$BIN"

run() { # path -> "rps p99ms"
  wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency "${HEADER[@]}" "http://127.0.0.1:$PORT$1" > "$WORK/wrk.txt"
  grep -q "Non-2xx" "$WORK/wrk.txt" && { echo "non-2xx responses for $1" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
  echo "$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt") $(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")"
}
wrk -t2 -c"$CONNECTIONS" -d2s "${HEADER[@]}" "http://127.0.0.1:$PORT/" >/dev/null   # warm-up
# Shared 2-core machines drift; alternate short rounds of the two routes and compare each
# token round with the trivial round next to it, then take the median of those ratios.
: > "$WORK/rounds.txt"
for round in $(seq "$ROUNDS"); do
  read -r TRIVIAL_RPS TRIVIAL_P99 < <(run /healthz)
  read -r TOKEN_RPS TOKEN_P99 < <(run /)
  echo "$round $TRIVIAL_RPS $TRIVIAL_P99 $TOKEN_RPS $TOKEN_P99" >> "$WORK/rounds.txt"
done
python3 - "$WORK/rounds.txt" "$GOAL" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
goal = float(sys.argv[2])
print(f"{'round':>5} {'trivial req/s':>14} {'p99':>8} {'token req/s':>12} {'p99':>8} {'ratio':>6}")
ratios = []
for n, trps, tp99, krps, kp99 in rows:
    ratio = float(krps) / float(trps)
    ratios.append(ratio)
    print(f"{n:>5} {float(trps):>14.0f} {tp99:>8} {float(krps):>12.0f} {kp99:>8} {ratio:>6.2f}")
median = statistics.median(ratios)
print(f"median trivial {statistics.median(float(r[1]) for r in rows):.0f} req/s, token {statistics.median(float(r[3]) for r in rows):.0f} req/s")
print(f"ratio token/trivial (median of rounds): {median:.2f} (goal >= {goal}): " + ("ok" if median >= goal else "BELOW GOAL"))
PY
