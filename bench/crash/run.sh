#!/usr/bin/env bash
# End-to-end crash test against the real server: builds (or takes TOLLGATE_BIN), writes a
# scratch config (loopback ports, its own data directory), issues credentials with
# `tollgate token issue`, and runs crash_test.sh. Prints PASS or FAIL on the last line.
#   bash bench/crash/run.sh [iterations]      (default 20)
# Environment passed through to crash_test.sh: MAX_KILL_DELAY_MS, CRASH_SINGLE_MIB,
# CRASH_MULTIPART_MIB. KEEP_WORK=1 keeps the scratch directory (logs, data) for inspection.
set -uo pipefail
cd "$(dirname "$0")/../.."
ITERATIONS=${1:-20}
for tool in sqlite3 curl; do
  command -v $tool >/dev/null || { apt-get update -qq && apt-get install -y -qq $tool >/dev/null; }
done
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)} || { echo "FAIL: build"; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
. bench/lib.sh
bench_scratch crash
EXPIRE=43200 bench_config crash-test-root-secret-0123456789abcdefghij crash-test
# Vended credentials (default role: all_policy.txt), as an app would use them.
CREDENTIALS=$("$BIN" token issue --config "$WORK/config.json" --duration 43200) || { echo "FAIL: token issue"; exit 1; }
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$CREDENTIALS" "$1"; }
export AWS_ACCESS_KEY_ID=$(field AccessKeyId) AWS_SECRET_ACCESS_KEY=$(field AccessKeySecret) AWS_SESSION_TOKEN=$(field SecurityToken)
export TOLLGATE_BIN=$BIN TOLLGATE_CONFIG=$WORK/config.json DATA_DIR=$WORK/data/store
export ENDPOINT=http://127.0.0.1:$GPORT BUCKET=crash-test WORK_DIR=$WORK/work
# Ready = the gateway answers a signed request: a presigned ListBuckets (valid 12 h).
export HEALTH_URL=$(python3 - <<'PY'
import os, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
                  aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                  aws_session_token=os.environ["AWS_SESSION_TOKEN"],
                  config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
print(s3.generate_presigned_url("list_buckets", ExpiresIn=43200))
PY
)
mkdir -p "$WORK_DIR"
# Kill delays must fall inside the upload: unless MAX_KILL_DELAY_MS is given, time one upload of
# version B (both objects) on this machine and draw the kill moment uniformly from 0 to that.
if [ -z "${MAX_KILL_DELAY_MS:-}" ]; then
  "$BIN" serve --config "$TOLLGATE_CONFIG" >> "$WORK_DIR/calibration.log" 2>&1 &
  CALIBRATION_PID=$!
  for _ in $(seq 300); do curl -fsS -o /dev/null "$HEALTH_URL" 2>/dev/null && break; sleep 0.1; done
  python3 bench/crash/driver.py prepare "$WORK_DIR" && python3 bench/crash/driver.py setup || { kill $CALIBRATION_PID; echo "FAIL: set-up"; exit 1; }
  started=$(date +%s%N)
  python3 bench/crash/driver.py put "$WORK_DIR" B || { kill $CALIBRATION_PID; echo "FAIL: calibration upload"; exit 1; }
  export MAX_KILL_DELAY_MS=$(( ($(date +%s%N) - started) / 1000000 ))
  kill -TERM $CALIBRATION_PID; wait $CALIBRATION_PID 2>/dev/null
  echo "one upload of version B takes ${MAX_KILL_DELAY_MS} ms here: kill -9 after 0..${MAX_KILL_DELAY_MS} ms"
fi
echo "crash test: $ITERATIONS iterations, binary $BIN, scratch $WORK"
if bash bench/crash/crash_test.sh "$ITERATIONS" | tee "$WORK/crash.log"; then
  mid=$(grep -c "iteration .*version A" "$WORK/crash.log" || true)
  echo "PASS: crash test ($ITERATIONS iterations, $mid killed before version B was fully committed): every object read back as a complete old or new version, no temporary or orphan files"
else
  status=$?
  echo "--- server log (tail)"; tail -n 20 "$WORK/work/server.log" 2>/dev/null
  echo "--- client log (tail)"; tail -n 10 "$WORK/work/client.log" 2>/dev/null
  echo "FAIL: crash test (exit $status); scratch directory ${WORK}$([ "${KEEP_WORK:-0}" = 1 ] || echo ' (removed; KEEP_WORK=1 keeps it)')"
  exit 1
fi
