#!/usr/bin/env bash
# The mobile Storage API (issue 42), release build:
#   (a) listing a collection of N objects (default 100 000) by pages of 100: the objects are
#       written straight through the S3 gateway (boto3, THREADS threads, default 8), then the listing is walked
#       from the first page to the last by its `next` links; prints ms per page at the start, the
#       middle and the end and the ratio end/start (goal ~1: the paging is cursor-based inside),
#       and for reference the same depths asked for by a bare `offset=`;
#   (b) change-feed latency: a reader long-polls `changes?wait=30` while a writer PUTs objects one
#       at a time; p50/p99 from the PUT's response (commit) to the reader's answer (CHANGES,
#       default 200).
#   bash bench/mobile.sh                       (TOLLGATE_BIN=path: that binary instead of a build)
#   N=5000 CHANGES=100 bash bench/mobile.sh    (a smaller run)
# The caller is an app user with a login token (RS256, from a loopback JWKS: bench/jwks_server.py)
# whose DefaultRole, `default`, has Read-Write on both collections.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c 'import jwt, cryptography, boto3, requests' 2>/dev/null || python3 -m pip install -q pyjwt cryptography boto3 requests
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}
N=${N:-100000}
CHANGES=${CHANGES:-200}
THREADS=${THREADS:-8}
. bench/lib.sh
export LOG_LEVEL=${LOG_LEVEL:-warning}
bench_scratch mobile
SECRET=bench-root-secret-0123456789abcdefghijklmn
KEY_ID=TGBENCHROOT bench_config "$SECRET" bench \
  '"Buckets": ["bench"], "RateLimits": {"PerAddressPerMinute": 0, "PerSubjectPerMinute": 0}'
bench_jwks
python3 - "$WORK/config.json" <<'PY'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
config["Collections"] = {
    "listing": {"Type": "shared", "Bucket": "bench", "Prefix": "listing/", "ReadWrite": ["default"]},
    "feed": {"Type": "shared", "Bucket": "bench", "Prefix": "feed/", "ReadWrite": ["default"]},
}
json.dump(config, open(path, "w"))
PY
start_server "$BIN"
echo "binary: $BIN   objects: $N   changes: $CHANGES   threads: $THREADS"
python3 bench/mobile_load.py --port "$PORT" --gateway-port "$GPORT" --token-file "$WORK/token" \
  --key-id TGBENCHROOT --secret "$SECRET" --bucket bench --objects "$N" --changes "$CHANGES" --threads "$THREADS"
