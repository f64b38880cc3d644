"""Upstream STS (issue 41): roles vended by the cloud's own STS through the token endpoint.

Peers: a loopback Alibaba STS stand-in that verifies every signature with Alibaba's own Python
code (upstream_standins.py), and moto's STS server with its IAM authentication on, which
verifies SigV4. App users log in with HS256 JWTs minted here by PyJWT.
"""
import json
import os
import re
import time
import urllib.parse
import urllib.request
from pathlib import Path

import boto3
import jwt
import pytest

from conftest import ROOT_SECRET, Server, free_port, get_json
from upstream_standins import ALIYUN_KEY_ID, ALIYUN_KEY_SECRET, AliyunSTSStandIn, MotoServer

JWT_SECRET = "upstream-interop-jwt-secret-0123456789abcdef"
os.environ["TOLLGATE_TEST_JWT_SECRET"] = JWT_SECRET
ISSUER = "https://login.interop.example"
AUDIENCE = "photos-app"
ROLE_ARN = "acs:ram::1234567890123456:role/app-upload"
AUTHENTICATION = {
    "Providers": [{"Issuer": ISSUER, "Audiences": [AUDIENCE], "Algorithms": ["HS256"],
                   "HMACSecretEnv": "TOLLGATE_TEST_JWT_SECRET", "Claims": ["team"]}],
    "DefaultRole": "photos",
}
# user_isolated_policy.txt for bucket "photos", minified: what alice's phone may do, as sent.
ALICE_POLICY = ('{"Statement":[{"Sid":"ReadWriteOwnSpace","Action":["oss:GetObject","oss:PutObject","oss:DeleteObject",'
                '"oss:ListParts","oss:AbortMultipartUpload"],"Effect":"Allow","Resource":["acs:oss:*:*:photos/alice/*"]},'
                '{"Sid":"ListOwnSpace","Action":["oss:ListObjects","oss:ListMultipartUploads"],"Effect":"Allow",'
                '"Resource":["acs:oss:*:*:photos"],"Condition":{"StringLike":{"oss:Prefix":["alice/*"]}}}],"Version":"1"}')


def login(subject: str, **claims) -> str:
    now = int(time.time())
    return jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "iat": now, "exp": now + 600, **claims},
                      JWT_SECRET, algorithm="HS256")


