"""Stateless instances: two gateways (A and B) with the same config and root secret on the s3
backend over one Ceph RGW behave as one. A token from A works on B; an object written through
A reads through B (both dialects); a revocation made through A refuses the token on B within
5 s; `kill -9` of A during 16 concurrent uploads loses no acknowledged object and leaves no
partial one; with RGW stopped both answer 503 with Retry-After in the caller's dialect, and
/healthz says so, until RGW is back, when service returns by itself.
"""
import hashlib
import json
import os
import signal
import threading
import time
import urllib.request

import oss2
import pytest
import requests
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET, Server, get_json, rgw_storage
from s3_helpers import ROOT_ACCESS_KEY_ID, MiB, s3_client

BUCKET = "tollgate"
PROPAGATION_SECONDS = 5


class Instances:
    """Instances with one config (the same root secret, the same bucket prefix: the same buckets),
    each in a directory of its own."""

    def __init__(self, rgw):
        self.rgw = rgw
        self.prefix = "p" + os.urandom(3).hex() + "-"

    def start(self) -> Server:
        # A shared collection open to anonymous callers, for the change feed across instances.
        server = Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET,
                         "Collections": {"notes": {"Type": "shared", "Anonymous": True}}})
        storage = rgw_storage(self.rgw, server.dir, self.prefix)
        server.configure(Storage={**storage, "RequestTimeoutSeconds": 10})
        return server.start()


@pytest.fixture(scope="module")
def pair(rgw):
    instances = Instances(rgw)
    a = instances.start()
    b = instances.start()
    yield a, b, instances
    for server in (a, b):
        server.stop()
        # The backend's keys never reach a log line.
        assert rgw.secret_key not in server.output() and rgw.access_key not in server.output()
        server.cleanup()


def token(server) -> dict:
    status, _, body = get_json(server.url + "/")
    assert status == 200, body
    return json.loads(body)


