"""The gateway under attack (issue 11): each request here once crashed the server, escaped what
its signature covers, or held memory. Every test checks the process is still alive afterwards
and that nothing was stored that should not have been.

Requests are signed by botocore (`S3SigV4Auth`) or presigned by boto3: no signature is
computed here.
"""
import socket
import threading
import time

import botocore.auth
import botocore.credentials
import pytest
import requests
from botocore.awsrequest import AWSRequest

from conftest import get_json
from s3_helpers import (ClientError, MiB, error_of, issued_credentials, leftover_temporary_files,
                        root_client, s3_client)

BUCKET = "tollgate"


@pytest.fixture(scope="module")
def root(gw):
    return root_client(gw)


@pytest.fixture(scope="module")
def full(gw):
    """Credentials of the default role (all_policy.txt: everything)."""
    return issued_credentials(gw)


@pytest.fixture(scope="module")
def reader(gw):
    """Credentials of the read-only role: may not delete or write anything."""
    return issued_credentials(gw, "--role", "read")


def alive(server):
    status, _, body = get_json(server.url + "/healthz")
    assert status == 200, body
    assert server.process.poll() is None


class PayloadAuth(botocore.auth.S3SigV4Auth):
    """botocore's S3 signer with a given x-amz-content-sha256 (UNSIGNED-PAYLOAD, STREAMING-…)."""

    def __init__(self, credentials, payload):
        super().__init__(credentials, "s3", "us-east-1")
        self.fixed_payload = payload

    def payload(self, request):
        return self.fixed_payload or super().payload(request)


def signed(server, credentials, method, path, *, body=b"", headers=None, content_sha256=None):
    """A request signed by botocore's S3 SigV4 signer: (url, headers, Host included)."""
    url = server.gateway_url + path
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    creds = botocore.credentials.Credentials(credentials["AccessKeyId"], credentials["AccessKeySecret"],
                                             credentials["SecurityToken"])
    PayloadAuth(creds, content_sha256).add_auth(request)
    return url, {"Host": f"127.0.0.1:{server.gateway_port}", **dict(request.headers.items())}


def post(server, credentials, path, body: bytes):
    url, headers = signed(server, credentials, "POST", path, body=body)
    return requests.post(url, data=body, headers=headers, timeout=60)


def error_code(response) -> str:
    return response.text.split("<Code>")[1].split("</Code>")[0] if "<Code>" in response.text else ""


def nested(depth: int) -> bytes:
    return b"<Delete><Object><Key>k</Key></Object>" + b"<a>" * depth + b"</a>" * depth + b"</Delete>"


# ---------------------------------------------------------------------------------------------
# XML bodies: bounded depth and size, truncated documents refused, nothing executed.


def test_deeply_nested_delete_body_is_malformed_xml_and_the_server_lives(gw, root, full):
    root.put_object(Bucket=BUCKET, Key="k", Body=b"keep me")
    response = post(gw, full, f"/{BUCKET}?delete", nested(40_000))
    assert response.status_code == 400, response.text
    assert error_code(response) == "MalformedXML"
    alive(gw)
    assert root.get_object(Bucket=BUCKET, Key="k")["Body"].read() == b"keep me"


def test_deeply_nested_complete_body_is_malformed_xml_and_the_upload_stays(gw, root, full):
    upload = root.create_multipart_upload(Bucket=BUCKET, Key="mp")["UploadId"]
    body = b"<CompleteMultipartUpload>" + b"<Part>" * 40_000 + b"</Part>" * 40_000 + b"</CompleteMultipartUpload>"
    response = post(gw, full, f"/{BUCKET}/mp?uploadId={upload}", body)
    assert (response.status_code, error_code(response)) == (400, "MalformedXML"), response.text
    alive(gw)
    assert [u["UploadId"] for u in root.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])] == [upload]
    root.abort_multipart_upload(Bucket=BUCKET, Key="mp", UploadId=upload)


def test_truncated_delete_body_is_refused_not_executed(gw, root, full):
    root.put_object(Bucket=BUCKET, Key="victim", Body=b"still here")
    response = post(gw, full, f"/{BUCKET}?delete", b"<Delete><Object><Key>victim</Key></Object>")
    assert (response.status_code, error_code(response)) == (400, "MalformedXML"), response.text
    assert root.get_object(Bucket=BUCKET, Key="victim")["Body"].read() == b"still here"


