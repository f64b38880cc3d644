#!/usr/bin/env bash
# Peak memory of the gateway while a 1 GiB object goes through it, release build.
#   bash bench/rss.sh [size-MiB]        (default 1024)
#
# With credentials from the token endpoint (GET /), boto3 uploads a 1 GiB file from disk as one
# PutObject (streamed), reads it back with one GetObject streamed to disk, then does the same
# as a multipart upload (upload_file, 8 MiB parts, 8 threads) and a ranged parallel download
# (download_file). Every transfer is checked by SHA-256. Meanwhile the server's VmRSS is
# sampled every 50 ms; the peak (kernel VmHWM) is printed per phase. Goal: < 150 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${1:-1024}
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}
. bench/lib.sh
export LOG_LEVEL=${LOG_LEVEL:-warning}
bench_scratch rss
SAMPLER=""
cleanup_more() { if [ -n "$SAMPLER" ]; then kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true; fi; }
EXPIRE=3600 bench_config rss-bench-root-secret-0123456789abcdefghij rss
start_server "$BIN"

echo "writing a ${SIZE_MIB} MiB random file" >&2
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom > "$WORK/big.bin"

# Sampler: max VmRSS seen, in KiB, written to $WORK/rss-max.
( max=0
  while kill -0 "$PID" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID/status" 2>/dev/null || echo 0)
    [ "${rss:-0}" -gt "$max" ] && { max=$rss; echo "$max" > "$WORK/rss-max"; }
    sleep 0.05
  done ) &
SAMPLER=$!
hwm() { awk '/^VmHWM:/ {printf "%.1f", $2/1024}' "/proc/$PID/status"; }
echo "baseline: VmRSS $(awk '/^VmRSS:/ {printf "%.1f", $2/1024}' "/proc/$PID/status") MiB"

CREDENTIALS=$(curl -sf "http://127.0.0.1:$PORT/")
phase() { # name python-snippet
  local name=$1 code=$2 started
  started=$(date +%s.%N)
  CREDENTIALS="$CREDENTIALS" ENDPOINT="http://127.0.0.1:$GPORT" FILE="$WORK/big.bin" OUT="$WORK/out.bin" python3 - <<PY
import hashlib, json, os, sys
import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
c = json.loads(os.environ["CREDENTIALS"])
s3 = boto3.client("s3", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
                  aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["AccessKeySecret"],
                  aws_session_token=c["SecurityToken"],
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, read_timeout=600))
transfer = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20, max_concurrency=8)
def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""): h.update(chunk)
    return h.hexdigest()
FILE, OUT = os.environ["FILE"], os.environ["OUT"]
$code
PY
  printf "%-34s %6.1f s   peak RSS so far %7s MiB\n" "$name" "$(echo "$(date +%s.%N) - $started" | bc)" "$(hwm)"
}
command -v bc >/dev/null || { apt-get update -qq && apt-get install -y -qq bc >/dev/null; }
phase "PutObject (single, streamed)" '
with open(FILE, "rb") as f:
    s3.put_object(Bucket="rss", Key="big-single", Body=f)
assert s3.head_object(Bucket="rss", Key="big-single")["ContentLength"] == os.path.getsize(FILE)'
phase "GetObject (single, to disk)" '
body = s3.get_object(Bucket="rss", Key="big-single")["Body"]
with open(OUT, "wb") as f:
    for chunk in body.iter_chunks(1 << 20): f.write(chunk)
assert sha(OUT) == sha(FILE), "GET returned other bytes"'
phase "upload_file (multipart, 8 MiB x 8)" '
s3.upload_file(FILE, "rss", "big-multipart", Config=transfer)'
phase "download_file (ranged, 8 threads)" '
s3.download_file("rss", "big-multipart", OUT, Config=transfer)
assert sha(OUT) == sha(FILE), "download returned other bytes"'
kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true; SAMPLER=""
PEAK=$(hwm)
echo "peak RSS (VmHWM): $PEAK MiB; max sampled VmRSS: $(awk '{printf "%.1f", $1/1024}' "$WORK/rss-max") MiB"
python3 -c "p=$PEAK; print(f'peak RSS {p:.1f} MiB (goal < 150 MiB): ' + ('ok' if p < 150 else 'ABOVE GOAL'))"