def oss_bucket(server, creds) -> oss2.Bucket:
    auth = oss2.StsAuth(creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"])
    return oss2.Bucket(auth, server.gateway_url, BUCKET, connect_timeout=10)


def test_the_change_feed_is_one_across_instances(pair):
    """Changes made through A (S3 and the Storage API) and B (a delete) appear in B's feed, and
    A's, once each and in the same order: the journal lives in the cluster."""
    a, b, _ = pair
    feed = "/mobile/platform/storage/collections/notes"
    start = requests.get(b.url + feed + "/changes", timeout=10).json()["cursor"]
    s3_client(a, token(a)).put_object(Bucket=BUCKET, Key="notes/from-s3", Body=b"1")
    assert requests.put(a.url + feed + "/objects/from-api", data=b"2", timeout=10).status_code == 201
    assert requests.delete(b.url + feed + "/objects/from-s3", timeout=10).status_code == 204
    expected = [("put", "from-s3"), ("put", "from-api"), ("delete", "from-s3")]
    for server in (b, a):
        seen, cursor = [], start
        deadline = time.monotonic() + 30
        while len(seen) < len(expected) and time.monotonic() < deadline:
            answer = requests.get(server.url + feed + f"/changes?since={cursor}&wait=5", timeout=15).json()
            seen += [(item["op"], item["id"]) for item in answer["items"]]
            cursor = answer["cursor"]
        assert seen == expected


def test_a_token_from_a_works_on_b_and_objects_cross_both_ways(pair):
    a, b, _ = pair
    creds = token(a)
    on_a, on_b = s3_client(a, creds), s3_client(b, creds)
    body = os.urandom(300_000)
    put = on_a.put_object(Bucket=BUCKET, Key="cross/s3.bin", Body=body, Metadata={"owner": "alice"}, ContentType="image/png")
    got = on_b.get_object(Bucket=BUCKET, Key="cross/s3.bin")
    assert got["Body"].read() == body and got["ETag"] == put["ETag"]
    assert got["Metadata"] == {"owner": "alice"} and got["ContentType"] == "image/png"
    # The other way, and a listing on either sees it.
    on_b.put_object(Bucket=BUCKET, Key="cross/from-b", Body=b"b")
    assert on_a.get_object(Bucket=BUCKET, Key="cross/from-b")["Body"].read() == b"b"
    assert {o["Key"] for o in on_a.list_objects_v2(Bucket=BUCKET, Prefix="cross/")["Contents"]} == {"cross/s3.bin", "cross/from-b"}

    # OSS: written through A with oss2, read through B, with the CRC-64 A computed (oss2 checks it).
    data = os.urandom(200_000)
    written = oss_bucket(a, creds).put_object("cross/oss.bin", data, headers={"x-oss-meta-kind": "photo"})
    read = oss_bucket(b, creds).get_object("cross/oss.bin")
    assert read.read() == data and read.server_crc == written.crc
    assert read.headers["x-oss-meta-kind"] == "photo"
    # An OSS multipart upload with 100 KiB parts, begun on A, parts on B, completed on A.
    parts = [os.urandom(100 * 1024), os.urandom(100 * 1024), os.urandom(1234)]
    upload = oss_bucket(a, creds).init_multipart_upload("cross/parts.bin").upload_id
    infos = [oss2.models.PartInfo(n + 1, oss_bucket(b, creds).upload_part("cross/parts.bin", upload, n + 1, part).etag)
             for n, part in enumerate(parts)]
    oss_bucket(a, creds).complete_multipart_upload("cross/parts.bin", upload, infos)
    assert oss_bucket(b, creds).get_object("cross/parts.bin").read() == b"".join(parts)


def signed_revoke(server, body: dict):
    data = json.dumps(body)
    request = AWSRequest(method="POST", url=server.url + "/admin/revoke", data=data, headers={"Content-Type": "application/json"})
    S3SigV4Auth(Credentials(ROOT_ACCESS_KEY_ID, ROOT_SECRET), "tollgate", "us-east-1").add_auth(request)
    prepared = request.prepare()
    return requests.post(prepared.url, data=data, headers=dict(prepared.headers), timeout=10)


def reads(server, creds) -> bool:
    try:
        s3_client(server, creds).list_objects_v2(Bucket=BUCKET, MaxKeys=1)
        return True
    except ClientError as error:
        assert error.response["Error"]["Code"] == "InvalidAccessKeyId", error.response
        return False


def test_a_revocation_through_a_refuses_the_token_on_b_within_5_seconds(pair):
    a, b, _ = pair
    creds = token(a)
    other = token(a)
    assert reads(b, creds)
    answer = signed_revoke(a, {"AccessKeyId": creds["AccessKeyId"]})
    assert answer.status_code == 200, answer.text
    started = time.monotonic()
    while reads(b, creds):
        assert time.monotonic() - started < PROPAGATION_SECONDS, "B still accepts the revoked credentials"
        time.sleep(0.1)
    assert not reads(a, creds)
    # Others carry on, on both.
    assert reads(a, other) and reads(b, other)
    # A second revocation, through B, replaces the shared list A wrote (a conditional PUT on
    # the backend's own ETag): both refuse both tokens.
    answer = signed_revoke(b, {"AccessKeyId": other["AccessKeyId"]})
    assert answer.status_code == 200, answer.text
    started = time.monotonic()
    while reads(a, other):
        assert time.monotonic() - started < PROPAGATION_SECONDS, "A still accepts the revoked credentials"
        time.sleep(0.1)
    assert not reads(b, other) and not reads(b, creds)


def upload(server, creds, key: str, body: bytes, acknowledged: dict, failed: list):
    client = s3_client(server, creds)
    try:
        client.put_object(Bucket=BUCKET, Key=key, Body=body)
        acknowledged[key] = hashlib.sha256(body).hexdigest()
    except Exception as error:  # the instance was killed under it
        failed.append((key, repr(error)))


def test_kill_9_during_16_uploads_loses_no_acknowledged_object_and_leaves_no_partial_one(rgw, pair):
    _, b, instances = pair
    victim = instances.start()
    try:
        creds = token(victim)
        bodies = {f"crash/{n:02d}": os.urandom(24 * MiB + n) for n in range(16)}
        # What was there before: an older version of half the keys (a partial replacement must not show either).
        for key in list(bodies)[:8]:
            s3_client(b, creds).put_object(Bucket=BUCKET, Key=key, Body=b"old version")
        acknowledged: dict[str, str] = {}
        failed: list = []
        threads = [threading.Thread(target=upload, args=(victim, creds, key, body, acknowledged, failed)) for key, body in bodies.items()]
        for thread in threads:
            thread.start()
        # Killed while the uploads stream (384 MiB in all take a few seconds to reach RGW here).
        time.sleep(0.5)
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait()
        for thread in threads:
            thread.join(timeout=120)
        assert failed, "the kill came after every upload: nothing was tested"
        on_b = s3_client(b, creds)
        for key, body in bodies.items():
            try:
                stored = on_b.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            except ClientError as error:
                assert error.response["Error"]["Code"] == "NoSuchKey"
                assert key not in acknowledged, f"{key} was acknowledged and is gone"
                continue
            digest = hashlib.sha256(stored).hexdigest()
            if key in acknowledged:
                assert digest == acknowledged[key], f"{key}: acknowledged, read back different"
            else:
                # Not acknowledged: the whole new version, or the old one, never a part.
                assert digest == hashlib.sha256(body).hexdigest() or stored == b"old version", f"{key}: a partial object"
    finally:
        victim.cleanup()


def status_of(method: str, url: str, **kwargs) -> requests.Response:
    return requests.request(method, url, timeout=15, **kwargs)


def test_rgw_stopped_gives_503_with_retry_after_in_each_dialect_and_service_returns(rgw, pair):
    a, b, _ = pair
    creds = token(a)
    s3_client(a, creds).put_object(Bucket=BUCKET, Key="outage/k", Body=b"before")
    presigned = {server: s3_client(server, creds, signature_version="s3v4").generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "outage/k"}, ExpiresIn=600) for server in (a, b)}
    oss_urls = {server: oss_bucket(server, creds).sign_url("GET", "outage/k", 600) for server in (a, b)}
    rgw.stop_gateway()
    try:
        for server in (a, b):
            started = time.monotonic()
            answer = status_of("GET", presigned[server])
            assert answer.status_code == 503, answer.text
            assert int(answer.headers["Retry-After"]) >= 1
            assert "<Code>ServiceUnavailable</Code>" in answer.text and "x-amz-request-id" in answer.headers
            oss = status_of("GET", oss_urls[server])
            assert oss.status_code == 503 and int(oss.headers["Retry-After"]) >= 1
            assert "x-oss-request-id" in oss.headers and "<Code>ServiceUnavailable</Code>" in oss.text
            assert time.monotonic() - started < 25, "answered within the backend timeout"
            # A write is refused the same way (boto3, retries off), and nothing hangs.
            with pytest.raises(ClientError) as refused:
                s3_client(server, creds).put_object(Bucket=BUCKET, Key="outage/new", Body=b"x" * 1000)
            assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
            assert refused.value.response["Error"]["Code"] == "ServiceUnavailable"
            health = json.loads(urllib.request.urlopen(server.url + "/healthz", timeout=15).read())
            assert health["backend"] == "unreachable", health
        # Failing fast while it is down: the circuit answers at once.
        started = time.monotonic()
        assert status_of("GET", presigned[a]).status_code == 503
        assert time.monotonic() - started < 1
    finally:
        rgw.start_gateway()
    # Back by itself: no restart of either instance.
    deadline = time.monotonic() + 30
    for server in (a, b):
        while True:
            answer = status_of("GET", presigned[server])
            if answer.status_code == 200:
                assert answer.content == b"before"
                break
            assert time.monotonic() < deadline, f"{server.gateway_url} did not recover: {answer.status_code}"
            time.sleep(0.5)
        health = json.loads(urllib.request.urlopen(server.url + "/healthz", timeout=15).read())
        assert health["backend"] == "ok"
