#!/usr/bin/env bash
# The read path's object cache under mixed load, release build, local store: 16 readers GET a
# hot set of small objects while 16 writers PUT other keys of the same bucket, both at once
# (wrk, bench/gateway.lua, SigV4-presigned targets). Reports the cache's hit rate over the run,
# from the server's own counters (`tollgate_store_cache_lookups_total{result="hit"|"miss"}` on
# /metrics), and both sides' throughput. Goal: hit rate > 90 % (before per-key invalidation,
# every write emptied the whole cache, and the readers mostly missed).
#   bash bench/cache.sh [duration-seconds] [readers] [writers] [hot-objects]   (defaults 10, 16, 16, 64)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
READERS=${2:-16}
WRITERS=${3:-16}
HOT=${4:-64}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
. bench/lib.sh
bench_root cache
bench_config "$SECRET" bench
start_server "$BIN"
python3 - "$WORK" "http://127.0.0.1:$GPORT" "$KEY_ID" "$SECRET" "$HOT" <<'PY'
import sys, os, boto3
from botocore.config import Config
work, endpoint, key_id, secret, hot = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id, aws_secret_access_key=secret,
                  config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
s3.create_bucket(Bucket="bench")
def target(url):  # the request target: path and query
    return "/" + url.split("://", 1)[1].split("/", 1)[1]
gets, puts = [], []
for i in range(hot):
    s3.put_object(Bucket="bench", Key=f"hot/{i:03d}", Body=os.urandom(4096))
    gets.append(target(s3.generate_presigned_url("get_object", Params={"Bucket": "bench", "Key": f"hot/{i:03d}"}, ExpiresIn=3600)))
for i in range(2000):
    puts.append(target(s3.generate_presigned_url("put_object", Params={"Bucket": "bench", "Key": f"cold/{i:04d}"}, ExpiresIn=3600)))
open(f"{work}/gets.txt", "w").write("\n".join(gets) + "\n")
open(f"{work}/puts.txt", "w").write("\n".join(puts) + "\n")
PY
counter() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v r="$1" '$0 ~ "^tollgate_store_cache_lookups_total\\{result=\"" r "\"\\}" {print $2}' | head -1; }
H0=$(counter hit); M0=$(counter miss)
wrk -t1 -c"$READERS" -d"${DURATION}s" -s bench/gateway.lua "http://127.0.0.1:$GPORT" -- "$WORK/gets.txt" > "$WORK/gets.out" &
READ_PID=$!
wrk -t1 -c"$WRITERS" -d"${DURATION}s" -s bench/gateway.lua "http://127.0.0.1:$GPORT" -- "$WORK/puts.txt" PUT 4096 > "$WORK/puts.out"
wait "$READ_PID"
H1=$(counter hit); M1=$(counter miss)
for side in gets puts; do
  if grep -q "Non-2xx\|Socket errors" "$WORK/$side.out"; then echo "errors in $side:" >&2; cat "$WORK/$side.out" >&2; exit 1; fi
done
python3 - "${H0:-0}" "${M0:-0}" "${H1:-0}" "${M1:-0}" "$(awk '/Requests\/sec/ {print $2}' "$WORK/gets.out")" "$(awk '/Requests\/sec/ {print $2}' "$WORK/puts.out")" "$READERS" "$WRITERS" "$HOT" <<'PY'
import sys
h0, m0, h1, m1, gets, puts = (float(x) for x in sys.argv[1:7])
readers, writers, hot = sys.argv[7:10]
hits, misses = h1 - h0, m1 - m0
rate = hits / (hits + misses) if hits + misses else 0.0
print(f"{readers} readers of {hot} hot 4 KiB objects: {gets:.0f} GET/s; {writers} writers of other keys: {puts:.0f} PUT/s")
print(f"object cache lookups: {hits:.0f} hits, {misses:.0f} misses")
print(f"hit rate {rate * 100:.1f} % (goal > 90 %): " + ("ok" if rate > 0.9 else "BELOW GOAL"))
PY
