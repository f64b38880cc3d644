"""App authentication on the token endpoint (issue 12): OIDC/JWT login tokens minted here with
PyJWT, keys served as a JWKS from a loopback HTTP server, credentials used with boto3 and oss2.
Nothing in this file verifies a JWT or signs a gateway request itself.
"""
import hashlib
import hmac
import json
import os
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import oss2
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from conftest import ROOT_SECRET, Server
from s3_helpers import ROOT_ACCESS_KEY_ID, ClientError, error_of, object_keys, root_client, s3_client

BUCKET = "tollgate"
AUDIENCE = "photos-app"


class KeyServer:
    """A JWKS endpoint on loopback whose keys a test can swap, counting its requests."""

    def __init__(self):
        self.jwks = {"keys": []}
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests += 1
                body = json.dumps(outer.jwks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def issuer(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def url(self):
        return self.issuer + "/jwks.json"

    def publish(self, *keys):
        self.jwks = {"keys": [k.jwk for k in keys]}

    def close(self):
        self.httpd.shutdown()


class SigningKey:
    def __init__(self, kind: str, kid: str):
        self.kid = kid
        if kind == "RS256":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            self.jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key()))
        self.alg = kind
        self.jwk.update({"kid": kid, "use": "sig"})

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)

    def token(self, issuer, subject, *, audience=AUDIENCE, lifetime=600, not_before=None, kid=None, **claims):
        now = int(time.time())
        payload = {"iss": issuer, "aud": audience, "sub": subject, "iat": now, "exp": now + lifetime, **claims}
        if not_before is not None:
            payload["nbf"] = not_before
        return jwt.encode(payload, self.private, algorithm=self.alg, headers={"kid": kid or self.kid})


