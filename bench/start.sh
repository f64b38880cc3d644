#!/usr/bin/env bash
# Start-up and listing with a large local store, release build: a generator writes OBJECTS
# objects (default 1 000 000, 1 byte each) straight into a store (rows in SQLite, files under
# objects/ab/00, as the store lays them out), then the server is started on it: the time until
# /healthz answers, and the server's peak RSS (VmHWM) once it does; then ListObjectsV2 pages of
# 1 000 keys at the start, the middle and the end of the bucket (median of 5 each, boto3).
# Goals: start < 5 s, peak RSS < 150 MiB, the three pages alike.
#   bash bench/start.sh [objects]
set -euo pipefail
cd "$(dirname "$0")/.."
OBJECTS=${1:-1000000}
. bench/lib.sh
bench_root start
bench_config "$SECRET" bench '"Buckets": ["bench"]'
start_server "$BIN"      # makes the store and its schema, and the bucket
stop_server
echo "writing $OBJECTS objects into the store directly" >&2
python3 - "$WORK/data/store" "$OBJECTS" <<'PY'
import os, sqlite3, sys, time
store, count = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(os.path.join(store, "meta.sqlite"))
now = int(time.time() * 1000)
rows = []
made = set()
for i in range(count):
    raw = bytearray(os.urandom(16)); raw[1] = 0
    file_id = raw.hex()
    directory = os.path.join(store, "objects", file_id[:2], file_id[2:4])
    if directory not in made:
        os.makedirs(directory, exist_ok=True); made.add(directory)
    fd = os.open(os.path.join(directory, file_id), os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"x"); os.close(fd)
    rows.append(("bench", f"obj/{i:07d}".encode(), 1, '"9dd4e461268c8034f5c8564e155c67a6"', now, "{}", file_id))
    if len(rows) == 50000:
        db.executemany("INSERT INTO object (bucket, key, size, etag, last_modified_ms, user_metadata, file_id) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        rows.clear()
db.executemany("INSERT INTO object (bucket, key, size, etag, last_modified_ms, user_metadata, file_id) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
db.commit()
db.close()
PY
sync
"$BIN" serve --config "$WORK/config.json" >> "$WORK/server.log" 2>&1 &
PID=$!
STARTED=$(date +%s.%N)
for _ in $(seq 6000); do
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break
  kill -0 "$PID" 2>/dev/null || { tail -n 20 "$WORK/server.log" >&2; exit 1; }
  sleep 0.01
done
READY=$(date +%s.%N)
HWM=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
python3 - "http://127.0.0.1:$GPORT" "$KEY_ID" "$SECRET" "$OBJECTS" "$STARTED" "$READY" "$HWM" <<'PY'
import statistics, sys, time, boto3
from botocore.config import Config
endpoint, key_id, secret, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
started, ready, hwm = float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id, aws_secret_access_key=secret,
                  config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
def page(after):
    times = []
    for _ in range(5):
        t = time.perf_counter()
        answer = s3.list_objects_v2(Bucket="bench", StartAfter=after, MaxKeys=1000)
        times.append(time.perf_counter() - t)
        assert answer["KeyCount"] == min(1000, count - int(after[4:] or -1) - 1 if after else min(1000, count)), answer["KeyCount"]
    return statistics.median(times) * 1000
start = page("")
middle = page(f"obj/{count // 2:07d}")
end = page(f"obj/{count - 1001:07d}")
print(f"{count} objects: ready in {ready - started:.2f} s (goal < 5 s), peak RSS {hwm / 1024:.0f} MiB (goal < 150 MiB)")
print(f"ListObjectsV2 page of 1000 keys: start {start:.1f} ms, middle {middle:.1f} ms, end {end:.1f} ms")
PY
