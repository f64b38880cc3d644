#!/usr/bin/env bash
# Latency of a 1000-key listing through the gateway, release build(s).
#   bash bench/list.sh [BINARY …]      (default: the release build; ROUNDS, default 2)
#
# boto3 puts 1000 one-byte objects under keys like photos/2024/user-00042/image-00042.jpg, then
# one keep-alive connection sends a presigned ListObjectsV2 (max-keys 1000, encoding-type=url as
# boto3 sends it) 20 times to warm up and 200 times measured; prints the median and p90. With
# several binaries, each round runs them in turn (a fresh server and data directory each), so
# two builds can be compared in one run on a machine that drifts.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- "$(bash .ci/build-release.sh)"
WORK=""; PID=""
cleanup() {
  [ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
  [ -n "$WORK" ] && rm -rf "$WORK"
  return 0
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for round in $(seq "${ROUNDS:-2}"); do
  for BIN in "$@"; do
    WORK=$(mktemp -d -p "${BENCH_DIR:-${TMPDIR:-/tmp}}" tollgate-list.XXXXXX)
    PORT=$(port); GPORT=$(port)
    cp -r policy "$WORK/policy"
    cat > "$WORK/config.json" <<JSON
{"AccessKeyID": "TGBENCHROOT", "AccessKeySecret": "bench-root-secret-0123456789abcdefghijklmn", "RoleArn": "",
 "TokenExpireTime": "900", "PolicyFile": "policy/all_policy.txt",
 "ListenAddress": "127.0.0.1", "Port": $PORT, "GatewayAddress": "127.0.0.1", "GatewayPort": $GPORT,
 "Variables": {"BUCKET_NAME": "bench"}, "DataDirectory": "data", "Buckets": ["bench"]}
JSON
    LOG_LEVEL=${LOG_LEVEL:-warning} "$BIN" serve --config "$WORK/config.json" > "$WORK/server.log" 2>&1 &
    PID=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
    printf 'round %s %s: ' "$round" "$BIN"
    python3 - "$GPORT" <<'PY'
import http.client, statistics, sys, time, urllib.parse
import boto3
from botocore.config import Config
port = int(sys.argv[1])
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                  aws_access_key_id="TGBENCHROOT", aws_secret_access_key="bench-root-secret-0123456789abcdefghijklmn",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
for i in range(1000):
    s3.put_object(Bucket="bench", Key=f"photos/2024/user-{i:05d}/image-{i:05d}.jpg", Body=b"x")
url = urllib.parse.urlsplit(s3.generate_presigned_url(
    "list_objects_v2", Params={"Bucket": "bench", "MaxKeys": 1000, "EncodingType": "url"}, ExpiresIn=3600))
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
def list_once():
    connection.request("GET", url.path + "?" + url.query)
    response = connection.getresponse()
    body = response.read()
    assert response.status == 200 and body.count(b"<Key>") == 1000, (response.status, body[:200])
for _ in range(20):
    list_once()
times = []
for _ in range(200):
    start = time.perf_counter()
    list_once()
    times.append(time.perf_counter() - start)
times.sort()
print(f"1000-key listing: median {statistics.median(times) * 1e3:.2f} ms, p90 {times[179] * 1e3:.2f} ms")
PY
    cleanup
    WORK=""; PID=""
  done
done
