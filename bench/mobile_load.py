"""The load of bench/mobile.sh: the mobile Storage API on a running server.

(a) N objects written straight through the S3 gateway (boto3, root credentials, threads), then
    the collection listed by pages of 100 following the `next` links from the first page to the
    last: ms per page at the start, the middle and the end, and end/start (goal ~1: cursor-based
    paging inside). For reference, the same pages asked for by a bare `offset=` too.
(b) change-feed latency: a reader long-polls `changes?wait=30` while a writer PUTs objects one
    at a time through the Storage API; latency = the reader's answer − the PUT's response
    (commit), p50/p99 over CHANGES changes.
"""
import argparse
import statistics
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import boto3
import requests
from botocore.config import Config

API = "/mobile/platform/storage/collections"


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def create_objects(args):
    config = Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 3},
                    max_pool_connections=args.threads)
    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{args.gateway_port}", region_name="us-east-1",
                      aws_access_key_id=args.key_id, aws_secret_access_key=args.secret, config=config)
    started = time.perf_counter()

    def put_range(start):
        for i in range(start, min(start + 500, args.objects)):
            s3.put_object(Bucket=args.bucket, Key=f"listing/obj-{i:07d}", Body=b"x")

    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(put_range, range(0, args.objects, 500)))
    elapsed = time.perf_counter() - started
    print(f"created {args.objects} objects through the S3 gateway in {elapsed:.1f} s "
          f"({args.objects / elapsed:.0f}/s, {args.threads} threads)", flush=True)


def listing(args, http):
    base = f"http://127.0.0.1:{args.port}{API}/listing/objects"
    url, params = base, {"limit": 100}
    times, ids = [], []
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        started = time.perf_counter()
        response = http.get(url, params=params, timeout=60)
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, (response.status_code, response.text[:300])
        body = response.json()
        ids += [item["id"] for item in body["items"]]
        following = next((l["href"] for l in body.get("links", []) if l.get("rel") == "next"), None)
        if not body["hasMore"] or not following:
            break
        url, params = urllib.parse.urljoin(response.url, following), None
    assert ids == [f"obj-{i:07d}" for i in range(args.objects)], f"the walk saw {len(ids)} ids, expected {args.objects}"
    pages = len(times)
    window = max(1, min(10, pages // 3))
    start = statistics.median(times[:window])
    middle = statistics.median(times[pages // 2 - window // 2: pages // 2 - window // 2 + window])
    end = statistics.median(times[-window:])
    print(f"listing {args.objects} objects by pages of 100 following next links ({pages} pages, median of {window} pages each):")
    print(f"  start  {start * 1e3:7.2f} ms/page")
    print(f"  middle {middle * 1e3:7.2f} ms/page")
    print(f"  end    {end * 1e3:7.2f} ms/page")
    print(f"  end/start {end / start:.2f} (goal ~1)   whole walk {sum(times):.1f} s")
    # For reference: the same depths by a bare offset (no cursor).
    line = []
    for offset in (0, args.objects // 2, max(0, args.objects - 100)):
        samples = []
        for _ in range(5):
            started = time.perf_counter()
            response = http.get(base, params={"limit": 100, "offset": offset}, timeout=60)
            samples.append(time.perf_counter() - started)
            assert response.status_code == 200, response.text[:300]
        line.append(f"offset={offset}: {statistics.median(samples) * 1e3:.2f} ms")
    print("  by a bare offset=, for reference: " + ", ".join(line), flush=True)


def feed_latency(args, token):
    base = f"http://127.0.0.1:{args.port}{API}/feed"
    headers = {"Authorization": f"Bearer {token}"}
    reader_http, writer_http = requests.Session(), requests.Session()
    reader_http.headers.update(headers)
    writer_http.headers.update(headers)
    # One change before the first cursor: a cursor taken on a feed that never had a change is
    # not the point here (the interop test test_a_cursor_of_an_empty_feed_works covers it).
    primer = writer_http.put(f"{base}/objects/primer", data=b"primer", headers={"Content-Type": "text/plain"}, timeout=30)
    assert primer.status_code in (200, 201), primer.text
    first = reader_http.get(f"{base}/changes", timeout=30)
    assert first.status_code == 200, first.text
    cursor = first.json()["cursor"]
    received, condition, stop, errors = {}, threading.Condition(), threading.Event(), []

    def reader():
        nonlocal cursor
        while not stop.is_set():
            try:
                response = reader_http.get(f"{base}/changes", params={"since": cursor, "wait": 30}, timeout=60)
            except requests.RequestException as error:
                errors.append(repr(error))
                return
            now = time.perf_counter()
            if response.status_code != 200:
                errors.append(f"{response.status_code} {response.text[:200]}")
                return
            body = response.json()
            cursor = body["cursor"]
            with condition:
                for item in body["items"]:
                    received.setdefault(item["id"], now)
                condition.notify_all()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    time.sleep(0.5)
    latencies = []
    for i in range(args.changes):
        object_id = f"change-{i:05d}"
        response = writer_http.put(f"{base}/objects/{object_id}", data=b"change", headers={"Content-Type": "text/plain"}, timeout=30)
        committed = time.perf_counter()
        assert response.status_code in (200, 201), response.text
        with condition:
            if not condition.wait_for(lambda: object_id in received or errors, timeout=35):
                raise SystemExit(f"the reader did not see {object_id} within 35 s")
        if errors:
            raise SystemExit(f"reader failed: {errors}")
        latencies.append(received[object_id] - committed)
        time.sleep(0.02)  # the reader is parked in its next long poll before the next PUT
    stop.set()
    ms = [latency * 1e3 for latency in latencies]
    early = sum(1 for value in ms if value < 0)
    print(f"change-feed latency, PUT response (commit) -> waiting reader's answer, {len(ms)} changes:")
    print(f"  p50 {percentile(ms, 50):.2f} ms   p99 {percentile(ms, 99):.2f} ms   max {max(ms):.2f} ms   min {min(ms):.2f} ms"
          + (f"   ({early} answered before the writer had its response)" if early else ""), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gateway-port", type=int, required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--bucket", default="bench")
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    token = open(args.token_file).read().strip()
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {token}"
    create_objects(args)
    listing(args, http)
    feed_latency(args, token)


if __name__ == "__main__":
    main()
