"""Helpers for the OSS gateway interoperability tests: real clients only (oss2, boto3).

Nothing here signs a request: credentials come from the token endpoint (fetched the way the
Android SDK's `OSSAuthCredentialsProvider` does) or from `tollgate token issue`, and oss2 or
boto3 do all the signing.
"""
import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from contextlib import contextmanager
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

import oss2
import pytest

from conftest import ROOT_SECRET, binary

ROOT_ACCESS_KEY_ID = "TGROOTOSS"
REGION = "cn-hangzhou"
OTHER_BUCKET = "tollgate-private"  # exists, but outside the read/readwrite policies
MiB = 1024 * 1024
# oss2's three signature versions: V1 (HMAC-SHA1), V2 (`OSS2`, HMAC-SHA256, every query
# parameter signed) and V4 (OSS4-HMAC-SHA256).
VERSIONS = ["v1", "v2", "v4"]




# MARK: Credentials

def android_fetch(url: str) -> dict:
    """What `OSSAuthCredentialsProvider.getFederationToken()` does: a bare GET of the auth server
    URL, the body parsed as JSON, `getInt("StatusCode") == 200`, then `getString` of the four
    fields and `new SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss")` (UTC) over `Expiration`."""
    with urllib.request.urlopen(url, timeout=10) as response:
        status = response.status
        content_type = response.headers.get("Content-Type", "")
        body = response.read().decode("utf-8")
    data = json.loads(body)
    assert status == 200, body
    assert content_type.split(";")[0].strip() == "application/json", content_type
    status_code = data["StatusCode"]
    assert type(status_code) is int, f"StatusCode must be a JSON integer, got {status_code!r}"
    assert status_code == 200, body
    for field in ("AccessKeyId", "AccessKeySecret", "SecurityToken", "Expiration"):
        assert isinstance(data[field], str) and data[field], (field, body)
    # Field order as the reference app server writes it.
    assert list(data) == ["StatusCode", "AccessKeyId", "AccessKeySecret", "SecurityToken", "Expiration"], list(data)
    return data


def parse_expiration(value: str) -> datetime:
    """Both ways the SDKs read `Expiration`: the full `yyyy-MM-ddTHH:mm:ssZ` and Java's
    SimpleDateFormat pattern `yyyy-MM-dd'T'HH:mm:ss`, which reads the first 19 characters."""
    full = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    java = datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    assert full == java
    return full


