#!/usr/bin/env bash
# CompleteMultipartUpload of 1 GiB in 100 parts, release build, local store, through the gateway
# (boto3, SigV4). Reports the completion's time beside that of a one-part upload of 5 MiB
# completed in the same run (the baseline: what a completion costs whatever its size), the bytes
# the server wrote to storage during the completion (/proc/PID/io write_bytes: SQLite's WAL, no
# object bytes) and the files under objects/ before and after (the same: the object is its
# parts). Then reads the object back whole and checks its MD5 and a range across a part boundary.
# Goal: the 1 GiB completion under 200 ms, writing no object bytes.
#   bash bench/complete.sh [rounds]   (default 3; medians)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
. bench/lib.sh
bench_root complete
bench_config "$SECRET" bench
start_server "$BIN"
python3 - "http://127.0.0.1:$GPORT" "$KEY_ID" "$SECRET" "$PID" "$WORK/data/objects" "$ROUNDS" <<'PY'
import hashlib, os, statistics, sys, time
from concurrent.futures import ThreadPoolExecutor
import boto3
from botocore.config import Config

endpoint, key_id, secret, pid, objects, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id, aws_secret_access_key=secret,
                  config=Config(s3={"addressing_style": "path"}, signature_version="s3v4", max_pool_connections=8))
s3.create_bucket(Bucket="bench")
GiB, MiB, PARTS = 1 << 30, 1 << 20, 100
sizes = [GiB // PARTS] * (PARTS - 1) + [GiB - (GiB // PARTS) * (PARTS - 1)]
block = os.urandom(max(sizes))

def written():
    for line in open(f"/proc/{pid}/io"):
        if line.startswith("write_bytes:"):
            return int(line.split()[1])

def files():
    return sum(len(names) for _, _, names in os.walk(objects))

def upload(key, part_sizes):
    upload_id = s3.create_multipart_upload(Bucket="bench", Key=key)["UploadId"]
    def put(n):
        return {"PartNumber": n, "ETag": s3.upload_part(Bucket="bench", Key=key, UploadId=upload_id, PartNumber=n,
                                                      Body=block[:part_sizes[n - 1]])["ETag"]}
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(put, range(1, len(part_sizes) + 1)))
    os.sync()
    before_bytes, before_files = written(), files()
    started = time.perf_counter()
    s3.complete_multipart_upload(Bucket="bench", Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts})
    elapsed = time.perf_counter() - started
    return elapsed, written() - before_bytes, files() - before_files

big, small, wrote, grew = [], [], [], []
for round in range(rounds):
    t, _, _ = upload(f"small-{round}", [5 * MiB])
    small.append(t)
    t, w, g = upload(f"big-{round}", sizes)
    big.append(t); wrote.append(w); grew.append(g)
    print(f"round {round + 1}: 1 GiB of {PARTS} parts completed in {t * 1000:.1f} ms, server wrote {w / 1024:.0f} KiB, "
          f"files {g:+d}; one 5 MiB part in {small[-1] * 1000:.1f} ms")

# The object reads back as its parts: whole (MD5) and across a part boundary.
expected = hashlib.md5()
for size in sizes:
    expected.update(block[:size])
got = hashlib.md5()
body = s3.get_object(Bucket="bench", Key="big-0")["Body"]
for chunk in body.iter_chunks(chunk_size=4 * MiB):
    got.update(chunk)
assert got.hexdigest() == expected.hexdigest(), "the 1 GiB object does not read back as its parts"
edge = sizes[0]
ranged = s3.get_object(Bucket="bench", Key="big-0", Range=f"bytes={edge - 10}-{edge + 9}")["Body"].read()
assert ranged == block[sizes[0] - 10:sizes[0]] + block[:10], "a range across a part boundary"

b, s = statistics.median(big), statistics.median(small)
print(f"median: 1 GiB / {PARTS} parts {b * 1000:.1f} ms; 5 MiB / 1 part {s * 1000:.1f} ms (ratio {b / s:.2f}); "
      f"server wrote {statistics.median(wrote) / 1024:.0f} KiB per completion; object files {max(grew):+d}")
print(f"goal < 200 ms and no object bytes written: " + ("ok" if b < 0.2 and max(wrote) < MiB and max(grew) <= 0 else "NOT MET"))
PY
