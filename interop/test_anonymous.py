"""One rule for unsigned requests in all three dialects (issue 42): `AnonymousPolicyFile` decides
them. boto3 with `signature_version=UNSIGNED`, oss2's `AnonymousAuth`, a browser-like `fetch` with
an Origin, and the Storage API without a login token read a public-read prefix and nothing else;
without the file every unsigned request is refused, as before. Also: the Storage API takes
requests signed with SigV4 by vended credentials (botocore's signer), never the SecurityToken alone.
"""
import json

import boto3
import oss2
import pytest
import requests
from botocore import UNSIGNED
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET, Server
from s3_helpers import ROOT_ACCESS_KEY_ID, issued_credentials, root_client

BUCKET = "tollgate"
API = "/mobile/platform/storage/collections"
PUBLIC_READ = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/public/*"},
    {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}",
     "Condition": {"StringLike": {"s3:prefix": "public/*"}}},
]}


@pytest.fixture(scope="module")
def server():
    s = Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET,
                "AnonymousPolicyFile": "policy/public-read.json",
                "CORS": {"Gateway": [{"AllowedOrigins": ["https://app.example"], "AllowedMethods": ["GET"]}]},
                "Collections": {"public": {"Type": "shared", "Prefix": "public/"},
                                "notes": {"Type": "isolated", "ReadWrite": ["default"]}}})
    (s.dir / "policy" / "public-read.json").write_text(json.dumps(PUBLIC_READ))
    s.start()
    root = root_client(s)
    root.put_object(Bucket=BUCKET, Key="public/hello.txt", Body=b"hello", ContentType="text/plain")
    root.put_object(Bucket=BUCKET, Key="private/secret.txt", Body=b"secret")
    yield s
    s.cleanup()


def unsigned(server):
    return boto3.client("s3", endpoint_url=server.gateway_url, region_name="us-east-1",
                        config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"}))


def test_boto3_unsigned_reads_the_public_prefix_and_nothing_else(server):
    client = unsigned(server)
    assert client.get_object(Bucket=BUCKET, Key="public/hello.txt")["Body"].read() == b"hello"
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="public/")
    assert [o["Key"] for o in listed["Contents"]] == ["public/hello.txt"]
    for call in (lambda: client.get_object(Bucket=BUCKET, Key="private/secret.txt"),
                 lambda: client.list_objects_v2(Bucket=BUCKET),
                 lambda: client.put_object(Bucket=BUCKET, Key="public/new.txt", Body=b"x"),
                 lambda: client.delete_object(Bucket=BUCKET, Key="public/hello.txt"),
                 lambda: client.list_buckets()):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] in ("AccessDenied", "403")
    assert root_client(server).get_object(Bucket=BUCKET, Key="public/hello.txt")["Body"].read() == b"hello"


def test_oss2_anonymous_reads_the_public_prefix(server):
    bucket = oss2.Bucket(oss2.AnonymousAuth(), server.gateway_url, BUCKET)
    assert bucket.get_object("public/hello.txt").read() == b"hello"
    with pytest.raises(oss2.exceptions.AccessDenied):
        bucket.get_object("private/secret.txt")
    with pytest.raises(oss2.exceptions.AccessDenied):
        bucket.put_object("public/x.txt", b"x")


def test_a_browser_fetch_with_an_origin_gets_cors_headers(server):
    answer = requests.get(server.gateway_url + f"/{BUCKET}/public/hello.txt", headers={"Origin": "https://app.example"}, timeout=10)
    assert answer.status_code == 200 and answer.content == b"hello"
    assert answer.headers["Access-Control-Allow-Origin"] == "https://app.example"
    refused = requests.get(server.gateway_url + f"/{BUCKET}/private/secret.txt", headers={"Origin": "https://app.example"}, timeout=10)
    assert refused.status_code == 403


def test_the_storage_api_follows_the_same_rule(server):
    # The shared collection over public/: readable without a token by the anonymous policy, not writable.
    got = requests.get(server.url + API + "/public/objects/hello.txt", timeout=10)
    assert got.status_code == 200 and got.content == b"hello"
    assert requests.put(server.url + API + "/public/objects/new.txt", data=b"x", timeout=10).status_code == 401
    # Isolated collections never admit anonymous callers.
    assert requests.get(server.url + API + "/notes/objects?user=alice", timeout=10).status_code in (401, 403)


def test_without_the_policy_unsigned_requests_are_refused(tmp_path):
    s = Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET}).start()
    try:
        root_client(s).put_object(Bucket=BUCKET, Key="public/hello.txt", Body=b"hello")
        with pytest.raises(ClientError) as refused:
            unsigned(s).get_object(Bucket=BUCKET, Key="public/hello.txt")
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
    finally:
        s.cleanup()


def sigv4(method, url, creds, body=b"", signed_payload=False):
    """Signed by botocore: UNSIGNED-PAYLOAD unless `signed_payload` (then the body's SHA-256)."""
    request = AWSRequest(method=method, url=url, data=body)
    request.context["client_config"] = Config(s3={"payload_signing_enabled": signed_payload})
    S3SigV4Auth(Credentials(creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"]), "s3", "us-east-1").add_auth(request)
    return requests.request(method, url, data=body, headers=dict(request.headers), timeout=10)


def test_the_storage_api_takes_sigv4_from_vended_credentials(server):
    creds = issued_credentials(server, "--user", "alice", "--role", "default")
    put = sigv4("PUT", server.url + API + "/notes/objects/todo", creds, b"milk")
    assert put.status_code == 201, put.text
    got = sigv4("GET", server.url + API + "/notes/objects/todo", creds)
    assert got.status_code == 200 and got.content == b"milk"
    # A body whose hash is signed is refused (the Storage API does not hash bodies): UNSIGNED-PAYLOAD only.
    hashed = sigv4("PUT", server.url + API + "/notes/objects/todo", creds, b"eggs", signed_payload=True)
    assert hashed.status_code == 400
    # A tampered signature, and the SecurityToken alone as a bearer, are refused.
    tampered = dict(sigv4("GET", server.url + API + "/notes/objects/todo", creds).request.headers)
    tampered["Authorization"] = tampered["Authorization"][:-4] + "0000"
    assert requests.get(server.url + API + "/notes/objects/todo", headers=tampered, timeout=10).status_code == 403
    bearer = requests.get(server.url + API + "/notes/objects/todo", headers={"Authorization": "Bearer " + creds["SecurityToken"]}, timeout=10)
    assert bearer.status_code == 401