def test_doctype_and_entities_are_refused(gw, root, full):
    root.put_object(Bucket=BUCKET, Key="lol", Body=b"x")
    body = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;">]>'
            b"<Delete><Object><Key>&b;</Key></Object></Delete>")
    response = post(gw, full, f"/{BUCKET}?delete", body)
    assert (response.status_code, error_code(response)) == (400, "MalformedXML"), response.text
    assert root.head_object(Bucket=BUCKET, Key="lol")["ContentLength"] == 1


def test_oversized_xml_body_is_refused_before_it_is_read(gw, full):
    url, headers = signed(gw, full, "POST", f"/{BUCKET}?delete", content_sha256="UNSIGNED-PAYLOAD")
    headers["Content-Length"] = str(64 * MiB)
    with socket.create_connection(("127.0.0.1", gw.gateway_port), timeout=10) as sock:
        head = f"POST /{BUCKET}?delete HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        sock.sendall(head.encode())
        reply = sock.recv(65536).decode(errors="replace")
    assert reply.startswith("HTTP/1.1 400"), reply
    assert "MaxMessageLengthExceeded" in reply
    alive(gw)


# ---------------------------------------------------------------------------------------------
# DeleteObjects is authorised before its body is read, and says nothing about other buckets.


def test_delete_objects_without_any_delete_permission_is_refused_before_the_body(gw, root, reader):
    root.put_object(Bucket=BUCKET, Key="kept", Body=b"x")
    # The read-only role may delete nothing: refused even with a body that would crash a parser.
    response = post(gw, reader, f"/{BUCKET}?delete", nested(40_000))
    assert (response.status_code, error_code(response)) == (403, "AccessDenied"), response.text
    alive(gw)
    assert root.head_object(Bucket=BUCKET, Key="kept")["ContentLength"] == 1


def test_delete_objects_does_not_reveal_whether_a_bucket_exists(gw, root, reader):
    root.create_bucket(Bucket="private-existing")
    body = b"<Delete><Object><Key>k</Key></Object></Delete>"
    existing = post(gw, reader, "/private-existing?delete", body)
    missing = post(gw, reader, "/private-missing?delete", body)
    assert (existing.status_code, error_code(existing)) == (403, "AccessDenied")
    assert (missing.status_code, error_code(missing)) == (403, "AccessDenied")


# ---------------------------------------------------------------------------------------------
# A presigned URL covers what it says and nothing more.


def test_presigned_put_cannot_become_a_copy(gw, root, full):
    root.put_object(Bucket=BUCKET, Key="secret.txt", Body=b"the signer may read this")
    client = s3_client(gw, full, signature_version="s3v4")
    url = client.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "slot.txt"}, ExpiresIn=300)
    for header in ({"x-amz-copy-source": f"{BUCKET}/secret.txt"},
                   {"x-amz-copy-source": f"{BUCKET}/secret.txt", "x-amz-metadata-directive": "REPLACE"},
                   {"x-amz-tagging": "a=b"}, {"x-amz-acl": "public-read"}):
        response = requests.put(url, data=b"", headers=header, timeout=30)
        assert response.status_code == 403, (header, response.text)
        assert error_code(response) == "AccessDenied"
        assert "not signed" in response.text
    with pytest.raises(ClientError) as excinfo:
        root.head_object(Bucket=BUCKET, Key="slot.txt")
    assert error_of(excinfo)[1] == 404
    # The URL still does what it was signed for.
    assert requests.put(url, data=b"uploaded", timeout=30).status_code == 200
    assert root.get_object(Bucket=BUCKET, Key="slot.txt")["Body"].read() == b"uploaded"


def test_presigned_upload_part_cannot_become_a_part_copy(gw, root, full):
    root.put_object(Bucket=BUCKET, Key="source.bin", Body=b"s" * 1024)
    upload = root.create_multipart_upload(Bucket=BUCKET, Key="parts.bin")["UploadId"]
    client = s3_client(gw, full, signature_version="s3v4")
    url = client.generate_presigned_url("upload_part", ExpiresIn=300, Params={
        "Bucket": BUCKET, "Key": "parts.bin", "UploadId": upload, "PartNumber": 1})
    response = requests.put(url, data=b"", headers={"x-amz-copy-source": f"{BUCKET}/source.bin"}, timeout=30)
    assert (response.status_code, error_code(response)) == (403, "AccessDenied"), response.text
    assert root.list_parts(Bucket=BUCKET, Key="parts.bin", UploadId=upload).get("Parts", []) == []
    root.abort_multipart_upload(Bucket=BUCKET, Key="parts.bin", UploadId=upload)


