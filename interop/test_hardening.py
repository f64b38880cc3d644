"""Operational hardening, end to end against the real binary: config refusals that must stop
start-up, idle and slow connections, root credentials printed while the server runs, file
modes of the data directory, the per-bucket multipart upload limit and expiry, and OSS's
signed x-oss-content-sha256 checked against the body."""
import hashlib
import json
import os
import select
import socket
import stat
import subprocess
import time

import oss2
import pytest
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET, Server, binary
from oss_helpers import REGION, ROOT_ACCESS_KEY_ID, assert_absent, boto3_client, refused, root_bucket


def serve_expecting_exit(server: Server, timeout: float = 20) -> subprocess.CompletedProcess:
    """Runs `tollgate serve` on the server's config; it must stop by itself (a config error)."""
    return subprocess.run([binary(), "serve", "--config", str(server.config_path)], cwd=server.dir,
                          capture_output=True, text=True, timeout=timeout)


def root_server(**config) -> Server:
    """A started server whose root credentials the helpers' clients use, with `config` added."""
    return Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET, **config}).start()


def rewrite_config(server: Server, **changes):
    config = json.loads(server.config_path.read_text())
    config.update(changes)
    server.config_path.write_text(json.dumps(config))


# MARK: Config errors that stop start-up

def test_a_weak_previous_secret_is_a_config_error():
    server = Server({"AccessKeySecret": ROOT_SECRET, "PreviousAccessKeySecrets": ["x"]})
    try:
        result = serve_expecting_exit(server)
        assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
        assert result.stderr.startswith(f"tollgate: config error: {server.config_path}: "), result.stderr
        assert "PreviousAccessKeySecrets[0] must be at least 32 bytes" in result.stderr, result.stderr
        # The token CLI reads the same config and refuses it the same way.
        issued = server.cli("token", "issue", "--config", str(server.config_path))
        assert issued.returncode == 2 and "PreviousAccessKeySecrets[0]" in issued.stderr, issued.stderr
    finally:
        server.cleanup()


def test_both_listeners_on_one_port_is_a_config_error():
    server = Server({"AccessKeySecret": ROOT_SECRET})
    try:
        rewrite_config(server, GatewayPort=server.port)
        result = serve_expecting_exit(server)
        assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
        assert result.stderr.startswith(f"tollgate: config error: {server.config_path}: "), result.stderr
        assert "Port and GatewayPort must differ" in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1, "one line"
    finally:
        server.cleanup()


# MARK: Idle and slow connections

IDLE = 2


@pytest.fixture(scope="module")
def idle_server():
    s = root_server(IdleTimeoutSeconds=IDLE)
    yield s
    s.cleanup()


