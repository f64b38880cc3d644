#!/usr/bin/env bash
# Server-side user-space instructions (callgrind) per presigned 4 KiB, 1 MiB and 4 MiB GET on
# the gateway, and per GET / (token issue) and GET /healthz on the token endpoint: figures that do
# not drift with the machine's load, to compare two builds in one run. The 1 MiB and 4 MiB bodies
# go out with sendfile, so their bytes cost no instructions here: what is counted is the
# request's own work, as it is for 4 KiB, plus what sending a file adds (the cork, the file
# region, the connection's writability). The 4 MiB GET is longer than one span (2 MiB): the fast
# path admits it and hands it on to Hummingbird's responder, which admits it again and sends two
# spans.
#   bash bench/gateway_instructions.sh [BINARY …]     (default: the release build; requests: $REQUESTS, 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${REQUESTS:-2000}
[ $# -gt 0 ] || set -- "$(bash .ci/build-release.sh)"
. bench/lib.sh
for BIN in "$@"; do
  bench_scratch instructions
  KEY_ID=TGBENCHROOT bench_config bench-root-secret-0123456789abcdefghijklmn bench \
    '"Buckets": ["bench"], "RateLimits": {"PerAddressPerMinute": 600000000, "PerSubjectPerMinute": 600000000}'
  # Valgrind cannot read the debug info of the static-stdlib build; the symbols are enough.
  strip --strip-debug -o "$WORK/tollgate" "$BIN"
  start_server valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.%p" "$WORK/tollgate"
  measure() { # name python-snippet-that-sends-N-requests
    python3 - "$PORT" "$GPORT" 300 <<<"$2"                 # warm-up, not counted
    callgrind_control -z "$PID" >/dev/null 2>&1
    python3 - "$PORT" "$GPORT" "$REQUESTS" <<<"$2"
    callgrind_control -d "$PID" >/dev/null 2>&1
    sleep 1
    TOTAL=$(cat "$WORK"/callgrind.*.* | awk '/^summary:/ {s += $2} END {print s}')
    rm -f "$WORK"/callgrind.*.*
    printf '%-28s %9d instructions per request\n' "$1" $((TOTAL / REQUESTS))
  }
  echo "== $BIN"
  GET='
import http.client, sys
port, gport, count = map(int, sys.argv[1:4])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(count):
    c.request("GET", PATH); r = c.getresponse(); r.read(); assert r.status == 200, r.status'
  measure "token GET /healthz" "PATH = \"/healthz\"$GET"
  measure "token GET / (issue)" "PATH = \"/\"$GET"
  for OBJECT in "4096 4 KiB" "1048576 1 MiB" "4194304 4 MiB"; do
    read -r SIZE NAME <<<"$OBJECT"
    measure "gateway presigned GET $NAME" "SIZE = $SIZE"'
import http.client, sys, urllib.parse, boto3
from botocore.config import Config
port, gport, count = map(int, sys.argv[1:4])
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{gport}", region_name="us-east-1",
                  aws_access_key_id="TGBENCHROOT", aws_secret_access_key="bench-root-secret-0123456789abcdefghijklmn",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
try:  # stored once, by the warm-up: the upload is not counted
    s3.head_object(Bucket="bench", Key=f"object-{SIZE}")
except s3.exceptions.ClientError:
    s3.put_object(Bucket="bench", Key=f"object-{SIZE}", Body=b"x" * SIZE)
target = urllib.parse.urlsplit(s3.generate_presigned_url("get_object", Params={"Bucket": "bench", "Key": f"object-{SIZE}"}, ExpiresIn=3600))
path = target.path + "?" + target.query
c = http.client.HTTPConnection("127.0.0.1", gport, timeout=60)
for _ in range(count):
    c.request("GET", path); r = c.getresponse(); body = r.read(); assert r.status == 200 and len(body) == SIZE, r.status'
  done
  bench_cleanup
done
