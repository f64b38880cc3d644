"""Revocation and rate limits, with real clients against the real binary.

Revocation (`tollgate token revoke`, `POST /admin/revoke`): a revoked subject's, access key's or
role's existing credentials are refused by the gateway within seconds — with boto3 and oss2,
S3 and OSS `InvalidAccessKeyId`, the code SDKs refresh their credentials on — also after a
restart, while everyone else carries on. The admin endpoint answers only the root credentials.

Rate limits: a burst from one client address beyond `RateLimits` gets 429 / `Throttling` with
`Retry-After`; another address is not affected.
"""
import http.client
import json
import re
import socket
import time

import oss2
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import ROOT_SECRET, Server, get_json
from oss_helpers import sts_bucket
from s3_helpers import ClientError, error_of, issued_credentials, s3_client

ROOT_ACCESS_KEY_ID = "TGROOTREVOKE"
KEY = "revocation/hello.txt"
BODY = b"hello, revocation"
PROPAGATION_SECONDS = 5


@pytest.fixture(scope="module")
def server():
    s = Server({"AccessKeySecret": ROOT_SECRET, "AccessKeyID": ROOT_ACCESS_KEY_ID}).start()
    s3_client(s, access_key_id=ROOT_ACCESS_KEY_ID, secret=ROOT_SECRET).put_object(Bucket=s.bucket, Key=KEY, Body=BODY)
    yield s
    s.cleanup()


def s3_reads(server, creds) -> bool:
    """True when boto3 reads the object with these credentials; False on `InvalidAccessKeyId`
    (anything else is a failure of the test)."""
    try:
        body = s3_client(server, creds).get_object(Bucket=server.bucket, Key=KEY)["Body"].read()
        assert body == BODY
        return True
    except ClientError as error:
        code = error.response["Error"].get("Code")
        status = error.response["ResponseMetadata"]["HTTPStatusCode"]
        assert (code, status) == ("InvalidAccessKeyId", 403), (code, status)
        return False


def oss_reads(server, creds, version) -> bool:
    """The same with oss2, signing OSS V1 or V4."""
    try:
        body = sts_bucket(server, creds, version).get_object(KEY).read()
    except oss2.exceptions.OssError as error:
        assert (error.status, error.code) == (403, "InvalidAccessKeyId"), (error.status, error.code, error.details)
        assert error.headers.get("x-oss-request-id"), dict(error.headers)
        return False
    assert body == BODY
    return True


def works_everywhere(server, creds) -> bool:
    return s3_reads(server, creds) and oss_reads(server, creds, "v1") and oss_reads(server, creds, "v4")


def refused_everywhere(server, creds) -> bool:
    return not s3_reads(server, creds) and not oss_reads(server, creds, "v1") and not oss_reads(server, creds, "v4")


