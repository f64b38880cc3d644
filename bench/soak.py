#!/usr/bin/env python3
"""Soak test driver (bench/soak.sh sets it up): N concurrent boto3 clients for T seconds of mixed
PUT / GET / DELETE / LIST / multipart on a small pool of shared keys, with one `kill -9` and
restart of the server in the middle.

  soak.py --bin BIN --config CONFIG --clients N --seconds T

Every operation is recorded as an interval [start, end] on one monotonic clock, with its outcome.
A write (PUT, CompleteMultipartUpload, DELETE = a write of "absent") is
  - acknowledged: a 2xx answer; it took effect at one instant inside its interval;
  - refused: a 4xx answer; it took effect never;
  - uncertain: no answer (connection error, 5xx, timeout); it took effect inside its interval, or
    never, or (no answer, so no end is known) at any later instant: its end is taken as +inf.
A read at [gs, ge] may return the value of write W (or the initial "absent") iff
  1. W is not refused and W.start < ge (W could have taken effect before the read did), and
  2. no acknowledged write W2 has W.end <= W2.start and W2.end <= gs (W2 certainly took effect
     after W and before the read began, so W was certainly replaced).
GET checks the body's SHA-256 against the values so allowed (404 NoSuchKey = absent); LIST checks
every key of the pool the same way: a listed key's size must be one allowed, an unlisted key must
be allowed to be absent. A violation is a mismatch.

The kill window runs from the kill to 2 s after the restarted server answers; a request whose
interval overlaps it and fails is counted as a window error. Outside the window, every 5xx and
every connection error is a failure. Clients retry a failed operation (same key, same body) with
a short back-off until it succeeds, is refused, or the run ends.

Exit status 1 if mismatches > 0 or 5xx/connection errors outside the window > 0.
"""
import argparse
import collections
import hashlib
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import boto3
import botocore.exceptions
from botocore.config import Config

BUCKET = "soak"
KEYS = [f"soak/key-{i:02d}" for i in range(24)]
MIB = 1024 * 1024
WINDOW_GRACE = 2.0
now = time.monotonic


class Write:
    __slots__ = ("start", "end", "digest", "size", "state")

    def __init__(self, start, digest, size):
        self.start, self.end, self.digest, self.size, self.state = start, math.inf, digest, size, "pending"


# The state before the run: "absent", written at the beginning of time. Its end is finite so that
# it is never taken as replaced by itself (a write is replaced only by one that began after it ended).
INITIAL = Write(-math.inf, None, None)
INITIAL.end, INITIAL.state = -1e18, "ack"


class History:
    """Per key, every write attempt in the order they started."""

    def __init__(self):
        self.lock = threading.Lock()
        self.writes = {key: [INITIAL] for key in KEYS}

    def begin(self, key, digest, size):
        write = Write(now(), digest, size)
        with self.lock:
            self.writes[key].append(write)
        return write

    def allowed(self, key, read_start, read_end):
        """The writes whose value a read over [read_start, read_end] may return."""
        with self.lock:
            writes = list(self.writes[key])
        # The latest start among acknowledged writes that ended before the read began: any write
        # that ended at or before that start was certainly replaced.
        cutoff = max((w.start for w in writes if w.state == "ack" and w.end <= read_start), default=-math.inf)
        return [w for w in writes if w.state != "refused" and w.start < read_end and not w.end <= cutoff]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = collections.Counter()          # op -> successful operations
        self.attempts = collections.Counter()     # op -> attempts
        self.errors = collections.Counter()       # (op, code, "window"/"outside") -> count
        self.mismatches = []
        self.server_failures_outside = 0          # 5xx + connection errors outside the window
        self.bytes_written = 0
        self.bytes_read = 0

    def add(self, **kw):
        with self.lock:
            for name, value in kw.items():
                setattr(self, name, getattr(self, name) + value)


