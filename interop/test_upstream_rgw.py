"""Upstream STS against a real STS engine (issue 41): Ceph RGW's `AssumeRole` with a session
policy. Tollgate vends RGW's own temporary credentials to alice and bob through the JSON
endpoint (JWT login); each then talks to RGW directly with boto3, confined by the session
policy Tollgate rendered for them to their own prefix; and the credentials stop working when
the answer's `Expiration` says (RGW restarted with its clock moved on by libfaketime).
"""
import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import botocore.auth

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET, CephCluster, Server
from test_upstream_sts import AUTHENTICATION, vend, write_keys

BUCKET = "tollgate-upstream"
ROLE = "tollgate-app"
# The role policy Tollgate renders per user and sends as the session policy (IAM dialect).
ISOLATED = {"Version": "2012-10-17", "Statement": [
    {"Sid": "OwnObjects", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
     "Resource": ["arn:aws:s3:::$BUCKET_NAME/${aws:username}/*"]},
    {"Sid": "ListOwn", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::$BUCKET_NAME"],
     "Condition": {"StringLike": {"s3:prefix": ["${aws:username}/*"]}}},
]}


def client(rgw, answer):
    return boto3.client("s3", endpoint_url=rgw.endpoint, region_name=rgw.region,
                        aws_access_key_id=answer["AccessKeyId"], aws_secret_access_key=answer["AccessKeySecret"],
                        aws_session_token=answer["SecurityToken"],
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def denied(call) -> str:
    with pytest.raises(ClientError) as failure:
        call()
    return failure.value.response["Error"]["Code"]


@pytest.fixture(scope="module")
def rgw_role(rgw):
    keys = dict(endpoint_url=rgw.endpoint, region_name=rgw.region, aws_access_key_id=rgw.access_key,
                aws_secret_access_key=rgw.secret_key)
    admin = rgw.s3()
    admin.create_bucket(Bucket=BUCKET)
    iam = boto3.client("iam", **keys)
    # RGW 16 reads a `+` in a form body literally: compact JSON, no spaces.
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": [f"arn:aws:iam:::user/{rgw.env['RGW_ADMIN_UID']}"]},
        "Action": ["sts:AssumeRole"]}]}, separators=(",", ":"))
    role = iam.create_role(RoleName=ROLE, Path="/", AssumeRolePolicyDocument=trust)["Role"]
    iam.put_role_policy(RoleName=ROLE, PolicyName="bucket", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*",
                                                "Resource": [f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"]}]},
        separators=(",", ":")))
    yield role["Arn"]
    iam.delete_role_policy(RoleName=ROLE, PolicyName="bucket")
    iam.delete_role(RoleName=ROLE)
    for page in admin.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            admin.delete_object(Bucket=BUCKET, Key=item["Key"])
    admin.delete_bucket(Bucket=BUCKET)


@pytest.fixture(scope="module")
def server(rgw, rgw_role):
    s = Server({
        "AccessKeySecret": ROOT_SECRET, "Variables": {"BUCKET_NAME": BUCKET}, "CreatePolicyBuckets": False,
        "Authentication": AUTHENTICATION, "TokenExpireTime": 900,
        "Upstreams": {"rgw": {"Type": "aws-sts", "Endpoint": rgw.endpoint, "Region": rgw.region,
                              "AccessKeyIDFile": "secrets/ak", "AccessKeySecretFile": "secrets/sk"}},
        "Roles": {"photos": {"PolicyFile": "policy/rgw_isolated.txt", "Upstream": "rgw", "RoleArn": rgw_role}},
        "RateLimits": {"PerSubjectPerMinute": 0},
    }, bucket=BUCKET)
    (s.dir / "policy" / "rgw_isolated.txt").write_text(json.dumps(ISOLATED, indent=2))
    write_keys(s.dir, rgw.access_key, rgw.secret_key)
    s.start()
    yield s
    s.cleanup()


