#!/usr/bin/env bash
# Upstream vend latency and throughput: a role vended by the Alibaba STS stand-in (signatures
# checked with Alibaba's own Python code, a fixed 20 ms pause before every answer), with the
# reuse cache on (CacheShare 0.5) and off (CacheShare 0), against the local-token endpoint
# (GET /?role=local, Tollgate's own HMAC tokens) of the same server, in the same run. Every
# request carries the same login token (one app user), so with the cache on a burst costs
# the upstream one AssumeRole. Release build, wrk on loopback.
#   bash bench/upstream.sh [seconds-per-round] [connections] [rounds] [delay-ms]
# Prints, per mode: requests/s at CONNECTIONS, and p50/p99 latency of one connection; and the
# ratios to the local-token endpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-4}
CONNECTIONS=${2:-32}
ROUNDS=${3:-3}
DELAY_MS=${4:-20}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
python3 -c 'import jwt, alibabacloud_openapi_util' 2>/dev/null || python3 -m pip install -q pyjwt alibabacloud-openapi-util
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}

. bench/lib.sh
bench_scratch upstream
STANDIN_PID=""; SECOND_PID=""
cleanup_more() {
  [ -z "$SECOND_PID" ] || { kill "$SECOND_PID" 2>/dev/null || true; wait "$SECOND_PID" 2>/dev/null || true; }
  [ -z "$STANDIN_PID" ] || { kill "$STANDIN_PID" 2>/dev/null || true; wait "$STANDIN_PID" 2>/dev/null || true; }
}
python3 bench/aliyun_standin.py "$WORK/standin.port" "$DELAY_MS" 2>> "$WORK/standin.log" &
STANDIN_PID=$!
for _ in $(seq 100); do [ -s "$WORK/standin.port" ] && break; sleep 0.1; done
STANDIN="http://127.0.0.1:$(cat "$WORK/standin.port")"
export TOLLGATE_BENCH_JWT_SECRET=bench-jwt-secret-0123456789abcdefghijklmnop
login() { # TEAM -> a login token for bench-user (team "local" gets the local role)
  python3 -c 'import jwt, time, os, sys; n = int(time.time()); print(jwt.encode({"iss": "https://bench", "aud": "bench", "sub": "bench-user", "team": sys.argv[1], "iat": n, "exp": n + 7200}, os.environ["TOLLGATE_BENCH_JWT_SECRET"], algorithm="HS256"))' "$1"
}
TOKEN=$(login app)
LOCAL_TOKEN=$(login local)

# config SHARE: $WORK/config.json with role `up` vended by the stand-in (CacheShare SHARE) and `local`.
config() {
  bench_config bench-root-secret-0123456789abcdefghijklmn bench \
    '"RateLimits": {"PerAddressPerMinute": 600000000, "PerSubjectPerMinute": 0}'
  mkdir -p "$WORK/secrets"
  printf 'LTAI5tTollgateInterop\n' > "$WORK/secrets/ak"
  printf 'aliyunInteropSecret0123456789ab\n' > "$WORK/secrets/sk"
  python3 - "$WORK/config.json" "$STANDIN" "$1" <<'PY'
import json, sys
path, standin, share = sys.argv[1], sys.argv[2], float(sys.argv[3])
config = json.load(open(path))
config["Authentication"] = {"Providers": [{"Issuer": "https://bench", "Audiences": ["bench"], "Algorithms": ["HS256"],
                                           "HMACSecretEnv": "TOLLGATE_BENCH_JWT_SECRET", "Claims": ["team"]}],
                            "RoleRules": [{"Claim": "team", "Match": "Equals", "Value": "local", "Role": "local"}], "DefaultRole": "up"}
config["Upstreams"] = {"aliyun": {"Type": "aliyun-sts", "Endpoint": standin, "AccessKeyIDFile": "secrets/ak",
                                  "AccessKeySecretFile": "secrets/sk", "CacheShare": share}}
config["Roles"] = {"up": {"PolicyFile": "policy/user_isolated_policy.txt", "Upstream": "aliyun",
                          "RoleArn": "acs:ram::1234567890123456:role/bench"},
                   "local": "policy/user_isolated_policy.txt"}
json.dump(config, open(path, "w"))
PY
}

# Two servers: the cache off (its own directory, config and data: a server watches its
# config.json), and the cache on.
config 0
mkdir -p "$WORK/off"
cp -r "$WORK/policy" "$WORK/secrets" "$WORK/config.json" "$WORK/off/"
OFF_PORT=$PORT
LOG_LEVEL=warning "$BIN" serve --config "$WORK/off/config.json" >> "$WORK/off/server.log" 2>&1 &
SECOND_PID=$!
for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$OFF_PORT/healthz" && break; sleep 0.1; done
curl -sf -o /dev/null "http://127.0.0.1:$OFF_PORT/healthz" || { tail -n 20 "$WORK/off/server.log" >&2; exit 1; }
config 0.5
LOG_LEVEL=warning start_server "$BIN"
ON_PORT=$PORT

run() { # port path connections token -> "rps p50 p99"
  wrk -t"$([ "$3" -ge 2 ] && echo 2 || echo 1)" -c"$3" -d"${DURATION}s" --latency -H "Authorization: Bearer $4" "http://127.0.0.1:$1$2" > "$WORK/wrk.txt"
  grep -q "Non-2xx" "$WORK/wrk.txt" && { echo "non-2xx responses for $2" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
  echo "$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt") $(awk '$1=="50%" {print $2}' "$WORK/wrk.txt") $(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")"
}
for port in "$ON_PORT" "$OFF_PORT"; do wrk -t1 -c4 -d1s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$port/" >/dev/null; done
: > "$WORK/rounds.txt"
for round in $(seq "$ROUNDS"); do
  for mode in local cache-on cache-off; do
    case $mode in
      local) port=$ON_PORT; path="/?role=local"; token=$LOCAL_TOKEN ;;
      cache-on) port=$ON_PORT; path="/"; token=$TOKEN ;;
      cache-off) port=$OFF_PORT; path="/"; token=$TOKEN ;;
    esac
    read -r RPS _ _ < <(run "$port" "$path" "$CONNECTIONS" "$token")
    read -r _ P50 P99 < <(run "$port" "$path" 1 "$token")
    echo "$round $mode $RPS $P50 $P99" >> "$WORK/rounds.txt"
  done
done
python3 - "$WORK/rounds.txt" "$CONNECTIONS" "$DELAY_MS" <<'PY'
import re, statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def ms(text):
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
print(f"upstream delay {sys.argv[3]} ms; throughput with {sys.argv[2]} connections, latency with 1")
print(f"{'round':>5} {'mode':>10} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
for n, mode, rps, p50, p99 in rows:
    print(f"{n:>5} {mode:>10} {float(rps):>10.0f} {ms(p50):>8.2f} {ms(p99):>8.2f}")
median = {mode: (statistics.median(float(r[2]) for r in rows if r[1] == mode),
                 statistics.median(ms(r[3]) for r in rows if r[1] == mode)) for mode in ("local", "cache-on", "cache-off")}
for mode in ("cache-on", "cache-off"):
    print(f"{mode:>9}: {median[mode][0]:.0f} req/s = {median[mode][0] / median['local'][0]:.3f} x local "
          f"({median['local'][0]:.0f} req/s); p50 {median[mode][1]:.2f} ms vs local {median['local'][1]:.2f} ms")
PY
