"""Upstream STS peers on loopback for the upstream-STS tests and the vend bench.

`AliyunSTSStandIn` plays Alibaba Cloud STS: it recomputes the signature of every request with
Alibaba's own Python code (`alibabacloud_openapi_util`, from PyPI) and refuses a mismatch as
the real service does (`SignatureDoesNotMatch`); then it answers `AssumeRole` in the documented
JSON shape. Nothing in it signs or verifies with code of ours.

`MotoServer` runs moto's STS (`moto[server]`) as a real `aws-sts` peer, with moto's IAM
authentication switched on, so that moto verifies Tollgate's SigV4 signatures.
"""
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from alibabacloud_openapi_util.client import Client as OpenApiUtil

ALIYUN_KEY_ID = "LTAI5tTollgateInterop"
ALIYUN_KEY_SECRET = "aliyunInteropSecret0123456789ab"  # 30 characters, as Alibaba's are


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AliyunSTSStandIn:
    """Alibaba Cloud STS `AssumeRole` on 127.0.0.1, verifying with Alibaba's signer.

    `mode` steers the answers: "ok"; "throttle" (always `Throttling.User`); "throttle_once"
    (the first request of each RoleSessionName is throttled); "slow" (`slow_seconds` before
    answering); `delay` adds a fixed pause to every answer (the bench's 20 ms).
    """

    def __init__(self, keys=None, delay: float = 0.0):
        self.keys = dict(keys or {ALIYUN_KEY_ID: ALIYUN_KEY_SECRET})
        self.delay = delay
        self.mode = "ok"
        self.slow_seconds = 3.0
        self.requests = []       # every verified request's parameters
        self.refused = []        # (code, parameters) of every refused one
        self.minted = []         # the credentials answered, in order
        self.nonces = set()
        self.throttled_sessions = set()
        self.lock = threading.Lock()
        # Bumped by reset(): a request still being answered when a test ends (the slow mode
        # sleeps past the client's timeout) records nothing in the next test's lists.
        self.generation = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: without TCP_NODELAY the body waits for the
            # client's delayed ACK (40 ms on Linux), which would be measured as the upstream's.
            disable_nagle_algorithm = True

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode()
                outer.answer(self, "POST", self.path, body)

            def do_GET(self):
                outer.answer(self, "GET", self.path, "")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self):
        with self.lock:
            self.requests.clear()
            self.refused.clear()
            self.minted.clear()
            self.throttled_sessions.clear()
            self.generation += 1
        self.mode = "ok"

    def record(self, generation: int, into: list, item):
        with self.lock:
            if generation == self.generation:
                into.append(item)

    # What Alibaba's service checks, with Alibaba's signer.
    def answer(self, handler, method, path, body):
        generation = self.generation
        query = urllib.parse.urlsplit(path).query
        params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        params.update(urllib.parse.parse_qsl(body, keep_blank_values=True))
        signature = params.pop("Signature", None)

        def refuse(status, code, message):
            self.record(generation, self.refused, (code, dict(params)))
            self.send(handler, status, {"RequestId": secrets.token_hex(8), "HostId": "sts.standin", "Code": code,
                                        "Message": message})

        secret = self.keys.get(params.get("AccessKeyId", ""))
        if secret is None:
            return refuse(404, "InvalidAccessKeyId.NotFound", "Specified access key is not found.")
        for name, value in (("SignatureMethod", "HMAC-SHA1"), ("SignatureVersion", "1.0"), ("Format", "JSON"),
                            ("Version", "2015-04-01"), ("Action", "AssumeRole")):
            if params.get(name) != value:
                return refuse(400, "InvalidParameter", f"{name} must be {value}")
        expected = OpenApiUtil.get_rpcsignature(params, method, secret)
        if signature != expected:
            return refuse(400, "SignatureDoesNotMatch", "Specified signature is not matched with our calculation.")
        stamp = datetime.strptime(params.get("Timestamp", ""), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        if abs((datetime.now(timezone.utc) - stamp).total_seconds()) > 900:
            return refuse(400, "InvalidTimeStamp.Expired", "Specified time stamp or date value is expired.")
        with self.lock:
            if params["SignatureNonce"] in self.nonces:
                nonce_reused = True
            else:
                nonce_reused = False
                self.nonces.add(params["SignatureNonce"])
        if nonce_reused:
            return refuse(400, "SignatureNonceUsed", "Specified signature nonce was used already.")
        for name in ("RoleArn", "RoleSessionName"):
            if not params.get(name):
                return refuse(400, "MissingParameter", f"{name} is mandatory for this action.")
        self.record(generation, self.requests, dict(params))
        if self.delay:
            time.sleep(self.delay)
        if self.mode == "throttle":
            return refuse(400, "Throttling.User", "Request was denied due to user flow control.")
        if self.mode == "throttle_once":
            with self.lock:
                first = params["RoleSessionName"] not in self.throttled_sessions
                self.throttled_sessions.add(params["RoleSessionName"])
            if first:
                return refuse(400, "Throttling.User", "Request was denied due to user flow control.")
        if self.mode == "slow":
            time.sleep(self.slow_seconds)
        duration = int(params.get("DurationSeconds", "3600"))
        expiration = (datetime.now(timezone.utc) + timedelta(seconds=duration)).strftime("%Y-%m-%dT%H:%M:%SZ")
        credentials = {"SecurityToken": "CAIS" + secrets.token_urlsafe(96), "Expiration": expiration,
                       "AccessKeySecret": secrets.token_urlsafe(30), "AccessKeyId": "STS." + secrets.token_hex(12)}
        self.record(generation, self.minted, credentials)
        account = params["RoleArn"].split(":")[3]
        role = params["RoleArn"].rsplit("/", 1)[-1]
        self.send(handler, 200, {
            "RequestId": secrets.token_hex(8),
            "AssumedRoleUser": {"Arn": f"acs:ram::{account}:role/{role}/{params['RoleSessionName']}",
                                "AssumedRoleId": f"3{secrets.token_hex(8)}:{params['RoleSessionName']}"},
            "Credentials": credentials,
        })

    @staticmethod
    def send(handler, status, document):
        raw = json.dumps(document).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json;charset=utf-8")
            handler.send_header("Content-Length", str(len(raw)))
            handler.end_headers()
            handler.wfile.write(raw)
        except OSError:
            pass  # the client gave up (a timeout test)


class MotoServer:
    """`moto_server` on 127.0.0.1 with IAM authentication on: the first `free_actions` requests
    are served unauthenticated (to create a user, its policy and its key); every later one must
    carry a valid SigV4 signature of a key moto knows, and be allowed by IAM."""

    def __init__(self, free_actions: int = 4):
        self.port = free_port()
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(free_actions))
        self.log = open(os.devnull, "wb")
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError("moto_server exited")
                time.sleep(0.1)
        raise RuntimeError("moto_server did not listen")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
