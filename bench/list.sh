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
. bench/lib.sh
export LOG_LEVEL=${LOG_LEVEL:-warning}
for round in $(seq "${ROUNDS:-2}"); do
  for BIN in "$@"; do
    bench_scratch list
    KEY_ID=TGBENCHROOT bench_config bench-root-secret-0123456789abcdefghijklmn bench '"Buckets": ["bench"]'
    start_server "$BIN"
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
    bench_cleanup
  done
done
