#!/usr/bin/env python3
"""Set-up for bench/gateway.sh: objects in the gateway and the same bytes in nginx's root, and
presigned request lists for wrk (bench/gateway.lua) to cycle through.

  gateway_load.py prepare WORKDIR ENDPOINT NGINX_URL ACCESS_KEY_ID SECRET

Uploads N1M 1 MiB objects and N4K 4 KiB objects to the gateway with boto3 (root credentials),
writes the same bytes under WORKDIR/nginx-root/<bucket>/<key> (same disk), and writes
WORKDIR/get-1m.txt, get-4k.txt, put-1m.txt: one request target per line (path?query of a
boto3-presigned SigV4 URL). The same lines are sent to nginx, which ignores the query string,
so both servers see identical requests. Checks a sample through both servers before returning.
"""
import hashlib
import os
import sys
import urllib.request

import boto3
from botocore.config import Config

BUCKET = "bench"
N1M = int(os.environ.get("BENCH_OBJECTS_1M", "64"))
N4K = int(os.environ.get("BENCH_OBJECTS_4K", "1024"))
NPUT = int(os.environ.get("BENCH_PUT_KEYS", "64"))
EXPIRES = 6 * 3600


def target(url: str) -> str:
    rest = url.split("://", 1)[1]
    return rest[rest.index("/"):]


def prepare(workdir, endpoint, nginx_url, access_key_id, secret):
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=access_key_id,
                      aws_secret_access_key=secret,
                      config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                    retries={"max_attempts": 1}, max_pool_connections=16))
    try:
        s3.head_bucket(Bucket=BUCKET)
    except Exception:
        s3.create_bucket(Bucket=BUCKET)
    root = os.path.join(workdir, "nginx-root", BUCKET)
    lists = {"get-1m": [], "get-4k": [], "put-1m": []}
    samples = []
    from concurrent.futures import ThreadPoolExecutor

    def upload(item):
        key, size = item
        body = os.urandom(size)
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        path = os.path.join(root, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(body)
        return key, hashlib.sha256(body).hexdigest()

    items = [(f"get-1m/obj-{i:04d}", 1024 * 1024) for i in range(N1M)] + [(f"get-4k/obj-{i:05d}", 4096) for i in range(N4K)]
    with ThreadPoolExecutor(8) as pool:
        for key, digest in pool.map(upload, items):
            lists["get-1m" if key.startswith("get-1m/") else "get-4k"].append(
                target(s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key}, ExpiresIn=EXPIRES)))
            if len(samples) < 3 or key.endswith("0007"):
                samples.append((lists["get-1m" if key.startswith("get-1m/") else "get-4k"][-1], digest))
    os.makedirs(os.path.join(root, "put-1m"), exist_ok=True)
    for i in range(NPUT):
        lists["put-1m"].append(target(s3.generate_presigned_url(
            "put_object", Params={"Bucket": BUCKET, "Key": f"put-1m/obj-{i:04d}"}, ExpiresIn=EXPIRES)))
    for name, lines in lists.items():
        with open(os.path.join(workdir, f"{name}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    # The same request line must return the same bytes from both servers.
    for path, digest in samples:
        for base in (endpoint, nginx_url):
            with urllib.request.urlopen(base + path, timeout=30) as response:
                got = hashlib.sha256(response.read()).hexdigest()
            if got != digest:
                sys.exit(f"sample {path} from {base}: wrong bytes")
    # And a presigned PUT must be accepted by both.
    body = os.urandom(1024 * 1024)
    for base in (endpoint, nginx_url):
        request = urllib.request.Request(base + lists["put-1m"][0], data=body, method="PUT")
        with urllib.request.urlopen(request, timeout=30) as response:
            if response.status not in (200, 201, 204):
                sys.exit(f"PUT to {base}: {response.status}")
    print(f"prepared {N1M} x 1 MiB, {N4K} x 4 KiB objects, {NPUT} PUT targets", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 7 or sys.argv[1] != "prepare":
        sys.exit(__doc__)
    prepare(*sys.argv[2:])