def test_alice_and_bob_use_rgw_credentials_confined_to_their_own_prefix(rgw, server):
    asked = time.time()
    answers = {}
    for user in ("alice", "bob"):
        status, _, body = vend(server, user)
        assert status == 200, body + server.output()[-2000:]
        answers[user] = json.loads(body)
    assert answers["alice"]["AccessKeyId"] != answers["bob"]["AccessKeyId"]
    for user, answer in answers.items():
        expiration = datetime.strptime(answer["Expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
        assert abs(expiration - (asked + 900)) < 30, "TokenExpireTime (900 s) is the duration RGW was asked for"
        s3 = client(rgw, answer)
        s3.put_object(Bucket=BUCKET, Key=f"{user}/photo.jpg", Body=f"{user}'s photo".encode())
        assert s3.get_object(Bucket=BUCKET, Key=f"{user}/photo.jpg")["Body"].read() == f"{user}'s photo".encode()
        listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{user}/")
        assert [item["Key"] for item in listed.get("Contents", [])] == [f"{user}/photo.jpg"]
    for user, other in (("alice", "bob"), ("bob", "alice")):
        s3 = client(rgw, answers[user])
        assert denied(lambda: s3.get_object(Bucket=BUCKET, Key=f"{other}/photo.jpg")) == "AccessDenied"
        assert denied(lambda: s3.put_object(Bucket=BUCKET, Key=f"{other}/planted.jpg", Body=b"x")) == "AccessDenied"
        assert denied(lambda: s3.put_object(Bucket=BUCKET, Key="top-level.jpg", Body=b"x")) == "AccessDenied"
        assert denied(lambda: s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{other}/")) == "AccessDenied"
    # Nothing either of them was refused was written.
    keys = [item["Key"] for item in rgw.s3().list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    assert sorted(keys) == ["alice/photo.jpg", "bob/photo.jpg"]


def restart_gateway(rgw, offset_seconds=None):
    """radosgw alone, restarted; with `offset_seconds`, its clock runs that far ahead
    (libfaketime, which `.ci/run` installs as Debian's faketime)."""
    rgw.stop_gateway()
    command = ["bash", str(CephCluster.SCRIPT), "rgw-start", str(rgw.dir)]
    if offset_seconds is not None:
        command = ["faketime", "-f", f"{offset_seconds:+d}s"] + command
    subprocess.run(command, check=True, timeout=300, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    rgw.env = rgw.read_env()


@contextmanager
def client_clock(offset_seconds):
    """botocore signs with its clock moved on as far as RGW's, so RGW's 15-minute skew check
    passes and its expiry check decides."""
    real = botocore.auth.datetime.datetime

    class Shifted(real):
        @classmethod
        def utcnow(cls):
            return real.utcnow() + timedelta(seconds=offset_seconds)

        @classmethod
        def now(cls, tz=None):
            return real.now(tz) + timedelta(seconds=offset_seconds)

    botocore.auth.datetime.datetime = Shifted
    try:
        yield
    finally:
        botocore.auth.datetime.datetime = real


@pytest.mark.skipif(shutil.which("faketime") is None and os.environ.get("CI") != "true", reason="faketime is not installed")
def test_rgw_credentials_stop_working_when_the_answer_says(rgw, server):
    status, _, body = vend(server, "carol")
    assert status == 200, body
    answer = json.loads(body)
    expiration = datetime.strptime(answer["Expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    client(rgw, answer).put_object(Bucket=BUCKET, Key="carol/a", Body=b"a")
    try:
        # Two minutes before Expiration (by RGW's clock, and the client's) they still work; two
        # minutes after, not.
        before = int(expiration - 120 - time.time())
        restart_gateway(rgw, before)
        with client_clock(before):
            assert client(rgw, answer).get_object(Bucket=BUCKET, Key="carol/a")["Body"].read() == b"a"
        after = int(expiration + 120 - time.time())
        restart_gateway(rgw, after)
        with client_clock(after):
            code = denied(lambda: client(rgw, answer).get_object(Bucket=BUCKET, Key="carol/a"))
        assert code in ("AccessDenied", "ExpiredToken", "InvalidAccessKeyId"), code
    finally:
        restart_gateway(rgw)
    assert client(rgw, answer).get_object(Bucket=BUCKET, Key="carol/a")["Body"].read() == b"a"