def vend(server: Server, subject: str | None = None, query: str = "", **claims):
    headers = {"Authorization": "Bearer " + login(subject, **claims)} if subject else {}
    request = urllib.request.Request(server.url + "/" + query, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


def write_keys(directory: Path, key_id: str = ALIYUN_KEY_ID, secret: str = ALIYUN_KEY_SECRET):
    (directory / "secrets").mkdir(exist_ok=True)
    (directory / "secrets" / "ak").write_text(key_id + "\n")
    (directory / "secrets" / "sk").write_text(secret + "\n")


def upstream_server(standin_url: str, *, extra_upstream=None, extra_config=None, keys=None) -> Server:
    """A Tollgate whose role `photos` is vended by the Alibaba stand-in, `local` by itself."""
    upstream = {"Type": "aliyun-sts", "Endpoint": standin_url, "Region": "cn-hangzhou",
                "AccessKeyIDFile": "secrets/ak", "AccessKeySecretFile": "secrets/sk"}
    upstream.update(extra_upstream or {})
    config = {
        "AccessKeySecret": ROOT_SECRET,
        "Variables": {"BUCKET_NAME": "photos"},
        # Members of the team "local" get the role Tollgate vends itself.
        "Authentication": dict(AUTHENTICATION, RoleRules=[{"Claim": "team", "Match": "Equals", "Value": "local", "Role": "local"}]),
        "Upstreams": {"aliyun": upstream},
        "Roles": {"photos": {"PolicyFile": "policy/user_isolated_policy.txt", "Upstream": "aliyun", "RoleArn": ROLE_ARN,
                             "MaxSessionSeconds": 3600},
                  "local": "policy/bucket_read_policy.txt"},
        "RateLimits": {"PerSubjectPerMinute": 0},
    }
    config.update(extra_config or {})
    server = Server(config, bucket="photos")
    write_keys(server.dir, *(keys or (ALIYUN_KEY_ID, ALIYUN_KEY_SECRET)))
    return server


@pytest.fixture(scope="module")
def standin():
    s = AliyunSTSStandIn()
    yield s
    s.close()


@pytest.fixture(scope="module")
def server(standin):
    s = upstream_server(standin.url).start()
    yield s
    s.cleanup()


@pytest.fixture(autouse=True)
def fresh(standin):
    standin.reset()


# ---------------------------------------------------------------- Alibaba STS, verified by Alibaba's signer

def test_alice_gets_the_upstreams_credentials_field_for_field(server, standin):
    status, headers, body = vend(server, "alice")
    assert status == 200, body
    assert headers["Content-Type"].startswith("application/json")
    answer = json.loads(body)
    minted = standin.minted[-1]
    # The answer is the upstream's credentials, in the reference server's field order.
    assert list(answer) == ["StatusCode", "AccessKeyId", "AccessKeySecret", "SecurityToken", "Expiration"]
    assert answer == {"StatusCode": 200, "AccessKeyId": minted["AccessKeyId"], "AccessKeySecret": minted["AccessKeySecret"],
                      "SecurityToken": minted["SecurityToken"], "Expiration": minted["Expiration"]}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", answer["Expiration"])
    # What the upstream was asked, after Alibaba's signer accepted the signature.
    assert standin.refused == []
    request = standin.requests[-1]
    assert request["Action"] == "AssumeRole" and request["Version"] == "2015-04-01"
    assert request["AccessKeyId"] == ALIYUN_KEY_ID
    assert request["RoleArn"] == ROLE_ARN
    assert request["RoleSessionName"] == "alice"
    assert request["DurationSeconds"] == "900"
    assert request["RegionId"] == "cn-hangzhou"
    assert request["Policy"] == ALICE_POLICY
    assert ALIYUN_KEY_SECRET not in json.dumps(request)


def test_a_signature_alibabas_code_rejects_is_refused_and_reported(standin):
    """The stand-in is a real verifier: keys that do not match make it refuse, and the phone
    gets the upstream's code in the token JSON shape."""
    s = upstream_server(standin.url, keys=(ALIYUN_KEY_ID, "not-the-secret-alibaba-knows-00")).start()
    try:
        status, _, body = vend(s, "alice")
        assert status == 502, body
        answer = json.loads(body)
        assert answer["StatusCode"] == 502
        assert answer["ErrorCode"] == "SignatureDoesNotMatch"
        assert "aliyun" in answer["ErrorMessage"]
        assert [code for code, _ in standin.refused] == ["SignatureDoesNotMatch"], "a refusal is not retried"
        assert "not-the-secret" not in body and "not-the-secret" not in s.output()
    finally:
        s.cleanup()


def test_each_user_gets_their_own_policy_and_reuse_serves_a_burst_with_one_call(server, standin):
    first = [json.loads(vend(server, "bob")[2]) for _ in range(5)]
    assert len(standin.requests) == 1, "the same user and role within the reuse window: one AssumeRole"
    assert len({answer["AccessKeyId"] for answer in first}) == 1
    assert standin.requests[0]["Policy"] == ALICE_POLICY.replace("alice", "bob")
    status, _, body = vend(server, "carol")
    assert status == 200 and len(standin.requests) == 2
    assert json.loads(body)["AccessKeyId"] != first[0]["AccessKeyId"]


def test_jwt_claims_fill_the_policy_and_unsafe_values_are_refused(standin):
    s = upstream_server(standin.url, extra_config={"Roles": {"photos": {
        "PolicyFile": "policy/team.txt", "Upstream": "aliyun", "RoleArn": ROLE_ARN}, "local": "policy/bucket_read_policy.txt"}})
    (s.dir / "policy" / "team.txt").write_text(json.dumps({"Version": "1", "Statement": [
        {"Effect": "Allow", "Action": ["oss:GetObject"], "Resource": ["acs:oss:*:*:photos/teams/${jwt:team}/*"]}]}))
    s.start()
    try:
        status, _, body = vend(s, "dave", team="red")
        assert status == 200, body
        assert json.loads(standin.requests[-1]["Policy"])["Statement"][0]["Resource"] == ["acs:oss:*:*:photos/teams/red/*"]
        for unsafe in ("*", "red/../blue", "a/b"):
            status, _, body = vend(s, "dave", team=unsafe)
            assert status == 403 and json.loads(body)["ErrorCode"] == "IDPRejectedClaim", body
        status, _, body = vend(s, "dave")
        assert status == 403 and "${jwt:team}" in json.loads(body)["ErrorMessage"], "no claim: refused, never sent unfilled"
        assert len(standin.requests) == 1, "nothing unsafe was sent"
    finally:
        s.cleanup()


def test_local_roles_and_upstream_roles_mix(server, standin):
    status, _, body = vend(server, "alice", "?role=local", team="local")
    assert status == 200, body
    assert json.loads(body)["SecurityToken"].startswith("TG1.")
    assert standin.requests == []


def test_aws_sdks_get_the_upstreams_credentials_through_assume_role_with_web_identity(server, standin):
    """boto3's AssumeRoleWithWebIdentity on Tollgate's STS API, for a role the stand-in vends:
    the upstream's credentials, with the policy rendered for the caller, as the JSON endpoint."""
    sts = boto3.client("sts", endpoint_url=server.url, region_name="us-east-1", aws_access_key_id="unused",
                       aws_secret_access_key="unused")
    answer = sts.assume_role_with_web_identity(RoleArn="arn:aws:iam::000000000000:role/photos", RoleSessionName="tina-phone",
                                               WebIdentityToken=login("tina"))
    credentials = answer["Credentials"]
    minted = standin.minted[-1]
    assert credentials["AccessKeyId"] == minted["AccessKeyId"]
    assert credentials["SecretAccessKey"] == minted["AccessKeySecret"]
    assert credentials["SessionToken"] == minted["SecurityToken"]
    assert credentials["Expiration"].strftime("%Y-%m-%dT%H:%M:%SZ") == minted["Expiration"]
    assert answer["SubjectFromWebIdentityToken"] == "tina"
    assert standin.requests[-1]["Policy"] == ALICE_POLICY.replace("alice", "tina")
    assert standin.requests[-1]["RoleSessionName"] == "tina"
    # The same user on the JSON endpoint gets the same credentials from the reuse cache.
    assert json.loads(vend(server, "tina")[2])["AccessKeyId"] == minted["AccessKeyId"]
    assert len(standin.requests) == 1
    # An inline policy cannot narrow what the upstream gets: refused, nothing sent.
    with pytest.raises(Exception) as refused:
        sts.assume_role_with_web_identity(RoleArn="arn:aws:iam::000000000000:role/photos", RoleSessionName="uma-phone",
                                          WebIdentityToken=login("uma"),
                                          Policy='{"Version":"1","Statement":[{"Effect":"Allow","Action":"oss:GetObject","Resource":"*"}]}')
    assert "ValidationError" in str(refused.value)
    assert len(standin.requests) == 1


def test_revoking_a_subject_stops_new_upstream_issuance(server, standin):
    assert vend(server, "erin")[0] == 200
    result = server.cli("token", "revoke", "--config", str(server.config_path), "--subject", "erin")
    assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + 10
    while True:
        status, _, body = vend(server, "erin")
        if status == 403:
            break
        assert time.monotonic() < deadline, body
        time.sleep(0.3)
    answer = json.loads(body)
    assert answer["ErrorCode"] == "AccessDenied" and "revoked" in answer["ErrorMessage"]
    assert vend(server, "frank")[0] == 200
    assert len(standin.requests) == 2, "erin's second request never reached the upstream (not even from the cache)"


def test_metrics_and_audit_per_upstream(server, standin):
    assert vend(server, "grace")[0] == 200
    assert vend(server, "grace")[0] == 200
    _, _, metrics = get_json(server.url + "/metrics")
    assert re.search(r'tollgate_upstream_credentials_total\{[^}]*upstream="aliyun"[^}]*source="upstream"[^}]*\} \d', metrics) \
        or re.search(r'tollgate_upstream_credentials_total\{[^}]*source="upstream"[^}]*upstream="aliyun"[^}]*\} \d', metrics), metrics
    assert 'tollgate_upstream_request_duration_seconds_bucket' in metrics
    assert re.search(r'tollgate_upstream_credentials_total\{[^}]*source="cache"', metrics)
    deadline = time.monotonic() + 5
    audit = server.dir / "data" / "token-audit.jsonl"
    while not (audit.exists() and '"grace"' in audit.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    record = [json.loads(line) for line in audit.read_text().splitlines() if '"grace"' in line][-1]
    assert record["upstream"] == "aliyun" and record["role"] == "photos"
    assert record["access_key_id"] == standin.minted[-1]["AccessKeyId"]


def test_every_upstream_metric_is_exported(standin):
    """Every `tollgate_upstream_…` metric the sources declare (test_metrics.py's rule, for the
    metrics that exist per configured upstream), after traffic that moves each one."""
    from test_metrics import declared_metric_names
    s = upstream_server(standin.url).start()
    try:
        assert vend(s, "quinn")[0] == 200 and vend(s, "quinn")[0] == 200   # fetched, then reused
        standin.mode = "throttle_once"
        assert vend(s, "rita")[0] == 200                                      # an error, a retry
        standin.mode = "ok"
        assert vend(s, "rita", team="*")[0] == 200                            # (the claim is not in the policy)
        result = s.cli("token", "revoke", "--config", str(s.config_path), "--subject", "sam")
        assert result.returncode == 0, result.stderr
        deadline = time.monotonic() + 10
        while vend(s, "sam")[0] != 403:                                       # a refusal
            assert time.monotonic() < deadline
            time.sleep(0.3)
        _, _, text = get_json(s.url + "/metrics")
        names = sorted(name for name in declared_metric_names() if name.startswith("tollgate_upstream_"))
        assert len(names) == 5, names
        assert [name for name in names if f"# TYPE {name} " not in text] == [], text
        assert 'tollgate_upstream_errors_total{upstream="aliyun",code="Throttling.User"} 1' in text \
            or 'tollgate_upstream_errors_total{code="Throttling.User",upstream="aliyun"} 1' in text, text
    finally:
        s.cleanup()


def test_no_secret_reaches_the_log(standin):
    # At debug, where every vend is a `token issued` line too (at info the audit file alone records it).
    server = upstream_server(standin.url)
    server.env = {"LOG_LEVEL": "debug"}
    server.start()
    try:
        vend(server, "heidi")
        time.sleep(0.3)
        output = server.output()
    finally:
        server.cleanup()
    assert "token issued" in output and "token.upstream=aliyun" in output
    for secret in [ALIYUN_KEY_SECRET, standin.minted[-1]["AccessKeySecret"], standin.minted[-1]["SecurityToken"]]:
        assert secret not in output


# ---------------------------------------------------------------- faults

def test_throttling_is_retried_a_bounded_number_of_times_then_answered_503(server, standin):
    standin.mode = "throttle"
    started = time.monotonic()
    status, headers, body = vend(server, "ivan")
    assert status == 503, body
    answer = json.loads(body)
    assert answer["ErrorCode"] == "Throttling.User" and "aliyun" in answer["ErrorMessage"]
    assert headers["Retry-After"] == "1"
    assert len(standin.refused) == 3, "MaxAttempts (3), no retry storm"
    assert time.monotonic() - started < 5
    standin.reset()
    standin.mode = "throttle_once"
    status, _, body = vend(server, "judy")
    assert status == 200, body
    assert len(standin.refused) == 1 and len(standin.requests) == 2


def test_a_slow_upstream_times_out_with_504(standin):
    s = upstream_server(standin.url, extra_upstream={"TimeoutMs": 600}).start()
    try:
        standin.mode = "slow"
        started = time.monotonic()
        status, _, body = vend(s, "ken")
        elapsed = time.monotonic() - started
        assert status == 504, body
        assert json.loads(body)["ErrorCode"] == "UpstreamTimeout"
        assert elapsed < 2.5, f"bounded by TimeoutMs, took {elapsed:.1f} s"
    finally:
        s.cleanup()


def test_an_upstream_that_refuses_connections_gives_503(standin):
    closed = f"http://127.0.0.1:{free_port()}"
    s = upstream_server(closed, extra_upstream={"TimeoutMs": 2000}).start()
    try:
        status, _, body = vend(s, "leo")
        assert status == 503, body
        answer = json.loads(body)
        assert answer["ErrorCode"] == "UpstreamUnreachable" and "aliyun" in answer["ErrorMessage"]
        assert ALIYUN_KEY_SECRET not in body
        # errors=inline: HTTP 200 with the real status in StatusCode, for the stock Android provider.
        status, _, body = vend(s, "leo", "?errors=inline")
        assert status == 200 and json.loads(body)["StatusCode"] == 503
    finally:
        s.cleanup()


def test_a_session_policy_over_the_upstreams_limit_is_refused_never_cut(standin):
    # The isolated policy is 386 bytes without the user's name (twice in it): 400 fits a short
    # name, not a long one.
    s = upstream_server(standin.url, extra_upstream={"MaxPolicyBytes": 400}).start()
    try:
        assert vend(s, "mo")[0] == 200
        status, _, body = vend(s, "a-rather-long-user-name")
        assert status == 500, body
        answer = json.loads(body)
        assert answer["ErrorCode"] == "SessionPolicyTooLarge" and "400" in answer["ErrorMessage"]
        assert len(standin.requests) == 1, "nothing was sent for the long name"
    finally:
        s.cleanup()
    s = upstream_server(standin.url, extra_upstream={"MaxPolicyBytes": 200})
    try:
        with pytest.raises(RuntimeError) as failure:
            s.start()
        assert "takes at most 200" in str(failure.value) and "user_isolated_policy.txt" in str(failure.value)
    finally:
        s.cleanup()


def test_an_unknown_upstream_name_is_a_config_error_naming_it(standin):
    s = upstream_server(standin.url, extra_config={"Roles": {"photos": {
        "PolicyFile": "policy/user_isolated_policy.txt", "Upstream": "alibaba", "RoleArn": ROLE_ARN}, "local": "policy/all_policy.txt"}})
    try:
        with pytest.raises(RuntimeError) as failure:
            s.start()
        assert s.process.returncode == 2
        assert 'Roles.photos.Upstream names the unknown upstream "alibaba" (configured: aliyun)' in str(failure.value)
    finally:
        s.cleanup()


def test_a_missing_key_file_is_a_config_error_naming_it(standin):
    s = upstream_server(standin.url, extra_upstream={"AccessKeySecretFile": "secrets/missing"})
    try:
        with pytest.raises(RuntimeError) as failure:
            s.start()
        assert s.process.returncode == 2
        assert "secrets/missing" in str(failure.value) and "AccessKeySecretFile" in str(failure.value)
    finally:
        s.cleanup()


def test_a_rotated_key_file_is_reloaded(standin):
    standin.keys["LTAI5tRotated"] = "rotatedSecret0123456789abcdefgh"
    s = upstream_server(standin.url).start()
    try:
        assert vend(s, "nina")[0] == 200
        write_keys(s.dir, "LTAI5tRotated", "rotatedSecret0123456789abcdefgh")
        deadline = time.monotonic() + 10
        while "config reloaded" not in s.output():
            assert time.monotonic() < deadline, s.output()
            time.sleep(0.2)
        assert re.search(r"config\.upstream_key_files=\S*secrets/ak,\S*secrets/sk", s.output()), s.output()
        assert vend(s, "oscar")[0] == 200
        assert standin.requests[-1]["AccessKeyId"] == "LTAI5tRotated"
        assert "rotatedSecret" not in s.output()
    finally:
        s.cleanup()


def test_policy_check_warns_about_what_the_upstream_would_reject(server):
    iam = server.dir / "policy" / "iam.txt"
    iam.write_text(json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::photos/*"]}]}))
    config = json.loads(server.config_path.read_text())
    config["Roles"]["iam"] = {"PolicyFile": "policy/iam.txt", "Upstream": "aliyun", "RoleArn": ROLE_ARN}
    path = server.dir / "check.json"
    path.write_text(json.dumps(config))
    result = server.cli("policy", "check", "--config", str(path), str(iam))
    assert result.returncode == 0, result.stderr
    assert 'action "s3:GetObject" is the other dialect\'s; the upstream aliyun (aliyun-sts)' in result.stderr
    assert 'Version "2012-10-17"' in result.stderr
    strict = server.cli("policy", "check", "--strict", "--config", str(path), str(iam))
    assert strict.returncode == 1


# ---------------------------------------------------------------- the seed's own config.json

def test_the_reference_config_json_with_the_opt_in_vends_through_the_stand_in(standin):
    config = {"AccessKeyID": ALIYUN_KEY_ID, "AccessKeySecret": ALIYUN_KEY_SECRET, "RoleArn": ROLE_ARN,
              "TokenExpireTime": "900", "PolicyFile": "policy/all_policy.txt",
              "AssumeRoleArn": {"Endpoint": standin.url}}
    s = Server(config)
    # Exactly the reference keys plus the opt-in (and the test's listeners).
    for key in ("Variables", "Roles"):
        base = json.loads(s.config_path.read_text())
        base.pop(key)
        s.config_path.write_text(json.dumps(base))
    s.start()
    try:
        status, _, body = get_json(s.url + "/")
        assert status == 200, body
        answer = json.loads(body)
        assert answer["AccessKeyId"] == standin.minted[-1]["AccessKeyId"]
        request = standin.requests[-1]
        assert request["AccessKeyId"] == ALIYUN_KEY_ID and request["RoleArn"] == ROLE_ARN
        assert request["DurationSeconds"] == "900" and request["RoleSessionName"] == "tollgate"
        assert request["Policy"] == '{"Statement":[{"Action":["oss:*"],"Effect":"Allow","Resource":["acs:oss:*:*:*"]}],"Version":"1"}'
        assert ALIYUN_KEY_SECRET not in s.output()
    finally:
        s.cleanup()


def test_without_the_opt_in_role_arn_keeps_todays_meaning(standin):
    config = {"AccessKeyID": "TGSEEDROOT", "AccessKeySecret": ROOT_SECRET, "RoleArn": ROLE_ARN,
              "TokenExpireTime": "900", "PolicyFile": "policy/all_policy.txt"}
    s = Server(config).start()
    try:
        status, _, body = get_json(s.url + "/")
        assert status == 200, body
        assert json.loads(body)["SecurityToken"].startswith("TG1.")
        assert standin.requests == []
    finally:
        s.cleanup()


# ---------------------------------------------------------------- moto's STS as an aws-sts peer

@pytest.fixture(scope="module")
def moto():
    m = MotoServer(free_actions=4)
    yield m
    m.close()


def test_moto_verifies_and_vends_through_aws_sts(moto):
    iam = boto3.client("iam", endpoint_url=moto.url, region_name="us-east-1", aws_access_key_id="bootstrap",
                       aws_secret_access_key="bootstrap")
    iam.create_user(UserName="tollgate")
    iam.put_user_policy(UserName="tollgate", PolicyName="assume", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="tollgate")["AccessKey"]
    role_arn = "arn:aws:iam::123456789012:role/app-upload"
    s = Server({
        "AccessKeySecret": ROOT_SECRET, "Variables": {"BUCKET_NAME": "photos"}, "Authentication": AUTHENTICATION,
        "Upstreams": {"aws": {"Type": "aws-sts", "Endpoint": moto.url, "Region": "us-east-1",
                              "AccessKeyIDFile": "secrets/ak", "AccessKeySecretFile": "secrets/sk"}},
        "Roles": {"photos": {"PolicyFile": "policy/iam_isolated.txt", "Upstream": "aws", "RoleArn": role_arn}},
    }, bucket="photos")
    (s.dir / "policy" / "iam_isolated.txt").write_text(json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": ["arn:aws:s3:::$BUCKET_NAME/${aws:username}/*"]}]}))
    write_keys(s.dir, key["AccessKeyId"], key["SecretAccessKey"])
    s.start()
    try:
        status, _, body = vend(s, "alice")
        assert status == 200, body
        answer = json.loads(body)
        assert list(answer) == ["StatusCode", "AccessKeyId", "AccessKeySecret", "SecurityToken", "Expiration"]
        assert answer["AccessKeyId"].startswith("ASIA")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", answer["Expiration"])
        # moto knows the session it minted: the caller identity of the new credentials.
        sts = boto3.client("sts", endpoint_url=moto.url, region_name="us-east-1", aws_access_key_id=answer["AccessKeyId"],
                           aws_secret_access_key=answer["AccessKeySecret"], aws_session_token=answer["SecurityToken"])
        assert sts.get_caller_identity()["Arn"].endswith(":assumed-role/app-upload/alice")
        # A key moto does not know is refused by moto's own verifier.
        write_keys(s.dir, key["AccessKeyId"], "wrong" + key["SecretAccessKey"][5:])
        deadline = time.monotonic() + 10
        while s.output().count("config reloaded") < 1:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        status, _, body = vend(s, "bob")
        assert status == 502, body
        assert json.loads(body)["ErrorCode"] in ("SignatureDoesNotMatch", "InvalidClientTokenId"), body
    finally:
        s.cleanup()