def closed_after(sock: socket.socket, limit: float, trickle: bytes = b"") -> float:
    """Seconds until the server closes `sock` (reading until EOF), sending `trickle` every 0.3 s
    meanwhile; fails if it is still open after `limit` seconds."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        readable, _, _ = select.select([sock], [], [], 0.3)
        try:
            if readable and sock.recv(65536) == b"":
                return time.monotonic() - start
            if trickle:
                sock.sendall(trickle)
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - start
    pytest.fail(f"connection still open after {limit} s")


@pytest.mark.parametrize("listener", ["token", "gateway"])
def test_a_stalled_request_head_is_closed_after_the_idle_timeout(idle_server, listener):
    port = idle_server.port if listener == "token" else idle_server.gateway_port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        elapsed = closed_after(sock, limit=IDLE + 8)
    assert IDLE - 0.5 <= elapsed <= IDLE + 4, elapsed


@pytest.mark.parametrize("listener", ["token", "gateway"])
def test_a_head_sent_a_byte_at_a_time_does_not_keep_the_connection(idle_server, listener):
    port = idle_server.port if listener == "token" else idle_server.gateway_port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        elapsed = closed_after(sock, limit=IDLE + 8, trickle=b"a")
    assert elapsed <= IDLE + 4, elapsed


@pytest.mark.parametrize("listener", ["token", "gateway"])
def test_an_idle_keep_alive_connection_is_closed_and_an_active_one_is_not(idle_server, listener):
    port = idle_server.port if listener == "token" else idle_server.gateway_port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        # Requests more often than the timeout keep the connection open for longer than it.
        for _ in range(3):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            response = sock.recv(65536)
            assert response.startswith(b"HTTP/1.1 "), response
            time.sleep(IDLE / 2)
        elapsed = closed_after(sock, limit=IDLE + 8)
    assert IDLE / 2 - 0.5 <= elapsed <= IDLE + 4, elapsed


# MARK: Root credentials in the output, while the server runs

def test_root_credentials_are_printed_at_once_and_the_key_id_at_every_start():
    server = Server({})  # empty AccessKeySecret: generated on first start
    try:
        server.start()
        stored = json.loads((server.dir / "data" / "root-credentials.json").read_text())
        # Read while the server is still running: nothing may wait in a buffer until exit.
        deadline = time.monotonic() + 5
        while stored["AccessKeySecret"] not in server.output() and time.monotonic() < deadline:
            time.sleep(0.1)
        first = server.output()
        assert f"AccessKeySecret: {stored['AccessKeySecret']}" in first, first
        assert f"AccessKeyID:     {stored['AccessKeyID']}" in first, first
        assert f"root.access_key_id={stored['AccessKeyID']}" in first, first

        server.stop()
        offset = len(server.log_path.read_bytes())
        server.start()
        deadline = time.monotonic() + 5
        while stored["AccessKeyID"] not in server.log_path.read_bytes()[offset:].decode() and time.monotonic() < deadline:
            time.sleep(0.1)
        second = server.log_path.read_bytes()[offset:].decode()
        assert f"root.access_key_id={stored['AccessKeyID']}" in second, second
        assert stored["AccessKeySecret"] not in second, "the secret is printed only when generated"
    finally:
        server.cleanup()


# MARK: File modes

def test_the_data_directory_is_readable_by_the_server_only():
    server = root_server()
    try:
        s3 = boto3_client(server)
        s3.put_object(Bucket=server.bucket, Key="private.txt", Body=b"secret bytes")
        upload = s3.create_multipart_upload(Bucket=server.bucket, Key="parts")
        s3.upload_part(Bucket=server.bucket, Key="parts", UploadId=upload["UploadId"], PartNumber=1, Body=b"part")
        checked = 0
        for directory, dirs, files in os.walk(server.dir / "data"):
            for name in [directory] + [os.path.join(directory, f) for f in files]:
                mode = stat.S_IMODE(os.stat(name).st_mode)
                assert mode & 0o077 == 0, f"{name} has mode {oct(mode)}"
                checked += 1
        assert any(f.startswith("meta.sqlite") for _, _, files in os.walk(server.dir / "data") for f in files)
        assert checked >= 6, checked
    finally:
        server.cleanup()


# MARK: Multipart uploads: limit per bucket, expiry

def test_create_multipart_upload_is_refused_beyond_the_buckets_limit():
    server = root_server(MaxMultipartUploadsPerBucket=3)
    try:
        s3 = boto3_client(server)
        ids = [s3.create_multipart_upload(Bucket=server.bucket, Key=f"k{n}")["UploadId"] for n in range(3)]
        with pytest.raises(ClientError) as info:
            s3.create_multipart_upload(Bucket=server.bucket, Key="k3")
        error = info.value.response
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 400, error
        assert error["Error"]["Code"] == "TooManyUploads", error
        # The OSS dialect refuses it the same way, in OSS XML.
        refused(lambda: root_bucket(server).init_multipart_upload("k3"), 400, "TooManyUploads")
        # Finishing one makes room.
        s3.abort_multipart_upload(Bucket=server.bucket, Key="k0", UploadId=ids[0])
        s3.create_multipart_upload(Bucket=server.bucket, Key="k3")
        assert len(s3.list_multipart_uploads(Bucket=server.bucket).get("Uploads", [])) == 3
    finally:
        server.cleanup()


def test_incomplete_uploads_expire_with_their_parts():
    server = root_server(MultipartUploadExpirySeconds=2)
    try:
        s3 = boto3_client(server)
        upload = s3.create_multipart_upload(Bucket=server.bucket, Key="abandoned")
        s3.upload_part(Bucket=server.bucket, Key="abandoned", UploadId=upload["UploadId"], PartNumber=1, Body=b"x" * 1024)
        objects = server.dir / "data" / "store" / "objects"
        deadline = time.monotonic() + 15
        while s3.list_multipart_uploads(Bucket=server.bucket).get("Uploads") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not s3.list_multipart_uploads(Bucket=server.bucket).get("Uploads")
        assert [f for _, _, files in os.walk(objects) for f in files] == [], "the part's file is deleted"
        with pytest.raises(ClientError) as info:
            s3.upload_part(Bucket=server.bucket, Key="abandoned", UploadId=upload["UploadId"], PartNumber=2, Body=b"late")
        assert info.value.response["Error"]["Code"] == "NoSuchUpload"
        assert "expired multipart uploads aborted" in server.output()
    finally:
        server.cleanup()


# MARK: OSS x-oss-content-sha256

class PinnedContentSHA256Auth(oss2.ProviderAuthV4):
    """oss2's V4 signer, except that a caller's x-oss-content-sha256 is kept (oss2 always sets
    UNSIGNED-PAYLOAD) and so signed, the way an OSS V4 client that hashes the body sends it."""

    class Headers(oss2.http.CaseInsensitiveDict):
        def __setitem__(self, name, value):
            if name.lower() == "x-oss-content-sha256" and name in self:
                return
            super().__setitem__(name, value)

    def _sign_request(self, req, bucket_name, key, in_additional_headers=None):
        req.headers = self.Headers(req.headers)
        return super()._sign_request(req, bucket_name, key, in_additional_headers)


@pytest.fixture(scope="module")
def oss_server():
    s = root_server()
    yield s
    s.cleanup()


def oss_root(server, version):
    if version == "v1":
        return root_bucket(server)
    auth = PinnedContentSHA256Auth(oss2.credentials.StaticCredentialsProvider(ROOT_ACCESS_KEY_ID, ROOT_SECRET))
    return oss2.Bucket(auth, server.gateway_url, server.bucket, region=REGION, connect_timeout=30)


@pytest.mark.parametrize("version", ["v1", "v4"])
def test_a_signed_oss_content_sha256_is_checked_against_the_body(oss_server, version):
    bucket = oss_root(oss_server, version)
    body = b"the bytes that were hashed"
    key = f"sha256-{version}"
    header = "x-oss-content-sha256"

    wrong = refused(lambda: bucket.put_object(key, body, headers={header: hashlib.sha256(b"other").hexdigest()}),
                    400, "InvalidDigest")
    assert "x-oss-content-sha256" in wrong.details.get("Message", ""), wrong.details
    assert_absent(oss_server, key)
    refused(lambda: bucket.put_object(key, body, headers={header: "not-a-digest"}), 400, "InvalidArgument")
    assert_absent(oss_server, key)

    bucket.put_object(key, body, headers={header: hashlib.sha256(body).hexdigest()})
    assert root_bucket(oss_server).get_object(key).read() == body
    bucket.put_object(key + "-unsigned", body, headers={header: "UNSIGNED-PAYLOAD"})
    assert root_bucket(oss_server).get_object(key + "-unsigned").read() == body