def revoke_cli(server, *args) -> dict:
    result = server.cli("token", "revoke", "--config", str(server.config_path), *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_refused(server, creds, started: float) -> float:
    """Polls with boto3 until the credentials are refused; returns the seconds it took."""
    while time.monotonic() - started < PROPAGATION_SECONDS + 1:
        if not s3_reads(server, creds):
            return time.monotonic() - started
        time.sleep(0.2)
    pytest.fail(f"credentials still accepted {PROPAGATION_SECONDS + 1} s after the revocation")


def log_lines(server, *texts: str, at_least: int = 1) -> list:
    """Lines of the server's log containing every one of `texts`, once there are `at_least`
    (the log is written by a background thread every few milliseconds)."""
    deadline = time.monotonic() + 3
    while True:
        lines = [line for line in server.output().splitlines() if all(text in line for text in texts)]
        if len(lines) >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def next_second():
    """Tokens carry whole seconds and a revocation covers its own second: wait for the next."""
    time.sleep(1.05 - (time.time() % 1))


# MARK: Revocation by subject, from the CLI while the server runs


def test_revoked_subject_is_refused_within_seconds_and_others_are_not(server):
    alice = issued_credentials(server, "--user", "alice")
    alice_again = issued_credentials(server, "--user", "alice", "--role", "readwrite")
    bob = issued_credentials(server, "--user", "bob")
    for creds in (alice, alice_again, bob):
        assert works_everywhere(server, creds)

    started = time.monotonic()
    recorded = revoke_cli(server, "--subject", "alice")
    assert recorded["Type"] == "Subject" and recorded["Value"] == "alice", recorded
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", recorded["RevokedAt"]), recorded

    took = wait_refused(server, alice, started)
    assert took <= PROPAGATION_SECONDS, took
    # Every token of alice, whatever its role, through both SDKs and both OSS signature versions.
    assert refused_everywhere(server, alice)
    assert refused_everywhere(server, alice_again)
    assert works_everywhere(server, bob)

    # The refusal is audited: who, which key, which role, from where, why — never the secret or token.
    lines = log_lines(server, "gateway request refused", "token.access_key_id=" + alice["AccessKeyId"])
    log = server.output()
    assert lines, log[-2000:]
    assert "token.subject=alice" in lines[0] and "token.role=default" in lines[0], lines[0]
    assert "client.address=127.0.0.1" in lines[0] and "revoked by Subject" in lines[0], lines[0]
    assert alice["AccessKeySecret"] not in log and alice["SecurityToken"] not in log

    # The app refreshes: credentials issued after the revocation work.
    next_second()
    assert works_everywhere(server, issued_credentials(server, "--user", "alice"))


def test_revocation_survives_a_restart(server):
    carol = issued_credentials(server, "--user", "carol")
    dave = issued_credentials(server, "--user", "dave")
    revoke_cli(server, "--subject", "carol")
    wait_refused(server, carol, time.monotonic())

    server.stop()
    server.start()
    assert refused_everywhere(server, carol)
    assert works_everywhere(server, dave)
    mode = (server.dir / "data" / "revocations.json").stat().st_mode & 0o777
    assert mode == 0o600, oct(mode)


# MARK: By access key id and by role


def test_revoke_one_access_key(server):
    first = issued_credentials(server, "--user", "erin")
    second = issued_credentials(server, "--user", "erin")
    recorded = revoke_cli(server, "--access-key-id", first["AccessKeyId"])
    assert recorded["Type"] == "AccessKeyId" and recorded["Value"] == first["AccessKeyId"], recorded
    wait_refused(server, first, time.monotonic())
    assert refused_everywhere(server, first)
    assert works_everywhere(server, second), "only the named key is revoked"


def test_revoke_a_role(server):
    reader = issued_credentials(server, "--user", "frank", "--role", "read")
    anonymous_reader = issued_credentials(server, "--role", "read")
    writer = issued_credentials(server, "--user", "frank", "--role", "readwrite")
    revoke_cli(server, "--role", "read")
    wait_refused(server, reader, time.monotonic())
    assert refused_everywhere(server, reader)
    assert refused_everywhere(server, anonymous_reader), "a role revocation covers tokens without a subject"
    assert works_everywhere(server, writer)
    next_second()
    assert works_everywhere(server, issued_credentials(server, "--role", "read"))


def test_the_cli_refuses_bad_input(server):
    for args in ([], ["--subject", "a", "--role", "b"], ["--subject", ""], ["--access-key-id", ROOT_ACCESS_KEY_ID]):
        result = server.cli("token", "revoke", "--config", str(server.config_path), *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)


# MARK: The admin endpoint


def admin_request(server, body: bytes, *, access_key_id=ROOT_ACCESS_KEY_ID, secret=ROOT_SECRET, token=None,
                  service="tollgate", tamper: bytes = None):
    """POST /admin/revoke signed by botocore's SigV4 signer (the body's SHA-256 in
    x-amz-content-sha256, as S3 signs), for `service`. `tamper` replaces the body after signing."""
    url = server.url + "/admin/revoke"
    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    S3SigV4Auth(Credentials(access_key_id, secret, token), service, "us-east-1").add_auth(request)
    prepared = request.prepare()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", "/admin/revoke", body=tamper if tamper is not None else body, headers=dict(prepared.headers))
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    return response.status, json.loads(text)


def test_admin_endpoint_revokes_with_the_root_credentials(server):
    grace = issued_credentials(server, "--user", "grace")
    heidi = issued_credentials(server, "--user", "heidi")
    assert works_everywhere(server, grace)
    started = time.monotonic()
    status, answer = admin_request(server, json.dumps({"Subject": "grace"}).encode())
    assert status == 200, answer
    assert answer["StatusCode"] == 200 and answer["Type"] == "Subject" and answer["Value"] == "grace", answer
    took = wait_refused(server, grace, started)
    assert took <= 1, f"the admin endpoint applies at once, took {took} s"
    assert refused_everywhere(server, grace)
    assert works_everywhere(server, heidi)
    assert "grace" in (server.dir / "data" / "revocations.json").read_text()
    assert ROOT_SECRET not in server.output()


def test_admin_endpoint_refuses_everyone_but_root(server):
    ivan = issued_credentials(server, "--user", "ivan")
    body = json.dumps({"Subject": "ivan"}).encode()

    def forbidden(status, answer, code=None):
        assert status == 403, (status, answer)
        assert list(answer) == ["StatusCode", "ErrorCode", "ErrorMessage"], answer
        assert answer["StatusCode"] == 403, answer
        if code:
            assert answer["ErrorCode"] == code, answer

    # Unsigned.
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", "/admin/revoke", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    forbidden(response.status, json.loads(response.read()), "AccessDenied")
    # Vended (temporary) credentials, even valid ones.
    forbidden(*admin_request(server, body, access_key_id=ivan["AccessKeyId"], secret=ivan["AccessKeySecret"],
                             token=ivan["SecurityToken"]), "InvalidAccessKeyId")
    # The root key id with a wrong secret.
    forbidden(*admin_request(server, body, secret=ROOT_SECRET + "x"), "SignatureDoesNotMatch")
    # A root signature for another service (an S3 request) is not an admin request.
    forbidden(*admin_request(server, body, service="s3"))
    # A root-signed request whose body was replaced.
    forbidden(*admin_request(server, body, tamper=json.dumps({"Subject": "heidi"}).encode()), "XAmzContentSHA256Mismatch")

    time.sleep(1.5)  # longer than the watcher's interval
    assert works_everywhere(server, ivan), "nothing was revoked"
    assert "ivan" not in (server.dir / "data" / "revocations.json").read_text()
    assert len(log_lines(server, "admin request refused", at_least=5)) >= 5

    # Root, but a body naming nothing or two things.
    for bad in (b"{}", b'{"Subject":"a","Role":"b"}', b'{"Group":"x"}', b"not json", b'{"AccessKeyId":"TGROOT"}'):
        status, answer = admin_request(server, bad)
        assert status == 400 and answer["ErrorCode"] == "InvalidParameterValue", (bad, status, answer)


# MARK: Rate limits


@pytest.fixture(scope="module")
def limited():
    s = Server({"AccessKeySecret": ROOT_SECRET, "RateLimits": {"PerAddressPerMinute": 6, "PerAddressBurst": 3}}).start()
    yield s
    s.cleanup()


def token_request(server, source: str):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10, source_address=(source, 0))
    connection.request("GET", "/")
    response = connection.getresponse()
    answer = response.status, response.getheader("Retry-After"), json.loads(response.read())
    connection.close()
    return answer