# A policy decided by claims: `${jwt:dept}` in a resource, `aws:PrincipalTag/team` in a condition.
DEPARTMENT_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject"], "Resource": f"arn:aws:s3:::{BUCKET}/dept/${{jwt:dept}}/*"},
    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/tagged/*",
     "Condition": {"StringEquals": {"aws:PrincipalTag/team": "blue"}}},
]}


@pytest.fixture(scope="module")
def keys():
    server = KeyServer()
    rsa_key, ec_key = SigningKey("RS256", "rsa-1"), SigningKey("ES256", "ec-1")
    server.publish(rsa_key, ec_key)
    yield server, rsa_key, ec_key
    server.close()


@pytest.fixture(scope="module")
def tg(keys):
    key_server, _, _ = keys
    server = Server({
        "AccessKeySecret": ROOT_SECRET, "AccessKeyID": ROOT_ACCESS_KEY_ID,
        "Roles": {"read": "policy/bucket_read_policy.txt", "readwrite": "policy/bucket_read_write_policy.txt",
                  "isolated": {"PolicyFile": "policy/user_isolated_policy.txt", "MaxSessionSeconds": 1800},
                  "department": "policy/department_policy.json"},
        "Authentication": {
            "Providers": [{"Name": "app", "Issuer": key_server.issuer, "JWKSURL": key_server.url,
                           "Audiences": [AUDIENCE], "Algorithms": ["RS256", "ES256"], "LeewaySeconds": 30,
                           "Claims": ["dept"]}],
            "RoleRules": [{"Claim": "groups", "Match": "Contains", "Value": "editors", "Role": "readwrite"},
                          {"Claim": "dept", "Match": "Like", "Value": "*", "Role": "department"}],
            "DefaultRole": "isolated",
        },
    })
    (server.dir / "policy" / "department_policy.json").write_text(json.dumps(DEPARTMENT_POLICY))
    server.start()
    yield server
    server.cleanup()


def vend(tg, token=None, *, how="header", **params):
    """`GET /` with the login token in the Authorization header or the query."""
    headers = {}
    if token and how == "header":
        headers["Authorization"] = f"Bearer {token}"
    elif token and how == "query":
        params["access_token"] = token
    response = requests.get(tg.url + "/", headers=headers, params=params, timeout=10)
    return response.status_code, response.json()


def credentials(tg, token, **kwargs):
    status, body = vend(tg, token, **kwargs)
    assert status == 200, body
    return body


def test_without_a_token_nothing_is_vended(tg):
    response = requests.get(tg.url + "/", timeout=10)
    assert response.status_code == 401
    assert response.json()["ErrorCode"] == "MissingAuthenticationToken"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_alice_and_bob_each_get_credentials_and_only_their_own_prefix(tg, keys):
    key_server, rsa_key, ec_key = keys
    alice = credentials(tg, rsa_key.token(key_server.issuer, "alice"), how="header")
    bob = credentials(tg, ec_key.token(key_server.issuer, "bob"), how="query")
    # The same identity by POST body, form and JSON.
    form = requests.post(tg.url + "/", data={"access_token": rsa_key.token(key_server.issuer, "alice")}, timeout=10)
    assert form.status_code == 200, form.text
    posted = requests.post(tg.url + "/", json={"access_token": ec_key.token(key_server.issuer, "bob")}, timeout=10)
    assert posted.status_code == 200, posted.text

    a, b = s3_client(tg, alice), s3_client(tg, bob)
    a.put_object(Bucket=BUCKET, Key="alice/photo.jpg", Body=b"alice's")
    b.put_object(Bucket=BUCKET, Key="bob/photo.jpg", Body=b"bob's")
    assert a.get_object(Bucket=BUCKET, Key="alice/photo.jpg")["Body"].read() == b"alice's"
    assert object_keys(a, BUCKET, "alice/") == {"alice/photo.jpg"}
    for attempt in (lambda: a.get_object(Bucket=BUCKET, Key="bob/photo.jpg"),
                    lambda: a.put_object(Bucket=BUCKET, Key="bob/photo.jpg", Body=b"overwritten"),
                    lambda: a.delete_object(Bucket=BUCKET, Key="bob/photo.jpg"),
                    lambda: a.list_objects_v2(Bucket=BUCKET, Prefix="bob/"),
                    lambda: a.put_object(Bucket=BUCKET, Key="alicex/escape", Body=b"x")):
        with pytest.raises(ClientError) as excinfo:
            attempt()
        assert error_of(excinfo) == ("AccessDenied", 403)
    assert root_client(tg).get_object(Bucket=BUCKET, Key="bob/photo.jpg")["Body"].read() == b"bob's"

    # The same through oss2 with bob's credentials.
    auth = oss2.StsAuth(bob["AccessKeyId"], bob["AccessKeySecret"], bob["SecurityToken"])
    oss_bucket = oss2.Bucket(auth, tg.gateway_url, BUCKET, is_path_style=True)
    oss_bucket.put_object("bob/notes.txt", b"via oss2")
    assert oss_bucket.get_object("bob/notes.txt").read() == b"via oss2"
    with pytest.raises(oss2.exceptions.AccessDenied):
        oss_bucket.get_object("alice/photo.jpg")
    with pytest.raises(oss2.exceptions.AccessDenied):
        oss_bucket.delete_object("alice/photo.jpg")


def test_role_rules_and_requested_roles(tg, keys):
    key_server, rsa_key, _ = keys
    editor = rsa_key.token(key_server.issuer, "carol", groups=["staff", "editors"])
    creds = credentials(tg, editor)
    # readwrite (bucket-wide) by the rule: carol may write outside her own prefix.
    s3_client(tg, creds).put_object(Bucket=BUCKET, Key="shared/by-carol", Body=b"x")
    # She may also ask for the default role, but not for one no rule gives her.
    assert vend(tg, editor, role="isolated")[0] == 200
    status, body = vend(tg, editor, role="read")
    assert (status, body["ErrorCode"]) == (403, "AccessDenied")
    plain = rsa_key.token(key_server.issuer, "dave")
    status, body = vend(tg, plain, role="readwrite")
    assert (status, body["ErrorCode"]) == (403, "AccessDenied")


def test_claims_and_session_tags_decide_gateway_requests(tg, keys):
    key_server, rsa_key, _ = keys
    tags = lambda team: {"https://aws.amazon.com/tags": {"principal_tags": {"team": [team]}}}
    blue = s3_client(tg, credentials(tg, rsa_key.token(key_server.issuer, "gina", dept="sales", **tags("blue"))))
    red = s3_client(tg, credentials(tg, rsa_key.token(key_server.issuer, "hank", dept="eng", **tags("red"))))
    blue.put_object(Bucket=BUCKET, Key="dept/sales/report", Body=b"q3")
    red.put_object(Bucket=BUCKET, Key="dept/eng/design", Body=b"v2")
    for attempt in (lambda: blue.put_object(Bucket=BUCKET, Key="dept/eng/report", Body=b"x"),
                    lambda: red.get_object(Bucket=BUCKET, Key="dept/sales/report")):
        with pytest.raises(ClientError) as excinfo:
            attempt()
        assert error_of(excinfo) == ("AccessDenied", 403)
    root_client(tg).put_object(Bucket=BUCKET, Key="tagged/notice", Body=b"blue team only")
    assert blue.get_object(Bucket=BUCKET, Key="tagged/notice")["Body"].read() == b"blue team only"
    with pytest.raises(ClientError) as excinfo:
        red.get_object(Bucket=BUCKET, Key="tagged/notice")
    assert error_of(excinfo) == ("AccessDenied", 403)


def test_a_claim_that_maps_to_no_role_is_refused_without_a_default_role(keys):
    key_server, rsa_key, _ = keys
    server = Server({
        "AccessKeySecret": ROOT_SECRET,
        "Authentication": {
            "Providers": [{"Issuer": key_server.issuer, "JWKSURL": key_server.url, "Audiences": [AUDIENCE],
                           "Algorithms": ["RS256"]}],
            "RoleRules": [{"Claim": "groups", "Match": "Equals", "Value": "editors", "Role": "readwrite"}],
        },
    }).start()
    try:
        status, body = vend(server, rsa_key.token(key_server.issuer, "ivan", groups=["viewers"]))
        assert (status, body["ErrorCode"]) == (403, "IDPRejectedClaim")
        assert "AccessKeyId" not in body
        status, body = vend(server, rsa_key.token(key_server.issuer, "judy", groups=["editors"]))
        assert status == 200, body
    finally:
        server.cleanup()


def test_durations_are_bounded_by_the_role(tg, keys):
    key_server, rsa_key, _ = keys
    token = rsa_key.token(key_server.issuer, "erin")
    status, body = vend(tg, token, duration="1800")
    assert status == 200, body
    status, body = vend(tg, token, duration="3600")
    assert (status, body["ErrorCode"]) == (400, "ValidationError")
    status, body = vend(tg, token, duration="60")
    assert (status, body["ErrorCode"]) == (400, "ValidationError")


def unsigned(header: dict, payload: dict) -> str:
    encode = lambda part: jwt.utils.base64url_encode(json.dumps(part).encode()).decode()
    return f"{encode(header)}.{encode(payload)}."


def test_refusals_each_with_their_code_and_nothing_vended(tg, keys):
    key_server, rsa_key, ec_key = keys
    iss, now = key_server.issuer, int(time.time())
    stranger = SigningKey("RS256", "rsa-1")  # same kid, a key the provider never published
    # PyJWT refuses to use a public key as an HMAC secret, so this one is put together by hand:
    # HS256 whose secret is the provider's published RSA key, the classic confusion attack.
    hs_signing_input = unsigned({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"},
                                {"iss": iss, "aud": AUDIENCE, "sub": "mallory", "exp": now + 600})[:-1]
    hs_mac = hmac.new(rsa_key.public_pem(), hs_signing_input.encode(), hashlib.sha256).digest()
    hs_confused = f"{hs_signing_input}.{jwt.utils.base64url_encode(hs_mac).decode()}"
    good = rsa_key.token(iss, "alice")
    head, body, signature = good.split(".")
    tampered_body = jwt.utils.base64url_encode(json.dumps(
        {"iss": iss, "aud": AUDIENCE, "sub": "bob", "exp": now + 600}).encode()).decode()
    cases = {
        "wrong audience": (rsa_key.token(iss, "alice", audience="other-app"), 401, "InvalidIdentityToken"),
        "wrong issuer": (rsa_key.token("https://evil.example.com", "alice"), 401, "InvalidIdentityToken"),
        "expired beyond leeway": (rsa_key.token(iss, "alice", lifetime=-120), 401, "ExpiredTokenException"),
        "not yet valid": (rsa_key.token(iss, "alice", not_before=now + 600), 401, "InvalidIdentityToken"),
        "alg none": (unsigned({"alg": "none", "kid": "rsa-1"}, {"iss": iss, "aud": AUDIENCE, "sub": "alice", "exp": now + 600}),
                     401, "InvalidIdentityToken"),
        "HS/RS confusion": (hs_confused, 401, "InvalidIdentityToken"),
        "unknown kid": (rsa_key.token(iss, "alice", kid="no-such-key"), 401, "InvalidIdentityToken"),
        "a key never published": (stranger.token(iss, "alice"), 401, "InvalidIdentityToken"),
        "tampered payload": (f"{head}.{tampered_body}.{signature}", 401, "InvalidIdentityToken"),
        "slash in the subject": (ec_key.token(iss, "alice/../bob"), 403, "IDPRejectedClaim"),
        "empty subject": (ec_key.token(iss, ""), 403, "IDPRejectedClaim"),
        "not a JWT": ("not-a-token", 401, "InvalidIdentityToken"),
    }
    for name, (token, status, code) in cases.items():
        got_status, got = vend(tg, token)
        assert (got_status, got.get("ErrorCode")) == (status, code), (name, got)
        assert "AccessKeyId" not in got and "SecurityToken" not in got, name
    log = tg.output()
    for name, (token, _, _) in cases.items():
        if len(token) > 60:
            assert token[20:60] not in log, f"a login token reached the log ({name})"


def test_reference_config_without_authentication_still_vends_anonymously():
    server = Server({"AccessKeySecret": ROOT_SECRET}).start()
    try:
        response = requests.get(server.url + "/", timeout=10)
        assert response.status_code == 200
        assert list(response.json()) == ["StatusCode", "AccessKeyId", "AccessKeySecret", "SecurityToken", "Expiration"]
        assert "anyone" in server.output().lower()
    finally:
        server.cleanup()


def test_errors_inline_for_the_stock_android_provider(tg):
    response = requests.get(tg.url + "/", params={"errors": "inline", "access_token": "not-a-token"}, timeout=10)
    assert response.status_code == 200
    body = response.json()
    assert (body["StatusCode"], body["ErrorCode"]) == (401, "InvalidIdentityToken")
    assert "AccessKeyId" not in body


# ---------------------------------------------------------------------------------------------
# The AWS STS API on the token port, through boto3's own STS client.

ROLE_ARN = "arn:aws:iam::000000000000:role/{}"


def sts_client(tg, access_key_id="unused", secret="unused", token=None):
    import boto3
    from botocore.config import Config
    return boto3.client("sts", endpoint_url=tg.url, region_name="us-east-1", aws_access_key_id=access_key_id,
                        aws_secret_access_key=secret, aws_session_token=token,
                        config=Config(retries={"max_attempts": 1}))


def as_endpoint_json(credentials):
    return {"AccessKeyId": credentials["AccessKeyId"], "AccessKeySecret": credentials["SecretAccessKey"],
            "SecurityToken": credentials["SessionToken"]}


def test_assume_role_with_web_identity_gives_working_isolated_credentials(tg, keys):
    key_server, rsa_key, ec_key = keys
    answer = sts_client(tg).assume_role_with_web_identity(
        RoleArn=ROLE_ARN.format("isolated"), RoleSessionName="alice-phone",
        WebIdentityToken=rsa_key.token(key_server.issuer, "alice"))
    assert answer["SubjectFromWebIdentityToken"] == "alice"
    assert answer["AssumedRoleUser"]["Arn"] == "arn:aws:sts::000000000000:assumed-role/isolated/alice-phone"
    assert answer["Provider"] == key_server.issuer
    creds = answer["Credentials"]
    assert creds["AccessKeyId"].startswith("STS.")
    s3 = s3_client(tg, as_endpoint_json(creds))
    s3.put_object(Bucket=BUCKET, Key="alice/via-sts", Body=b"sts")
    with pytest.raises(ClientError) as excinfo:
        s3.put_object(Bucket=BUCKET, Key="bob/via-sts", Body=b"sts")
    assert error_of(excinfo) == ("AccessDenied", 403)
    who = sts_client(tg, creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"]).get_caller_identity()
    assert who["Arn"] == "arn:aws:sts::000000000000:assumed-role/isolated/alice-phone"
    assert who["Account"] == "000000000000"
    # Bob, with an ES256 login token, through the same STS call: his own prefix only.
    bob = sts_client(tg).assume_role_with_web_identity(
        RoleArn=ROLE_ARN.format("isolated"), RoleSessionName="bob-phone",
        WebIdentityToken=ec_key.token(key_server.issuer, "bob"))["Credentials"]
    bob_s3 = s3_client(tg, as_endpoint_json(bob))
    bob_s3.put_object(Bucket=BUCKET, Key="bob/via-sts", Body=b"bob")
    for attempt in (lambda: bob_s3.get_object(Bucket=BUCKET, Key="alice/via-sts"),
                    lambda: bob_s3.delete_object(Bucket=BUCKET, Key="alice/via-sts")):
        with pytest.raises(ClientError) as excinfo:
            attempt()
        assert error_of(excinfo) == ("AccessDenied", 403)


def sts_error(call) -> str:
    with pytest.raises(ClientError) as excinfo:
        call()
    return excinfo.value.response["Error"]["Code"]


def test_sts_refusals_use_aws_error_codes(tg, keys):
    key_server, rsa_key, _ = keys
    sts = sts_client(tg)
    iss = key_server.issuer
    web = lambda token, role="isolated", **kw: lambda: sts.assume_role_with_web_identity(
        RoleArn=ROLE_ARN.format(role), RoleSessionName="s1", WebIdentityToken=token, **kw)
    assert sts_error(web(rsa_key.token(iss, "alice", lifetime=-120))) == "ExpiredTokenException"
    assert sts_error(web(rsa_key.token(iss, "alice", audience="other"))) == "InvalidIdentityToken"
    assert sts_error(web(rsa_key.token(iss, "alice"), role="readwrite")) == "AccessDenied"
    assert sts_error(web(rsa_key.token(iss, "alice"), DurationSeconds=3600)) == "ValidationError"
    assert sts_error(web(rsa_key.token(iss, "alice"), Policy='{"Version":"1","Statement":[{"Effect":"Allow"')) \
        == "MalformedPolicyDocument"
    assert sts_error(web(rsa_key.token(iss, "alice/x"))) == "IDPRejectedClaim"


def test_assume_role_is_for_the_root_credentials_and_a_session_policy_narrows(tg, keys):
    root_sts = sts_client(tg, ROOT_ACCESS_KEY_ID, ROOT_SECRET)
    narrow = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/*"}]})
    answer = root_sts.assume_role(RoleArn=ROLE_ARN.format("readwrite"), RoleSessionName="backend", Policy=narrow)
    creds = as_endpoint_json(answer["Credentials"])
    root_client(tg).put_object(Bucket=BUCKET, Key="shared/readable", Body=b"r")
    s3 = s3_client(tg, creds)
    assert s3.get_object(Bucket=BUCKET, Key="shared/readable")["Body"].read() == b"r"
    with pytest.raises(ClientError) as excinfo:
        s3.put_object(Bucket=BUCKET, Key="shared/written", Body=b"w")
    assert error_of(excinfo) == ("AccessDenied", 403)
    # Vended credentials cannot assume roles; a wrong secret is refused.
    vended = answer["Credentials"]
    temp_sts = sts_client(tg, vended["AccessKeyId"], vended["SecretAccessKey"], vended["SessionToken"])
    assert sts_error(lambda: temp_sts.assume_role(RoleArn=ROLE_ARN.format("readwrite"), RoleSessionName="x1")) == "AccessDenied"
    bad = sts_client(tg, ROOT_ACCESS_KEY_ID, "not-the-root-secret-not-the-root-secret")
    assert sts_error(lambda: bad.assume_role(RoleArn=ROLE_ARN.format("readwrite"), RoleSessionName="x1")) \
        == "SignatureDoesNotMatch"
    assert sts_error(lambda: root_sts.assume_role(RoleArn=ROLE_ARN.format("nope"), RoleSessionName="x1")) == "AccessDenied"
    assert root_sts.get_caller_identity()["Arn"] == "arn:aws:iam::000000000000:root"


def test_the_standard_web_identity_chain_works_unchanged(tg, keys, tmp_path):
    """As a pod or CI job would: AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE + the STS endpoint,
    then a plain boto3 S3 client with no explicit credentials."""
    import os
    import subprocess
    import sys
    key_server, rsa_key, _ = keys
    token_file = tmp_path / "token"
    token_file.write_text(rsa_key.token(key_server.issuer, "ci-job"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ROLE_ARN": ROLE_ARN.format("isolated"), "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file),
                "AWS_ROLE_SESSION_NAME": "ci-run", "AWS_ENDPOINT_URL_STS": tg.url, "AWS_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_EC2_METADATA_DISABLED": "true"})
    script = f"""
import boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url="{tg.gateway_url}", config=Config(s3={{"addressing_style": "path"}}))
s3.put_object(Bucket="{BUCKET}", Key="ci-job/artifact", Body=b"built")
print(s3.get_object(Bucket="{BUCKET}", Key="ci-job/artifact")["Body"].read().decode())
"""
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "built"


def test_token_list_answers_who_got_which_role(tg, keys):
    key_server, rsa_key, ec_key = keys
    erin = credentials(tg, rsa_key.token(key_server.issuer, "lister-erin", groups=["editors"]))
    frank = credentials(tg, ec_key.token(key_server.issuer, "lister-frank"))

    def listed(*args):
        result = tg.cli("token", "list", "--config", str(tg.config_path), "--json", *args)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    # The server appends to the audit file moments after answering.
    deadline = time.monotonic() + 10
    while not listed("--subject", "lister-frank") and time.monotonic() < deadline:
        time.sleep(0.05)
    [entry] = listed("--subject", "lister-frank")
    assert (entry["subject"], entry["role"], entry["access_key_id"], entry["via"]) == ("lister-frank", "isolated", frank["AccessKeyId"], "json")
    assert entry["issuer"] == key_server.issuer and entry["client_address"] == "127.0.0.1"
    assert entry["expiration"] == frank["Expiration"]
    assert [(e["subject"], e["access_key_id"]) for e in listed("--subject", "lister-erin")] == [("lister-erin", erin["AccessKeyId"])]
    readwrite = listed("--role", "readwrite")
    assert "lister-erin" in {e["subject"] for e in readwrite} and "lister-frank" not in {e["subject"] for e in readwrite}
    assert listed("--since", "2100-01-01T00:00:00Z") == []

    table = tg.cli("token", "list", "--config", str(tg.config_path), "--subject", "lister-erin", "--since", "1h")
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["TIME", "SUBJECT", "ROLE", "ACCESS", "KEY", "ID", "EXPIRATION", "VIA", "CLIENT"]
    assert lines[1].split()[1:4] == ["lister-erin", "readwrite", erin["AccessKeyId"]]

    audit = tg.dir / "data" / "token-audit.jsonl"
    assert os.stat(audit).st_mode & 0o777 == 0o600
    text = audit.read_text()
    for secret in (erin["AccessKeySecret"], erin["SecurityToken"], frank["AccessKeySecret"], frank["SecurityToken"]):
        assert secret not in text

    bad = tg.cli("token", "list", "--config", str(tg.config_path), "--since", "yesterday")
    assert bad.returncode == 2 and "--since" in bad.stderr


# Last: it rotates the provider's keys.
def test_provider_key_rotation_and_unknown_kid_flood(tg, keys):
    key_server, rsa_key, ec_key = keys
    # Warm the cache, then rotate: the provider publishes a new key only.
    assert vend(tg, rsa_key.token(key_server.issuer, "frank"))[0] == 200
    fresh = SigningKey("ES256", "ec-2")
    key_server.publish(rsa_key, fresh)
    time.sleep(31)  # past the unknown-kid cooldown (30 s)
    assert vend(tg, fresh.token(key_server.issuer, "frank"))[0] == 200, "the new key verifies without a restart"
    before = key_server.requests
    for i in range(50):
        status, body = vend(tg, rsa_key.token(key_server.issuer, "frank", kid=f"made-up-{i}"))
        assert (status, body["ErrorCode"]) == (401, "InvalidIdentityToken")
    assert key_server.requests - before <= 1, "a flood of unknown kids hammered the JWKS URL"
    key_server.publish(rsa_key, ec_key)


# ---------------------------------------------------------------------------------------------
# The app's own login, through the webhook.


class LoginWebhook:
    """The app's login service on loopback: answers by the session token it is given."""

    ANSWERS = {
        "session-alice": (200, {"user": "alice"}),
        "session-editor": (200, {"user": "ed", "role": "readwrite", "claims": {"plan": "pro"}}),
        "session-short": (200, {"user": "sam", "maxValiditySeconds": 600}),
        "session-evil-role": (200, {"user": "eve", "role": "no-such-role"}),
        "session-slash": (200, {"user": "a/b"}),
        "session-revoked": (403, {"reason": "session revoked"}),
    }

    def __init__(self):
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                outer.calls += 1
                token = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["token"]
                if token == "session-slow":
                    time.sleep(3)
                status, answer = outer.ANSWERS.get(token, (401, {"reason": "unknown session"}))
                body = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/login/verify"


@pytest.fixture(scope="module")
def hooked():
    webhook = LoginWebhook()
    server = Server({
        "AccessKeySecret": ROOT_SECRET, "AccessKeyID": ROOT_ACCESS_KEY_ID,
        "Authentication": {"Webhook": {"URL": webhook.url, "TimeoutMs": 500, "CacheSeconds": 60},
                           "DefaultRole": "isolated"},
    }).start()
    yield server, webhook
    server.cleanup()
    webhook.httpd.shutdown()


def test_webhook_identities(hooked):
    tg, webhook = hooked
    alice = credentials(tg, "session-alice")
    s3 = s3_client(tg, alice)
    s3.put_object(Bucket=BUCKET, Key="alice/from-webhook", Body=b"w")
    with pytest.raises(ClientError) as excinfo:
        s3.put_object(Bucket=BUCKET, Key="other/from-webhook", Body=b"w")
    assert error_of(excinfo) == ("AccessDenied", 403)
    # The webhook may name a role; it is then the caller's role.
    editor = credentials(tg, "session-editor", how="query")
    s3_client(tg, editor).put_object(Bucket=BUCKET, Key="other/by-editor", Body=b"w")
    # maxValiditySeconds bounds the credentials' lifetime.
    short = credentials(tg, "session-short")
    expires = time.mktime(time.strptime(short["Expiration"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert expires - time.time() <= 610
    # Answers are cached briefly: asking again for alice does not call the webhook.
    before = webhook.calls
    credentials(tg, "session-alice")
    assert webhook.calls == before


def test_webhook_refusals(hooked):
    tg, _ = hooked
    for token, status, code in (("session-revoked", 401, "InvalidIdentityToken"),
                                ("session-unknown", 401, "InvalidIdentityToken"),
                                ("session-slow", 503, "IDPCommunicationError"),
                                ("session-evil-role", 403, "IDPRejectedClaim"),
                                ("session-slash", 403, "IDPRejectedClaim")):
        got_status, body = vend(tg, token)
        assert (got_status, body["ErrorCode"]) == (status, code), (token, body)
        assert "AccessKeyId" not in body
    assert "session revoked" in vend(tg, "session-revoked")[1]["ErrorMessage"]


def test_sts_throttles_a_subject_beyond_its_limit(keys):
    key_server, rsa_key, _ = keys
    server = Server({
        "AccessKeySecret": ROOT_SECRET,
        "RateLimits": {"PerSubjectPerMinute": 2, "PerSubjectBurst": 2},
        "Authentication": {"Providers": [{"Issuer": key_server.issuer, "JWKSURL": key_server.url, "Audiences": [AUDIENCE],
                                          "Algorithms": ["RS256"]}], "DefaultRole": "isolated"},
    }).start()
    try:
        sts = sts_client(server)
        call = lambda subject: sts.assume_role_with_web_identity(
            RoleArn=ROLE_ARN.format("isolated"), RoleSessionName="s1", WebIdentityToken=rsa_key.token(key_server.issuer, subject))
        call("kate")
        call("kate")
        with pytest.raises(ClientError) as excinfo:
            call("kate")
        assert excinfo.value.response["Error"]["Code"] == "Throttling"
        assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
        call("liam")  # another user is unaffected
    finally:
        server.cleanup()