# ---------------------------------------------------------------------------------------------
# Expect: 100-continue is answered only for accepted requests.


def send_head(server, headers: dict, path: str, method="PUT") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.gateway_port), timeout=10)
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock.sendall(head.encode())
    return sock


def read_head(sock) -> str:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    return data.decode(errors="replace")


def test_refused_upload_gets_its_refusal_instead_of_100_continue(gw, root, reader):
    body = b"x" * 4096
    _, headers = signed(gw, reader, "PUT", f"/{BUCKET}/refused.bin", body=body, content_sha256="UNSIGNED-PAYLOAD")
    headers.update({"Expect": "100-continue", "Content-Length": str(len(body))})
    with send_head(gw, headers, f"/{BUCKET}/refused.bin") as sock:
        reply = read_head(sock)
        assert reply.startswith("HTTP/1.1 403"), reply
        assert "connection: close" in reply.lower()
        # The body was never asked for; the server closes the connection after the refusal.
        sock.settimeout(10)
        rest = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            rest += piece
    alive(gw)
    with pytest.raises(ClientError):
        root.head_object(Bucket=BUCKET, Key="refused.bin")


def test_accepted_upload_gets_100_continue_then_stores(gw, root, full):
    body = b"y" * 4096
    _, headers = signed(gw, full, "PUT", f"/{BUCKET}/accepted.bin", body=body, content_sha256="UNSIGNED-PAYLOAD")
    headers.update({"Expect": "100-continue", "Content-Length": str(len(body))})
    with send_head(gw, headers, f"/{BUCKET}/accepted.bin") as sock:
        interim = read_head(sock)
        assert interim.startswith("HTTP/1.1 100"), interim
        sock.sendall(body)
        final = read_head(sock)
        assert final.startswith("HTTP/1.1 200"), final
    assert root.get_object(Bucket=BUCKET, Key="accepted.bin")["Body"].read() == body


# ---------------------------------------------------------------------------------------------
# Memory: a stalled aws-chunked upload does not hold its announced chunk.


def rss_mib(server) -> float:
    for line in open(f"/proc/{server.process.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_stalled_signed_chunks_do_not_hold_memory(gw, root, full):
    chunk = 16 * MiB
    connections = 8
    _, headers = signed(gw, full, "PUT", f"/{BUCKET}/stalled.bin",
                        content_sha256="STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                        headers={"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": str(chunk)})
    headers["Content-Length"] = str(chunk + 200)
    payload = b"z" * (chunk - 1)
    before = rss_mib(gw)
    sockets = []
    try:
        for _ in range(connections):
            sock = send_head(gw, headers, f"/{BUCKET}/stalled.bin")
            sock.sendall(f"{chunk:x};chunk-signature={'0' * 64}\r\n".encode())
            sock.sendall(payload)  # one byte short: the chunk never completes
            sockets.append(sock)
        time.sleep(2)
        grown = rss_mib(gw) - before
        assert grown < connections * chunk / MiB / 2, f"RSS grew by {grown:.0f} MiB"
    finally:
        for sock in sockets:
            sock.close()
    alive(gw)
    with pytest.raises(ClientError):
        root.head_object(Bucket=BUCKET, Key="stalled.bin")
    deadline = time.monotonic() + 10
    while leftover_temporary_files(gw) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftover_temporary_files(gw) == []


# ---------------------------------------------------------------------------------------------
# Memory: GETs pipelined by a client that reads none of the answers do not pile up answers.


def read_answers(sock, body, count):
    """Reads pipelined 200 answers of `body` from `sock` for up to a minute: how many arrived whole
    and in order (each a head, then the body; any other answer fails the test)."""
    received = bytearray()
    answers = 0
    deadline = time.monotonic() + 60
    while answers < count and time.monotonic() < deadline:
        piece = sock.recv(1 << 20)
        if not piece:
            break
        received += piece
        while True:
            end = received.find(b"\r\n\r\n")
            if end < 0 or len(received) < end + 4 + len(body):
                break
            assert received.startswith(b"HTTP/1.1 200 OK"), bytes(received[:200])
            assert received[end + 4:end + 4 + len(body)] == body, f"answer {answers} differs"
            del received[:end + 4 + len(body)]
            answers += 1
    return answers


def test_pipelined_gets_whose_answers_are_not_read_do_not_pile_up(gw, root):
    """Small objects are answered as soon as their GET is read (GatewayFastPath). A client that
    pipelines GETs and reads nothing would make the server queue an answer per request for as long
    as it sends (the bodies are shared, the heads are not: 42 MiB for these 30 MiB of requests);
    once the connection stops being writable, the server stops answering at once, and
    Hummingbird's responder waits for the client, which stops the reading of further requests."""
    body = b"p" * 8192  # small enough to be kept in memory
    root.put_object(Bucket=BUCKET, Key="pipelined.bin", Body=body)
    url = root.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "pipelined.bin"}, ExpiresIn=600)
    assert requests.get(url).content == body  # read whole once: now in memory
    target = url[len(gw.gateway_url):]
    request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{gw.gateway_port}\r\n\r\n".encode()
    count = 65536  # 512 MiB of answers, about 30 MiB of requests
    before = rss_mib(gw)
    sock = socket.create_connection(("127.0.0.1", gw.gateway_port), timeout=60)
    sender = threading.Thread(target=lambda: sock.sendall(request * count), daemon=True)
    sender.start()
    time.sleep(3)
    grown = rss_mib(gw) - before
    # Then every answer is read: all of them arrive, whole and in order.
    answers = read_answers(sock, body, count)
    sock.close()
    sender.join(timeout=10)
    assert answers == count
    assert grown < 24, f"RSS grew by {grown:.0f} MiB while the answers were not read"
    alive(gw)


