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
# With --perf, perf samples the server (release build, wrk load, 2,000 samples a second) on
# each route and the script prints server CPU per request, split by where it runs (our code,
# the kernel, libc, libcrypto) and by the token path's own frames, inclusive: real CPU on this
# machine, where --instructions counts what valgrind's CPU (no SHA extensions) executes.
#   bash bench/token.sh --perf [--authenticated] [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=wrk
AUTHENTICATED=false
GOAL=0.9
if [ "${1:-}" = "--instructions" ]; then MODE=instructions; shift; fi
if [ "${1:-}" = "--perf" ]; then MODE=perf; shift; fi
if [ "${1:-}" = "--authenticated" ]; then AUTHENTICATED=true; GOAL=0.75; shift; fi
DURATION=${1:-4}
CONNECTIONS=${2:-32}
ROUNDS=${3:-7}
case "$MODE" in wrk) TOOLS="wrk" ;; instructions) TOOLS="valgrind" ;; perf) TOOLS="wrk linux-perf" ;; esac
for tool in $TOOLS; do
  command -v "${tool#linux-}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool" >/dev/null; }
done
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}

. bench/lib.sh
bench_scratch token
bench_config bench-root-secret-0123456789abcdefghijklmn bench \
  '"RateLimits": {"PerAddressPerMinute": 600000000, "PerSubjectPerMinute": 600000000}'
HEADER=()
if [ "$AUTHENTICATED" = true ]; then
  bench_jwks
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
wrk -t2 -c"$CONNECTIONS" -d2s "${HEADER[@]}" "http://127.0.0.1:$PORT/" >/dev/null   # warm-up

if [ "$MODE" = perf ]; then
  SECONDS_=${1:-6}
  for path in /healthz /; do
    name=$([ "$path" = / ] && echo token || echo trivial)
    perf record -F 2000 -g -p "$PID" -o "$WORK/$name.data" -- sleep "$SECONDS_" >/dev/null 2>&1 &
    RECORDER=$!
    wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_}s" "${HEADER[@]}" "http://127.0.0.1:$PORT$path" > "$WORK/$name.wrk"
    wait "$RECORDER" || true
    perf report -i "$WORK/$name.data" --children --sort dso,sym --stdio -g none 2>/dev/null > "$WORK/$name.report"
    perf report -i "$WORK/$name.data" --no-children --sort dso --stdio -g none 2>/dev/null > "$WORK/$name.dso"
  done
  python3 - "$WORK" "$(basename "$BIN")" <<'PY'
import re, sys
work, binary = sys.argv[1], sys.argv[2]
def requests(name):
    return int(re.search(r"(\d+) requests in", open(f"{work}/{name}.wrk").read()).group(1))
def cpu_ns(name):
    # cpu-clock's event count is CPU time in nanoseconds.
    return float(re.search(r"Event count \(approx\.\): (\d+)", open(f"{work}/{name}.report").read()).group(1))
# (label, pattern of the symbol, how its frames add up): an async function runs as partial
# functions, each a frame of its own (summed); a function and its thunks nest (the largest).
frames = [
    ("TokenController.issue (all the route does)", r"0B10ControllerC5issue_7context", sum),
    ("  the `token issued` line, audit record, counter", r"ControllerC9logIssued", max),
    ("    the log handler", r"LogOutputC7HandlerV3log5event", max),
    ("    the audit record", r"AuditLogC6record", max),
    ("  TokenService.issue (claims, two HMACs, key id)", r"0B7ServiceV5issue7subject", max),
    ("  the login token checked (--authenticated; cached)", r"0B8VerifierV6verify_3now", max),
]
per = {}
for name in ("trivial", "token"):
    n = requests(name)
    us = cpu_ns(name) / 1000 / n
    dso = {}
    for line in open(f"{work}/{name}.dso"):
        m = re.match(r"\s*([\d.]+)%\s+(\S+)", line)
        if m: dso["tollgate" if m.group(2) == binary else m.group(2)] = float(m.group(1)) * us / 100
    found = {label: [] for label, _, _ in frames}
    for line in open(f"{work}/{name}.report"):
        m = re.match(r"\s*([\d.]+)%\s+[\d.]+%\s+\S+\s+\[.\]\s+(\S+)", line)
        if not m: continue
        for label, pattern, _ in frames:
            if re.search(pattern, m.group(2)): found[label].append(float(m.group(1)) * us / 100)
    inclusive = {label: combine(found[label]) if found[label] else 0 for label, _, combine in frames}
    per[name] = (n, us, dso, inclusive)
print(f"{'server CPU per request, µs':<52} {'/healthz':>9} {'/':>9}")
print(f"{'all of it':<52} {per['trivial'][1]:>9.1f} {per['token'][1]:>9.1f}")
for part in ("tollgate", "[kernel.kallsyms]", "libc.so.6", "libcrypto.so.3"):
    print(f"{'  in ' + part:<52} {per['trivial'][2].get(part, 0):>9.1f} {per['token'][2].get(part, 0):>9.1f}")
for label, _, _ in frames:
    print(f"{label:<52} {per['trivial'][3][label]:>9.1f} {per['token'][3][label]:>9.1f}")
print(f"requests: {per['trivial'][0]} and {per['token'][0]}; CPU per request trivial/token: {per['trivial'][1] / per['token'][1]:.2f}")
PY
  exit 0
fi

run() { # path -> "rps p99ms"
  wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency "${HEADER[@]}" "http://127.0.0.1:$PORT$1" > "$WORK/wrk.txt"
  grep -q "Non-2xx" "$WORK/wrk.txt" && { echo "non-2xx responses for $1" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
  echo "$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt") $(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")"
}
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