def issue(server, *args, faketime: str = None) -> dict:
    """`tollgate token issue --config … ARGS`, optionally under `faketime -f OFFSET`."""
    command = [binary(), "token", "issue", "--config", str(server.config_path), *args]
    if faketime:
        command = ["faketime", "-f", faketime, *command]
    result = subprocess.run(command, cwd=server.dir, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# MARK: Clients

def provider(creds: dict, *, secret: str = None, token: str = None):
    return oss2.credentials.StaticCredentialsProvider(
        creds["AccessKeyId"], secret if secret is not None else creds["AccessKeySecret"],
        token if token is not None else creds["SecurityToken"])


def sts_auth(creds: dict, version: str, *, secret: str = None, token: str = None):
    """oss2's signer for temporary credentials: `oss2.StsAuth` (V1), or `oss2.ProviderAuthV2` /
    `oss2.ProviderAuthV4` over a credentials provider carrying the security token."""
    secret = secret if secret is not None else creds["AccessKeySecret"]
    token = token if token is not None else creds["SecurityToken"]
    if version == "v1":
        return oss2.StsAuth(creds["AccessKeyId"], secret, token)
    if version == "v2":
        return oss2.ProviderAuthV2(provider(creds, secret=secret, token=token))
    return oss2.ProviderAuthV4(provider(creds, secret=secret, token=token))


def sts_bucket(server, creds: dict, version: str, bucket_name: str = None, *, secret: str = None,
               token: str = None) -> oss2.Bucket:
    """An oss2 bucket signed with temporary credentials (`sts_auth`). The endpoint is an IP
    address, so oss2 addresses the bucket path-style by itself."""
    return oss2.Bucket(sts_auth(creds, version, secret=secret, token=token), server.gateway_url,
                       bucket_name or server.bucket, region=REGION, connect_timeout=30)


def root_bucket(server, bucket_name: str = None) -> oss2.Bucket:
    return oss2.Bucket(oss2.Auth(ROOT_ACCESS_KEY_ID, ROOT_SECRET), server.gateway_url,
                       bucket_name or server.bucket, connect_timeout=30)


def boto3_client(server, creds: dict = None):
    import boto3
    from botocore.config import Config
    if creds is None:
        ak, secret, token = ROOT_ACCESS_KEY_ID, ROOT_SECRET, None
    else:
        ak, secret, token = creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"]
    return boto3.client("s3", endpoint_url=server.gateway_url, region_name="us-east-1",
                        aws_access_key_id=ak, aws_secret_access_key=secret, aws_session_token=token,
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


# MARK: Assertions

def refused(call, status: int, code: str) -> oss2.exceptions.OssError:
    """Runs `call`, which must raise the OSS error `code` with HTTP `status`, rendered as OSS
    renders errors (Code, Message, RequestId, HostId; the RequestId also in x-oss-request-id)."""
    with pytest.raises(oss2.exceptions.OssError) as info:
        call()
    error = info.value
    codes = code if isinstance(code, tuple) else (code,)
    assert error.status == status and error.code in codes, \
        f"expected {status} {code}, got {error.status} {error.code}: {error.details} {error.body!r}"
    request_id = error.headers.get("x-oss-request-id")
    assert request_id, dict(error.headers)
    if error.body:  # HEAD responses carry no body
        assert error.details.get("RequestId") == request_id, error.details
        assert error.details.get("HostId"), error.details
        assert error.details.get("Message"), error.details
        assert error.headers.get("Content-Type", "").startswith("application/xml"), dict(error.headers)
    return error


def assert_absent(server, key: str, bucket_name: str = None):
    """Verified with root credentials: nothing is stored under `key`."""
    root = root_bucket(server, bucket_name)
    assert not root.object_exists(key), f"{key} exists after a refused request"


@contextmanager
def captured_oss2_signing():
    """Records what oss2 signed: the strings to sign it logs (DEBUG, `oss2.auth`) and the
    headers and URL of every request it sent."""
    record = {"strings": [], "requests": [], "urls": []}

    class Handler(logging.Handler):
        def emit(self, entry):
            message = entry.getMessage()
            marker = "string to be signed = "
            if marker in message:
                value = message.split(marker, 1)[1]
                if value.startswith("b'") or value.startswith('b"'):
                    import ast
                    value = ast.literal_eval(value).decode("utf-8")
                record["strings"].append(value)

    logger = logging.getLogger("oss2.auth")
    handler = Handler(level=logging.DEBUG)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    original = oss2.http.Session.do_request

    def do_request(self, req, timeout):
        record["requests"].append(dict(req.headers))
        record["urls"].append(req.url)
        return original(self, req, timeout)

    oss2.http.Session.do_request = do_request
    try:
        yield record
    finally:
        oss2.http.Session.do_request = original
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def http_date_of(headers) -> datetime:
    return parsedate_to_datetime(headers["date"])


def iso_prefix(value: str) -> datetime:
    return datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


# MARK: oss2 under a skewed clock

SKEWED_CLIENT = textwrap.dedent("""
    import json, sys, time
    import oss2
    args = json.loads(sys.argv[1])
    creds = args["creds"]
    if args["version"] == "v1":
        auth = oss2.StsAuth(creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"])
    elif args["version"] == "v2":
        auth = oss2.StsAuth(creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"], auth_version="v2")
    else:
        auth = oss2.ProviderAuthV4(oss2.credentials.StaticCredentialsProvider(
            creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"]))
    bucket = oss2.Bucket(auth, args["endpoint"], args["bucket"], region=args["region"])
    out = {"client_time": time.time()}
    try:
        bucket.put_object(args["key"], b"skewed")
        out["ok"] = True
    except oss2.exceptions.OssError as e:
        out.update(ok=False, status=e.status, code=e.code, details=e.details,
                   headers={k.lower(): v for k, v in e.headers.items()}, request_id=e.request_id)
    print(json.dumps(out))
""")


def run_skewed_client(server, creds: dict, version: str, key: str, offset: str = "+1h") -> dict:
    """Runs oss2 in a subprocess whose clock `faketime` moves by `offset`."""
    args = json.dumps({"creds": creds, "version": version, "endpoint": server.gateway_url,
                       "bucket": server.bucket, "region": REGION, "key": key})
    result = subprocess.run(["faketime", "-f", offset, sys.executable, "-c", SKEWED_CLIENT, args],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