def test_pipelined_file_span_gets_read_late_arrive_whole_and_in_order(gw, root):
    """A 1 MiB object whose file pages are cached is answered at once with sendfile, a span longer
    than the connection's high water mark; the fast path holds the writability changes a span
    makes within one answer's write (SignedGatewayTests checks what passes on). A client that
    pipelines such GETs and reads nothing fills the socket: the connection is left unwritable and
    later GETs go to Hummingbird's responder. Once the client reads, every answer arrives, whole
    and in order, and the server held no bodies meanwhile."""
    body = bytes(range(256)) * 4096  # 1 MiB
    root.put_object(Bucket=BUCKET, Key="spans.bin", Body=body)
    url = root.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "spans.bin"}, ExpiresIn=600)
    assert requests.get(url).content == body  # read once: the store keeps the file open
    target = url[len(gw.gateway_url):]
    request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{gw.gateway_port}\r\n\r\n".encode()
    count = 96  # 96 MiB of answers
    before = rss_mib(gw)
    sock = socket.create_connection(("127.0.0.1", gw.gateway_port), timeout=60)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.sendall(request * count)
    time.sleep(2)
    grown = rss_mib(gw) - before
    answers = read_answers(sock, body, count)
    sock.close()
    assert answers == count
    assert grown < 24, f"RSS grew by {grown:.0f} MiB while the answers were not read"
    alive(gw)


# ---------------------------------------------------------------------------------------------
# Server-side encryption is never claimed: the gateway stores bytes as they come.


@pytest.mark.parametrize("extra", [
    {"ServerSideEncryption": "AES256"},
    {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/app"},
    {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32},
])
def test_s3_encryption_requests_are_not_implemented_and_store_nothing(gw, root, full, extra):
    client = s3_client(gw, full)
    with pytest.raises(ClientError) as info:
        client.put_object(Bucket=BUCKET, Key="sse.bin", Body=b"secret", **extra)
    assert error_of(info) == ("NotImplemented", 501)
    with pytest.raises(ClientError):
        root.head_object(Bucket=BUCKET, Key="sse.bin")
    root.put_object(Bucket=BUCKET, Key="plain.bin", Body=b"plain")
    with pytest.raises(ClientError) as info:
        client.copy_object(Bucket=BUCKET, Key="sse-copy.bin", CopySource=f"{BUCKET}/plain.bin", **{k: v for k, v in extra.items()})
    assert error_of(info) == ("NotImplemented", 501)
    with pytest.raises(ClientError) as info:
        client.create_multipart_upload(Bucket=BUCKET, Key="sse-parts.bin", **extra)
    assert error_of(info) == ("NotImplemented", 501)


@pytest.mark.parametrize("value", ["KMS", "AES256", "SM4"])
def test_oss_encryption_requests_are_not_implemented_and_store_nothing(gw, full, value):
    import oss2
    from oss_helpers import sts_bucket
    bucket = sts_bucket(gw, full, "v4")
    with pytest.raises(oss2.exceptions.OssError) as info:
        bucket.put_object("oss-sse.bin", b"secret", headers={"x-oss-server-side-encryption": value})
    assert (info.value.status, info.value.code) == (501, "NotImplemented")
    assert not bucket.object_exists("oss-sse.bin")
