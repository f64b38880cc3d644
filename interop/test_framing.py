"""Response framing on a kept-alive connection: every request gets exactly its own answer, in
request order, framed so that the next answer starts where this one ends; or the connection is
closed, and then nothing after the answer that said so.

Behind a proxy that pools connections (the shipped compose.yaml puts Caddy in front), an answer
that does not match its request hands one user's bytes to another. The named regressions come
first; then a differential test sends generated pipelined streams of the same requests on one
connection and compares each answer with the answer the request gets alone, on a connection of
its own (status, body, framing), and checks the order and where the connection ends.

Every request is signed by a real client (boto3 presigns S3 requests, oss2 OSS ones); the
bytes on the wire are ours, so that they can be pipelined.
"""
import os
import random
import re
import socket
import time

import oss2
import pytest

from conftest import ROOT_SECRET
from s3_helpers import ROOT_ACCESS_KEY_ID, root_client

BUCKET = "tollgate"
SMALL = b"small object: answered from memory\n" * 3
LARGE = bytes(range(256)) * 1024 * 3  # 768 KiB: a file, streamed or sent with sendfile


class Answer:
    """One parsed response: status, headers (lower-case names), body, and how it was framed."""

    def __init__(self, status: int, reason: str, headers: dict, body: bytes, framing: str, interim: list):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body
        self.framing, self.interim = framing, interim

    @property
    def closes(self) -> bool:
        return "close" in self.headers.get("connection", "").lower()

    def __repr__(self):
        return f"<{self.status} {self.framing} {len(self.body)}B {self.headers.get('connection', '')}>"


