#!/usr/bin/env python3
"""Set-up and the memory run of bench/rgw.sh: the gateway on the s3 backend against RGW itself.

  rgw_load.py prepare WORKDIR GATEWAY_URL KEY_ID SECRET RGW_URL RGW_KEY RGW_SECRET BACKEND_BUCKET
      Uploads N1M 1 MiB and N4K 4 KiB objects through the gateway (root credentials, bucket
      `bench`), which stores them in RGW's BACKEND_BUCKET; writes request lists for wrk
      (bench/gateway.lua): WORKDIR/{gateway,rgw}-{get-1m,get-4k,put-1m}.txt, each a presigned
      SigV4 target of the same object, for the gateway and for RGW directly, so both serve the
      same bytes. Checks a sample through both.
  rgw_load.py memory GATEWAY_URL KEY_ID SECRET CONCURRENCY MIB
      CONCURRENCY uploads of MIB MiB each at once through the gateway (presigned PUTs with a
      Content-Length, bodies generated as they are sent), then CONCURRENCY downloads of them at
      once, read and dropped; checks every byte count. Prints the seconds each phase took.
"""
import hashlib
import os
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import boto3
import requests
from botocore.config import Config

BUCKET = "bench"
N1M = int(os.environ.get("BENCH_OBJECTS_1M", "64"))
N4K = int(os.environ.get("BENCH_OBJECTS_4K", "1024"))
NPUT = int(os.environ.get("BENCH_PUT_KEYS", "64"))
EXPIRES = 6 * 3600


def client(endpoint, key, secret):
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key=secret,
                        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4", retries={"max_attempts": 1},
                                      max_pool_connections=16))


def target(url: str) -> str:
    rest = url.split("://", 1)[1]
    return rest[rest.index("/"):]


def prepare(workdir, gateway, key_id, secret, rgw, rgw_key, rgw_secret, backend_bucket):
    gw = client(gateway, key_id, secret)
    direct = client(rgw, rgw_key, rgw_secret)
    try:
        gw.head_bucket(Bucket=BUCKET)
    except Exception:
        gw.create_bucket(Bucket=BUCKET)
    items = [(f"get-1m/obj-{i:04d}", 1024 * 1024) for i in range(N1M)] + [(f"get-4k/obj-{i:05d}", 4096) for i in range(N4K)]

    def upload(item):
        key, size = item
        body = os.urandom(size)
        gw.put_object(Bucket=BUCKET, Key=key, Body=body)
        return key, hashlib.sha256(body).hexdigest()

    with ThreadPoolExecutor(8) as pool:
        digests = dict(pool.map(upload, items))
    for side, s3, bucket in (("gateway", gw, BUCKET), ("rgw", direct, backend_bucket)):
        lists = {"get-1m": [], "get-4k": [], "put-1m": []}
        for key, _ in items:
            url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=EXPIRES)
            lists["get-1m" if key.startswith("get-1m/") else "get-4k"].append(target(url))
        for i in range(NPUT):
            url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": f"put-1m/obj-{i:04d}"}, ExpiresIn=EXPIRES)
            lists["put-1m"].append(target(url))
        for name, lines in lists.items():
            with open(os.path.join(workdir, f"{side}-{name}.txt"), "w") as f:
                f.write("\n".join(lines) + "\n")
        # The same bytes on both sides.
        base = gateway if side == "gateway" else rgw
        for line in (lists["get-1m"][0], lists["get-4k"][-1]):
            with urllib.request.urlopen(base + line) as response:
                body = response.read()
            key = line.split("?")[0].split("/", 2)[2]
            assert hashlib.sha256(body).hexdigest() == digests[key], (side, key)


class Generated:
    """A body of `size` bytes made as it is read (a length, so requests sends Content-Length)."""

    def __init__(self, size: int, seed: int):
        self.size = size
        self.sent = 0
        self.block = bytes((seed + i) % 251 for i in range(1024 * 1024))

    def __len__(self):
        return self.size

    def read(self, n=-1):
        if self.sent >= self.size:
            return b""
        n = min(n if n and n > 0 else len(self.block), len(self.block), self.size - self.sent)
        self.sent += n
        return self.block[:n]


def memory(gateway, key_id, secret, concurrency, mib):
    s3 = client(gateway, key_id, secret)
    try:
        s3.head_bucket(Bucket=BUCKET)
    except Exception:
        s3.create_bucket(Bucket=BUCKET)
    size = mib * 1024 * 1024
    keys = [f"memory/obj-{i:03d}" for i in range(concurrency)]
    puts = [s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": k}, ExpiresIn=EXPIRES) for k in keys]
    gets = [s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": k}, ExpiresIn=EXPIRES) for k in keys]
    start = threading.Barrier(concurrency)

    def put(i):
        start.wait()
        answer = requests.put(puts[i], data=Generated(size, i), timeout=600)
        assert answer.status_code == 200, (answer.status_code, answer.text[:300])

    def get(i):
        start.wait()
        received = 0
        with requests.get(gets[i], stream=True, timeout=600) as answer:
            assert answer.status_code == 200, answer.status_code
            for chunk in answer.iter_content(1024 * 1024):
                received += len(chunk)
        assert received == size, (i, received)

    for name, work in (("upload", put), ("download", get)):
        began = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(work, range(concurrency)))
        print(f"{name} {concurrency} x {mib} MiB: {time.monotonic() - began:.1f} s", file=sys.stderr)
    for k in keys:
        s3.delete_object(Bucket=BUCKET, Key=k)


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(*sys.argv[2:10])
    elif sys.argv[1] == "memory":
        memory(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    else:
        sys.exit(__doc__)