class Failure(Exception):
    def __init__(self, code, status, uncertain):
        super().__init__(code)
        self.code, self.status, self.uncertain = code, status, uncertain


def classify(error):
    """(code, HTTP status or None, uncertain: the server may have acted)."""
    if isinstance(error, botocore.exceptions.ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = error.response.get("Error", {}).get("Code") or str(status)
        return code, status, status is None or status >= 500
    return type(error).__name__, None, True


class Server:
    def __init__(self, binary, config):
        self.binary, self.config = os.path.abspath(binary), Path(config).resolve()
        self.dir = self.config.parent
        cfg = json.loads(self.config.read_text())
        self.token_url = f"http://127.0.0.1:{cfg['Port']}"
        self.gateway_url = f"http://127.0.0.1:{cfg['GatewayPort']}"
        self.process = None
        self.lives = []   # (pid, VmHWM MiB) of each server life

    def start(self, timeout=60):
        log = open(self.dir / "server.log", "ab")
        env = dict(os.environ, LOG_LEVEL=os.environ.get("LOG_LEVEL", "warning"))
        self.process = subprocess.Popen([self.binary, "serve", "--config", str(self.config)], cwd=self.dir,
                                        stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = now() + timeout
        while now() < deadline:
            if self.process.poll() is not None:
                sys.exit(f"tollgate exited with {self.process.returncode}; log {self.dir / 'server.log'}")
            try:
                with urllib.request.urlopen(self.token_url + "/healthz", timeout=1):
                    with socket.create_connection(("127.0.0.1", int(self.gateway_url.rsplit(":", 1)[1])), timeout=1):
                        return
            except OSError:
                time.sleep(0.05)
        sys.exit("tollgate did not become ready")

    def hwm_mib(self):
        try:
            for line in open(f"/proc/{self.process.pid}/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def kill9(self):
        self.lives.append((self.process.pid, self.hwm_mib()))
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.lives.append((self.process.pid, self.hwm_mib()))
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Window:
    """The kill window: from the kill to WINDOW_GRACE after the new server is ready."""

    def __init__(self):
        self.start = math.inf
        self.end = math.inf

    def overlaps(self, start, end):
        return start <= self.end and end >= self.start


def client_loop(index, s3, history, stats, window, deadline, args):
    rng = random.Random(args.seed * 1000 + index)

    def attempt(op, call):
        """Runs call() until it succeeds or is refused, or the run ends. Returns its result or raises
        the last Failure. call() gets the attempt's start time and reports its own end."""
        while True:
            with stats.lock:
                stats.attempts[op] += 1
            started = now()
            try:
                return call(started)
            except Failure as failure:
                ended = now()
                in_window = window.overlaps(started, ended)
                where = "window" if in_window else "outside"
                with stats.lock:
                    stats.errors[(op, failure.code, where)] += 1
                    if failure.uncertain and not in_window and (failure.status is None or failure.status >= 500):
                        stats.server_failures_outside += 1
                if not failure.uncertain or now() >= deadline:
                    raise
                time.sleep(0.05 + rng.random() * 0.2)

    def run(fn):
        try:
            return fn()
        except Failure:
            raise
        except Exception as error:  # noqa: BLE001 — every client-side failure is classified
            raise Failure(*classify(error)) from None

    def body(size):
        data = rng.randbytes(size) if size <= 64 * 1024 else os.urandom(size)
        return data, hashlib.sha256(data).hexdigest()

    def random_size():
        r = rng.random()
        if r < 0.15:
            return rng.randrange(0, 1024)
        if r < 0.6:
            return rng.randrange(1024, 128 * 1024)
        if r < 0.9:
            return rng.randrange(128 * 1024, MIB)
        return rng.randrange(MIB, args.max_mib * MIB + 1)

    def do_put(key):
        data, digest = body(random_size())

        def call(_):
            write = history.begin(key, digest, len(data))
            try:
                run(lambda: s3.put_object(Bucket=BUCKET, Key=key, Body=data))
            except Failure as failure:
                write.state = "uncertain" if failure.uncertain else "refused"
                raise
            write.end, write.state = now(), "ack"
            stats.add(bytes_written=len(data))
        attempt("put", call)

    def do_delete(key):
        def call(_):
            write = history.begin(key, None, None)
            try:
                run(lambda: s3.delete_object(Bucket=BUCKET, Key=key))
            except Failure as failure:
                write.state = "uncertain" if failure.uncertain else "refused"
                raise
            write.end, write.state = now(), "ack"
        attempt("delete", call)

    def do_get(key):
        def call(started):
            def fetch():
                try:
                    response = s3.get_object(Bucket=BUCKET, Key=key)
                except botocore.exceptions.ClientError as error:
                    if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                        return None, 0
                    raise
                data = response["Body"].read()
                return hashlib.sha256(data).hexdigest(), len(data)
            digest, size = run(fetch)
            ended = now()
            stats.add(bytes_read=size)
            allowed = history.allowed(key, started, ended)
            if not any(w.digest == digest for w in allowed):
                with stats.lock:
                    stats.mismatches.append(
                        f"GET {key} at [{started:.3f}, {ended:.3f}]: got {'404' if digest is None else digest[:16] + f'… ({size} B)'}, "
                        f"allowed {sorted({('absent' if w.digest is None else w.digest[:16] + '…') for w in allowed})}")
        attempt("get", call)

    def do_list():
        def call(started):
            def fetch():
                listed = {}
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="soak/"):
                    for item in page.get("Contents", []):
                        listed[item["Key"]] = item["Size"]
                return listed
            listed = run(fetch)
            ended = now()
            for key in KEYS:
                allowed = history.allowed(key, started, ended)
                ok = (any(w.digest is not None and w.size == listed[key] for w in allowed) if key in listed
                      else any(w.digest is None for w in allowed))
                if not ok:
                    with stats.lock:
                        stats.mismatches.append(
                            f"LIST at [{started:.3f}, {ended:.3f}]: {key} {'listed with ' + str(listed[key]) + ' B' if key in listed else 'absent'}, "
                            f"allowed {sorted({('absent' if w.digest is None else str(w.size) + ' B') for w in allowed})}")
            extra = set(listed) - set(KEYS)
            if extra:
                with stats.lock:
                    stats.mismatches.append(f"LIST: keys never written: {sorted(extra)[:5]}")
        attempt("list", call)

    def do_multipart(key):
        # One part of any size (the last part may be small), or a 5 MiB part and a small one.
        sizes = [random_size()] if rng.random() < 0.7 else [5 * MIB, rng.randrange(0, 256 * 1024)]
        parts = [body(size)[0] for size in sizes]
        whole = b"".join(parts)
        digest = hashlib.sha256(whole).hexdigest()
        upload_id = attempt("multipart-create", lambda _: run(
            lambda: s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]))
        etags = []
        for number, part in enumerate(parts, 1):
            etags.append(attempt("multipart-part", lambda _: run(lambda: s3.upload_part(
                Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=number, Body=part)["ETag"])))
        if rng.random() < 0.1:
            attempt("multipart-abort", lambda _: run(lambda: s3.abort_multipart_upload(
                Bucket=BUCKET, Key=key, UploadId=upload_id)))
            return

        def call(_):
            write = history.begin(key, digest, len(whole))
            try:
                run(lambda: s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id, MultipartUpload={
                    "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]}))
            except Failure as failure:
                # A retried Complete of an upload that did complete is NoSuchUpload: refused, but the
                # earlier (uncertain) attempt stays a candidate.
                write.state = "uncertain" if failure.uncertain else "refused"
                raise
            write.end, write.state = now(), "ack"
            stats.add(bytes_written=len(whole))
        attempt("multipart-complete", call)

    operations = [(do_put, 30), (do_get, 35), (do_delete, 8), (do_list, 7), (do_multipart, 8)]
    functions, weights = zip(*operations)
    while now() < deadline:
        fn = rng.choices(functions, weights)[0]
        try:
            if fn is do_list:
                fn()
            else:
                fn(rng.choice(KEYS))
            stats.add(ops=collections.Counter({fn.__name__[3:]: 1}))
        except Failure:
            pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--max-mib", type=int, default=4, help="largest single PUT, MiB")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    server = Server(args.bin, args.config)
    server.start()
    with urllib.request.urlopen(server.token_url + "/", timeout=10) as response:
        credentials = json.loads(response.read())
    config = Config(s3={"addressing_style": "path"}, signature_version="s3v4", retries={"total_max_attempts": 1},
                    connect_timeout=5, read_timeout=120, max_pool_connections=4)
    session = boto3.session.Session()

    def client():
        return session.client("s3", endpoint_url=server.gateway_url, region_name="us-east-1",
                              aws_access_key_id=credentials["AccessKeyId"],
                              aws_secret_access_key=credentials["AccessKeySecret"],
                              aws_session_token=credentials["SecurityToken"], config=config)
    setup = client()
    try:
        setup.head_bucket(Bucket=BUCKET)
    except botocore.exceptions.ClientError:
        setup.create_bucket(Bucket=BUCKET)
    clients = [client() for _ in range(args.clients)]

    history, stats, window = History(), Stats(), Window()
    began = now()
    deadline = began + args.seconds
    threads = [threading.Thread(target=client_loop, args=(i, c, history, stats, window, deadline, args), daemon=True)
               for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()

    # One kill -9 in the middle, then a restart; the clients keep going.
    time.sleep(max(0.0, began + args.seconds / 2 - now()))
    window.start = now()
    server.kill9()
    killed_at = window.start - began
    server.start()
    window.end = now() + WINDOW_GRACE
    print(f"kill -9 at {killed_at:.1f} s, restarted and ready after {window.end - WINDOW_GRACE - window.start:.2f} s",
          flush=True)

    for thread in threads:
        thread.join(timeout=max(1.0, deadline - now() + 180))
    stuck = sum(thread.is_alive() for thread in threads)
    elapsed = now() - began
    server.stop()

    print(f"\nsoak: {args.clients} clients, {elapsed:.0f} s, keys {len(KEYS)}, single PUT up to {args.max_mib} MiB")
    print("operations (completed / attempts):")
    for op in ["put", "get", "delete", "list", "multipart"]:
        print(f"  {op:<10} {stats.ops[op]:>7}")
    for op in sorted(stats.attempts):
        print(f"  attempts {op:<20} {stats.attempts[op]:>7}")
    print(f"  throughput {sum(stats.ops.values()) / elapsed:.1f} ops/s, written {stats.bytes_written / MIB:.0f} MiB, "
          f"read {stats.bytes_read / MIB:.0f} MiB")
    print("errors by code (window = overlapping the kill and restart):")
    if not stats.errors:
        print("  none")
    for (op, code, where), count in sorted(stats.errors.items()):
        print(f"  {where:<8} {op:<20} {code:<28} {count:>6}")
    window_errors = sum(c for (_, _, where), c in stats.errors.items() if where == "window")
    print(f"errors in the kill window: {window_errors}")
    print(f"5xx or connection errors outside the kill window: {stats.server_failures_outside}")
    print(f"hash/listing mismatches: {len(stats.mismatches)}")
    for line in stats.mismatches[:20]:
        print(f"  {line}")
    for life, (pid, hwm) in enumerate(server.lives, 1):
        print(f"server life {life} (pid {pid}): peak RSS (VmHWM) {hwm:.1f} MiB")
    if stuck:
        print(f"{stuck} client threads did not finish")
    failed = stats.mismatches or stats.server_failures_outside or stuck
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