class Wire:
    """A raw connection to the gateway and a strict HTTP/1.1 response reader."""

    def __init__(self, port: int, timeout: float = 10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = bytearray()
        self.eof = False

    def close(self):
        self.sock.close()

    def send(self, data: bytes):
        """Sends `data`; a server that has closed the connection (after an answer that ends it,
        while the rest of a pipelined stream is still on its way) takes no more, which is not
        an error of the client's."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _fill(self) -> bool:
        if self.eof:
            return False
        try:
            piece = self.sock.recv(1 << 16)
        except ConnectionResetError:
            piece = b""
        if not piece:
            self.eof = True
            return False
        self.buffer += piece
        return True

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            if not self._fill():
                raise EOFError(f"connection closed inside a head: {bytes(self.buffer[:200])!r}")
        end = self.buffer.index(b"\r\n")
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 2]
        return line

    def _exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            if not self._fill():
                raise EOFError(f"connection closed {count - len(self.buffer)} bytes short of a body")
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data

    def answer(self, method: str) -> Answer:
        """The next final response, for a request of `method`; interim (1xx) ones are collected."""
        interim = []
        while True:
            status_line = self._line()
            match = re.fullmatch(rb"HTTP/1\.[01] (\d{3}) ?(.*)", status_line)
            assert match, f"not a status line: {status_line!r}"
            status = int(match.group(1))
            headers = {}
            while True:
                line = self._line()
                if not line:
                    break
                name, _, value = line.partition(b":")
                key = name.decode().strip().lower()
                assert key not in ("content-length", "transfer-encoding") or key not in headers, f"{key} twice"
                headers[key] = value.decode(errors="replace").strip()
            if 100 <= status < 200:
                assert "content-length" not in headers and "transfer-encoding" not in headers, headers
                interim.append(status)
                continue
            break
        if method == "HEAD" or status in (204, 304):
            framing, body = "none", b""
        elif "transfer-encoding" in headers:
            assert headers["transfer-encoding"].lower() == "chunked", headers
            assert "content-length" not in headers, "Content-Length beside Transfer-Encoding"
            framing, body = "chunked", self._chunked()
        elif "content-length" in headers:
            framing, body = "length", self._exactly(int(headers["content-length"]))
        else:
            # Delimited by the close: allowed only when the answer says it closes.
            assert "close" in headers.get("connection", "").lower(), f"{status} without framing: {headers}"
            while self._fill():
                pass
            framing, body = "close", bytes(self.buffer)
            self.buffer.clear()
        return Answer(status, match.group(2).decode(), headers, body, framing, interim)

    def _chunked(self) -> bytes:
        body = bytearray()
        while True:
            size = int(self._line().split(b";")[0], 16)
            if size == 0:
                while self._line():
                    pass
                return bytes(body)
            body += self._exactly(size)
            assert self._line() == b""

    def closed_within(self, seconds: float) -> bool:
        """True when the server closes the connection within `seconds` without sending more."""
        self.sock.settimeout(seconds)
        try:
            while self._fill():
                pass
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(10)
        return True

    def nothing_more_within(self, seconds: float) -> bool:
        """True when no byte arrives within `seconds` (the connection may stay open)."""
        self.sock.settimeout(seconds)
        try:
            self._fill()
        except socket.timeout:
            pass
        finally:
            self.sock.settimeout(10)
        return not self.buffer


def request_bytes(method: str, url: str, port: int, *, headers: dict = None, body: bytes = b"", version: str = "1.1") -> bytes:
    target = re.sub(r"^https?://[^/]+", "", url)
    fields = {"Host": f"127.0.0.1:{port}"}
    fields.update(headers or {})
    if body and "Content-Length" not in fields:
        fields["Content-Length"] = str(len(body))
    head = f"{method} {target} HTTP/{version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode() + body


@pytest.fixture(scope="module")
def signer(gw):
    root = root_client(gw)
    root.put_object(Bucket=BUCKET, Key="small.txt", Body=SMALL)
    root.put_object(Bucket=BUCKET, Key="large.bin", Body=LARGE)
    root.put_object(Bucket=BUCKET, Key="cold.bin", Body=LARGE[:200_000])
    root.put_object_tagging(Bucket=BUCKET, Key="small.txt", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    oss = oss2.Bucket(oss2.Auth(ROOT_ACCESS_KEY_ID, ROOT_SECRET), gw.gateway_url, BUCKET)
    return root, oss


def s3_url(root, operation: str, expires=600, **params) -> str:
    params.setdefault("Bucket", BUCKET)
    return root.generate_presigned_url(operation, Params=params, ExpiresIn=expires)


# ---------------------------------------------------------------------------------------------
# The regressions, one by one.


def test_a_get_answered_like_a_head_says_it_has_no_body(gw, signer):
    """OSS GetObjectMeta sent as GET: its answer has the object's headers and no body, so its
    Content-Length must say 0; the next answer on the connection starts right after it."""
    root, oss = signer
    meta = oss.sign_url("GET", "large.bin", 600, params={"objectMeta": ""})
    get = s3_url(root, "get_object", Key="small.txt")
    wire = Wire(gw.gateway_port)
    wire.send(request_bytes("GET", meta, gw.gateway_port) + request_bytes("GET", get, gw.gateway_port))
    first = wire.answer("GET")
    assert first.status == 200 and first.body == b"" and first.headers["content-length"] == "0", first.headers
    assert first.headers["x-oss-object-size"] == str(len(LARGE))
    second = wire.answer("GET")
    assert (second.status, second.body) == (200, SMALL)
    # As HEAD (how oss2 sends it), the Content-Length is the object's size, and no body follows.
    wire.send(request_bytes("HEAD", oss.sign_url("HEAD", "large.bin", 600, params={"objectMeta": ""}), gw.gateway_port)
              + request_bytes("GET", get, gw.gateway_port))
    head = wire.answer("HEAD")
    assert head.status == 200 and head.headers["content-length"] == str(len(LARGE))
    assert wire.answer("GET").body == SMALL
    wire.close()


def test_an_error_after_a_get_from_the_store_is_answered_after_it(gw, signer):
    """A GET the store must read from disk, then a malformed request: the GET's answer first,
    then the 400, then the connection ends."""
    root, _ = signer
    for key, body in (("cold.bin", LARGE[:200_000]), ("large.bin", LARGE)):
        # A new object version each round, so that nothing of it is cached.
        root.put_object(Bucket=BUCKET, Key=key, Body=body)
        wire = Wire(gw.gateway_port)
        wire.send(request_bytes("GET", s3_url(root, "get_object", Key=key), gw.gateway_port) + b"GARBAGE / HTTP/9.9\r\n\x01\r\n\r\n")
        first = wire.answer("GET")
        assert (first.status, len(first.body)) == (200, len(body))
        assert first.body == body
        second = wire.answer("GET")
        assert second.status == 400
        assert wire.closed_within(5)
        wire.close()


def test_connect_is_framed_and_ends_the_connection(gw, signer):
    root, _ = signer
    wire = Wire(gw.gateway_port)
    wire.send(b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n"
              + request_bytes("GET", s3_url(root, "get_object", Key="small.txt"), gw.gateway_port))
    answer = wire.answer("CONNECT")
    assert answer.status >= 400 and answer.framing == "length", answer
    # The pipelined GET gets its answer, or the connection ends: it is never left waiting.
    if answer.closes:
        assert wire.closed_within(5)
    else:
        assert wire.answer("GET").body == SMALL
    wire.close()


@pytest.mark.parametrize("first_expects", [False, True])
def test_a_put_expecting_continue_behind_another_put_is_answered(gw, signer, first_expects):
    """A PUT with Expect: 100-continue pipelined behind another PUT's body (as a client that does
    not wait for 100 sends it). The expectation is the second request's: the first answer must
    not carry its `Connection: close`, and the second request gets its 100 and its answer."""
    root, _ = signer
    bodies = [b"first body", b"second body!"]
    stream = b""
    for index, body in enumerate(bodies):
        url = s3_url(root, "put_object", Key=f"expect-{index}.txt")
        headers = {"Expect": "100-continue"} if index == 1 or first_expects else {}
        stream += request_bytes("PUT", url, gw.gateway_port, headers=headers, body=body)
    wire = Wire(gw.gateway_port)
    wire.send(stream)
    first = wire.answer("PUT")
    assert first.status == 200 and not first.closes, first.headers
    assert first.interim == ([100] if first_expects else [])
    second = wire.answer("PUT")
    assert second.status == 200 and not second.closes, second.headers
    assert second.interim == [100]
    wire.close()
    for index, body in enumerate(bodies):
        assert root.get_object(Bucket=BUCKET, Key=f"expect-{index}.txt")["Body"].read() == body


@pytest.mark.parametrize("connection, closes", [(None, True), ("keep-alive", False), ("close", True)])
def test_http_1_0_closes_unless_kept_alive(gw, signer, connection, closes):
    root, _ = signer
    headers = {"Connection": connection} if connection else {}
    for key in ("small.txt", "large.bin", "missing.txt"):
        wire = Wire(gw.gateway_port)
        wire.send(request_bytes("GET", s3_url(root, "get_object", Key=key), gw.gateway_port, headers=headers, version="1.0"))
        answer = wire.answer("GET")
        assert answer.status == (404 if key == "missing.txt" else 200)
        assert answer.framing in ("length", "close"), "no chunks for an HTTP/1.0 client"
        if closes:
            assert wire.closed_within(5), f"HTTP/1.0 {connection} GET {key}: the connection stayed open"
        else:
            assert wire.nothing_more_within(0.3)
            wire.send(request_bytes("GET", s3_url(root, "get_object", Key="small.txt"), gw.gateway_port, headers=headers, version="1.0"))
            assert wire.answer("GET").body == SMALL
        wire.close()


@pytest.mark.parametrize("method", ["GET", "HEAD", "DELETE"])
def test_a_body_announced_where_none_belongs_cannot_swallow_the_next_request(gw, signer, method):
    """A GET/HEAD/DELETE announcing `Content-Length: 9` and sending no body, then another request:
    the second request's bytes must never become the first one's body. The first is answered and
    the connection closed."""
    root, _ = signer
    operation = {"GET": "get_object", "HEAD": "head_object", "DELETE": "delete_object"}[method]
    key = "small.txt" if method != "DELETE" else "scratch-delete.txt"
    first = request_bytes(method, s3_url(root, operation, Key=key), gw.gateway_port, headers={"Content-Length": "9"})
    second = request_bytes("GET", s3_url(root, "get_object", Key="small.txt"), gw.gateway_port)
    wire = Wire(gw.gateway_port)
    wire.send(first + second)
    answer = wire.answer(method)
    assert answer.status < 500
    assert answer.closes, answer.headers
    assert wire.closed_within(5)
    wire.close()


# ---------------------------------------------------------------------------------------------
# Differential: pipelined streams against the same requests alone.


def menu(root, oss, port: int):
    """(name, method, bytes, ends) for every kind of request the streams are made of; `ends`:
    the connection may end after its answer."""
    def s3(operation, method, **params):
        return request_bytes(method, s3_url(root, operation, **params), port)

    def oss_sub(method, key, params):
        return request_bytes(method, oss.sign_url(method, key, 600, params=params), port)

    items = [
        ("get-small", "GET", s3("get_object", "GET", Key="small.txt"), False),
        ("get-large", "GET", s3("get_object", "GET", Key="large.bin"), False),
        ("get-range", "GET", request_bytes("GET", s3_url(root, "get_object", Key="large.bin"), port, headers={"Range": "bytes=100-299"}), False),
        ("get-range-bad", "GET", request_bytes("GET", s3_url(root, "get_object", Key="small.txt"), port, headers={"Range": "bytes=9999-"}), False),
        ("get-304", "GET", request_bytes("GET", s3_url(root, "get_object", Key="small.txt"), port, headers={"If-None-Match": "*"}), False),
        ("get-412", "GET", request_bytes("GET", s3_url(root, "get_object", Key="small.txt"), port, headers={"If-Match": '"nope"'}), False),
        ("get-missing", "GET", s3("get_object", "GET", Key="missing.txt"), False),
        ("head-small", "HEAD", s3("head_object", "HEAD", Key="small.txt"), False),
        ("head-large", "HEAD", s3("head_object", "HEAD", Key="large.bin"), False),
        ("head-missing", "HEAD", s3("head_object", "HEAD", Key="missing.txt"), False),
        ("get-tagging", "GET", s3("get_object_tagging", "GET", Key="small.txt"), False),
        ("get-acl", "GET", s3("get_object_acl", "GET", Key="small.txt"), False),
        ("list-v2", "GET", s3("list_objects_v2", "GET", Prefix="s"), False),
        ("list-v1", "GET", s3("list_objects", "GET", Prefix="l"), False),
        ("list-uploads", "GET", s3("list_multipart_uploads", "GET"), False),
        ("bucket-cors", "GET", s3("get_bucket_cors", "GET"), False),
        ("bucket-location", "GET", s3("get_bucket_location", "GET"), False),
        ("head-bucket", "HEAD", s3("head_bucket", "HEAD"), False),
        ("oss-meta-get", "GET", oss_sub("GET", "large.bin", {"objectMeta": ""}), False),
        ("oss-meta-head", "HEAD", oss_sub("HEAD", "small.txt", {"objectMeta": ""}), False),
        ("oss-tagging", "GET", oss_sub("GET", "small.txt", {"tagging": ""}), False),
        ("oss-get", "GET", oss_sub("GET", "small.txt", {}), False),
        ("oss-missing", "GET", oss_sub("GET", "missing.txt", {}), False),
        ("oss-head-missing", "HEAD", oss_sub("HEAD", "missing.txt", {}), False),
        ("put", "PUT", request_bytes("PUT", s3_url(root, "put_object", Key="put.txt"), port, body=b"put body"), False),
        ("put-expect", "PUT", request_bytes("PUT", s3_url(root, "put_object", Key="put-expect.txt"), port,
                                            headers={"Expect": "100-continue"}, body=b"expected body"), False),
        ("delete", "DELETE", s3("delete_object", "DELETE", Key="deleted.txt"), False),
        ("anonymous", "GET", request_bytes("GET", f"/{BUCKET}/small.txt", port), False),
        ("forged", "GET", request_bytes("GET", s3_url(root, "get_object", Key="small.txt").replace("Signature=", "Signature=0"), port), False),
        ("options", "OPTIONS", request_bytes("OPTIONS", f"/{BUCKET}/small.txt", port,
                                             headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET"}), False),
        ("http10", "GET", request_bytes("GET", s3_url(root, "get_object", Key="small.txt"), port, version="1.0"), True),
        ("close", "GET", request_bytes("GET", s3_url(root, "get_object", Key="large.bin"), port, headers={"Connection": "close"}), True),
        ("connect", "CONNECT", b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n", True),
        ("malformed", "GET", b"GET /a b c HTTP/1.1\r\nHost\r\n\r\n", True),
    ]
    return items


def normalized(answer: Answer) -> tuple:
    """What must be the same alone and pipelined: status and body, without per-request ids."""
    body = re.sub(rb"<(RequestId|HostId)>[^<]*</\1>", b"", answer.body)
    return answer.status, body


def test_pipelined_streams_answer_like_requests_alone(gw, signer):
    root, oss = signer
    root.put_object(Bucket=BUCKET, Key="deleted.txt", Body=b"d")
    items = menu(root, oss, gw.gateway_port)
    # The reference: each request alone, on its own connection (twice, so that what a first
    # request warms is warm for both).
    reference = {}
    for _ in range(2):
        for name, method, data, _ in items:
            wire = Wire(gw.gateway_port)
            wire.send(data)
            reference[name] = normalized(wire.answer(method))
            wire.close()
    seed = int(os.environ.get("FRAMING_SEED", time.time_ns() % 100000))
    rng = random.Random(seed)
    streams = int(os.environ.get("FRAMING_STREAMS", "60"))
    for stream_index in range(streams):
        length = rng.randint(2, 10)
        chosen = [rng.choice(items) for _ in range(length)]
        wire = Wire(gw.gateway_port)
        # All at once, or in a few pieces cut anywhere.
        data = b"".join(item[2] for item in chosen)
        cuts = sorted(rng.sample(range(1, len(data)), k=min(3, len(data) - 1))) if rng.random() < 0.5 else []
        start = 0
        for cut in cuts + [len(data)]:
            wire.send(data[start:cut])
            start = cut
        context = f"seed {seed}, stream {stream_index}: {[item[0] for item in chosen]}"
        for position, (name, method, _, ends) in enumerate(chosen):
            try:
                answer = wire.answer(method)
            except EOFError as error:
                raise AssertionError(f"{context}, answer {position}: {error}") from error
            assert normalized(answer) == reference[name], f"{context}: answer {position} ({name}) differs: {answer}"
            assert answer.framing != "close", f"{context}: {name} answered without framing"
            if answer.closes:
                assert wire.closed_within(5), f"{context}: {name} said close and the connection stayed open"
                break
            assert not ends, f"{context}: {name} must end the connection"
        else:
            assert wire.nothing_more_within(0.05), f"{context}: bytes after the last answer: {bytes(wire.buffer[:200])!r}"
        wire.close()