def loopback_alias_works() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 9), timeout=1, source_address=("127.0.0.2", 0)):
            pass
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return True


def test_a_burst_beyond_the_limit_is_throttled_and_another_address_is_not(limited):
    assert loopback_alias_works(), "binding 127.0.0.2 as a source address must work on Linux"
    answers = [token_request(limited, "127.0.0.1") for _ in range(5)]
    assert [status for status, _, _ in answers[:3]] == [200, 200, 200], answers
    for status, retry_after, answer in answers[3:]:
        assert status == 429, answers
        assert retry_after is not None and retry_after.isdigit() and 1 <= int(retry_after) <= 10, retry_after
        assert list(answer) == ["StatusCode", "ErrorCode", "ErrorMessage"], answer
        assert answer["StatusCode"] == 429 and answer["ErrorCode"] == "Throttling", answer
    # Another client address has its own allowance.
    status, _, answer = token_request(limited, "127.0.0.2")
    assert status == 200 and answer["AccessKeyId"].startswith("STS."), answer
    # Health checks are not limited.
    assert get_json(limited.url + "/healthz")[0] == 200
    # Two refusals of one address within 10 s: one line (RefusalLog); the metric counts both.
    refusals = log_lines(limited, "token request refused", at_least=2)
    assert len(refusals) == 1, refusals
    assert "client.address=127.0.0.1" in refusals[0] and "rate limit per address" in refusals[0], refusals[0]


def test_the_allowance_comes_back_after_retry_after(limited):
    # 6 a minute: a token every 10 s. Use up what is left, then wait as Retry-After says.
    statuses = []
    for _ in range(5):
        status, retry_after, _ = token_request(limited, "127.0.0.1")
        statuses.append(status)
        if status == 429:
            break
    assert statuses[-1] == 429, statuses
    time.sleep(int(retry_after) + 0.3)
    status, _, answer = token_request(limited, "127.0.0.1")
    assert status == 200, answer
