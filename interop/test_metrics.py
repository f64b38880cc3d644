"""Gateway metrics on the token listener's /metrics, and the audit line of a policy denial.

Each step scrapes /metrics (with requests) before and after a real client's request, and checks
that exactly the counters it should move moved: requests by operation, dialect and status,
duration histogram counts, bytes in and out, denials by reason, tokens issued by role.
"""
import json
from pathlib import Path
import re
import time

import oss2
import pytest
import requests
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET, Server
from s3_helpers import ROOT_ACCESS_KEY_ID, endpoint_credentials, error_of, root_client, s3_client

BUCKET = "metrics"
# The default role: read and write the bucket, but never read under secret/.
GUARDED_POLICY = """{
  "Version": "1",
  "Statement": [
    {"Sid": "ReadWrite", "Effect": "Allow", "Action": ["oss:GetObject", "oss:PutObject", "oss:ListObjects"],
     "Resource": ["acs:oss:*:*:metrics", "acs:oss:*:*:metrics/*"]},
    {"Sid": "DenySecret", "Effect": "Deny", "Action": "oss:GetObject", "Resource": "acs:oss:*:*:metrics/secret/*"}
  ]
}
"""
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@pytest.fixture(scope="module")
def gw():
    server = Server({"AccessKeySecret": ROOT_SECRET, "AccessKeyID": ROOT_ACCESS_KEY_ID,
                     "PolicyFile": "policy/guarded.txt", "Buckets": [BUCKET]}, bucket=BUCKET)
    (server.dir / "policy" / "guarded.txt").write_text(GUARDED_POLICY)
    server.start()
    yield server
    server.cleanup()


@pytest.fixture(scope="module")
def creds(gw):
    return endpoint_credentials(gw)


@pytest.fixture(scope="module")
def s3(gw, creds):
    return s3_client(gw, creds)


def scrape(server) -> dict:
    """Every sample of /metrics: {(name, frozenset of label pairs): value}."""
    response = requests.get(server.url + "/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    samples = {}
    for line in response.text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a Prometheus sample: {line!r}"
        name, labels, value = match.groups()
        samples[(name, frozenset(LABEL.findall(labels or "")))] = float(value)
    return samples


def key(name: str, **labels) -> tuple:
    return name, frozenset(labels.items())


def moved(before: dict, after: dict) -> dict:
    """The samples that changed, with their change (histogram buckets and sums left out)."""
    changes = {}
    for sample, value in after.items():
        if sample[0].endswith(("_bucket", "_sum")):
            continue
        delta = value - before.get(sample, 0)
        if delta:
            changes[sample] = delta
    return changes


def cache_lookups(changes: dict) -> float:
    """The local store's object-cache lookups among `changes` (hits and misses), taken out of them."""
    return sum(changes.pop(key("tollgate_store_cache_lookups_total", result=result), 0) for result in ("hit", "miss"))


def requests_total(operation, dialect, status):
    return key("tollgate_gateway_requests_total", operation=operation, dialect=dialect, status=str(status))


def duration_count(operation, dialect):
    return key("tollgate_gateway_request_duration_seconds_count", operation=operation, dialect=dialect)


def denials(reason):
    return key("tollgate_gateway_denials_total", reason=reason)


def bytes_received(dialect):
    return key("tollgate_gateway_bytes_received_total", dialect=dialect)


def bytes_sent(dialect):
    return key("tollgate_gateway_bytes_sent_total", dialect=dialect)


def test_tokens_issued_by_role(gw):
    before = scrape(gw)
    endpoint_credentials(gw)
    assert moved(before, scrape(gw)) == {key("tollgate_tokens_issued_total", role="default"): 1}


def test_put_then_get_counts_requests_bytes_and_durations(gw, s3):
    body = bytes(range(256)) * 40  # 10 KiB
    before = scrape(gw)
    s3.put_object(Bucket=BUCKET, Key="public.bin", Body=body)
    after_put = scrape(gw)
    changes = moved(before, after_put)
    assert changes.pop(requests_total("putObject", "s3", 200)) == 1
    assert changes.pop(duration_count("putObject", "s3")) == 1
    # boto3 may frame the body (aws-chunked with a checksum trailer): at least the object's bytes.
    assert changes.pop(bytes_received("s3")) >= len(body)
    assert changes == {}

    assert s3.get_object(Bucket=BUCKET, Key="public.bin")["Body"].read() == body
    ranged = s3.get_object(Bucket=BUCKET, Key="public.bin", Range="bytes=100-199")["Body"].read()
    assert ranged == body[100:200]
    changes = moved(after_put, scrape(gw))
    assert changes.pop(requests_total("getObject", "s3", 200)) == 1
    assert changes.pop(requests_total("getObject", "s3", 206)) == 1
    assert changes.pop(duration_count("getObject", "s3")) == 2
    assert changes.pop(bytes_sent("s3")) == len(body) + 100
    assert cache_lookups(changes) >= 2  # each GET looks in the store's cache first
    assert changes == {}


def test_oss_requests_are_counted_under_their_dialect(gw, creds):
    bucket = oss2.Bucket(oss2.StsAuth(creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"]),
                         gw.gateway_url, BUCKET, connect_timeout=30)
    before = scrape(gw)
    bucket.put_object("oss.txt", b"x" * 1000)
    assert bucket.get_object("oss.txt").read() == b"x" * 1000
    changes = moved(before, scrape(gw))
    assert changes.pop(requests_total("putObject", "oss", 200)) == 1
    assert changes.pop(requests_total("getObject", "oss", 200)) == 1
    assert changes.pop(duration_count("putObject", "oss")) == 1
    assert changes.pop(duration_count("getObject", "oss")) == 1
    assert changes.pop(bytes_received("oss")) == 1000
    assert changes.pop(bytes_sent("oss")) == 1000
    assert cache_lookups(changes) >= 1
    assert changes == {}


def test_policy_denials_by_reason_and_their_log_line(gw, s3, creds):
    root_client(gw).put_object(Bucket=BUCKET, Key="secret/plans.txt", Body=b"classified")
    before = scrape(gw)
    with pytest.raises(ClientError) as explicit:
        s3.get_object(Bucket=BUCKET, Key="secret/plans.txt")
    assert error_of(explicit) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as implicit:
        s3.delete_object(Bucket=BUCKET, Key="public.bin")
    assert error_of(implicit) == ("AccessDenied", 403)
    assert moved(before, scrape(gw)) == {
        requests_total("getObject", "s3", 403): 1, duration_count("getObject", "s3"): 1,
        requests_total("deleteObject", "s3", 403): 1, duration_count("deleteObject", "s3"): 1,
        denials("policy_explicit_deny"): 1, denials("policy_implicit_deny"): 1,
    }

    explicit_line = denial_line(gw, "gateway.key=secret/plans.txt")
    for field in ["gateway.operation=getObject", f"gateway.bucket={BUCKET}", "token.role=default",
                  f"gateway.access_key_id={creds['AccessKeyId']}", "client.address=127.0.0.1",
                  'policy.decision="Deny (explicit)"', f"policy.file={gw.dir / 'policy' / 'guarded.txt'}"]:
        assert field in explicit_line, (field, explicit_line)
    assert re.search(r'policy\.statement="\S*/policy/guarded\.txt:\d+ \(statement 2 \\"DenySecret\\"\)"', explicit_line), explicit_line
    assert creds["AccessKeySecret"] not in explicit_line and creds["SecurityToken"] not in explicit_line

    implicit_line = denial_line(gw, "gateway.operation=deleteObject")
    assert "gateway.key=public.bin" in implicit_line
    assert 'policy.decision="Deny (implicit)"' in implicit_line, implicit_line
    assert 'policy.statement="no statement allowed"' in implicit_line, implicit_line


def test_a_session_policy_denial_names_the_session_policy(gw):
    """AssumeRole (STS, root credentials) with an inline session policy that denies overwriting
    public.bin: the denial line says the session policy decided, and which of its statements."""
    import boto3
    from botocore.config import Config
    sts = boto3.client("sts", endpoint_url=gw.url, region_name="us-east-1", aws_access_key_id=ROOT_ACCESS_KEY_ID,
                       aws_secret_access_key=ROOT_SECRET, config=Config(retries={"max_attempts": 1}))
    session_policy = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:*", "Resource": f"arn:aws:s3:::{BUCKET}/*"},
        {"Sid": "NoOverwrite", "Effect": "Deny", "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{BUCKET}/public.bin"}]})
    before = scrape(gw)
    answer = sts.assume_role(RoleArn="arn:aws:iam::000000000000:role/default", RoleSessionName="backend", Policy=session_policy)
    vended = answer["Credentials"]
    narrowed = s3_client(gw, access_key_id=vended["AccessKeyId"], secret=vended["SecretAccessKey"], token=vended["SessionToken"])
    with pytest.raises(ClientError) as excinfo:
        narrowed.put_object(Bucket=BUCKET, Key="public.bin", Body=b"overwritten")
    assert error_of(excinfo) == ("AccessDenied", 403)
    changes = moved(before, scrape(gw))
    assert changes.pop(key("tollgate_tokens_issued_total", role="default")) == 1
    assert changes.pop(denials("policy_explicit_deny")) == 1
    assert changes.pop(requests_total("putObject", "s3", 403)) == 1
    assert changes.pop(duration_count("putObject", "s3")) == 1
    assert set(changes) <= {bytes_received("s3")}  # whatever of the body boto3 sent before the refusal

    line = denial_line(gw, f"gateway.access_key_id={vended['AccessKeyId']}")
    assert 'policy.file="session policy"' in line, line
    assert re.search(r'policy\.statement="session policy:\d+ \(statement 2 \\"NoOverwrite\\"\)"', line), line


def test_authentication_denials_by_reason(gw, creds):
    before = scrape(gw)
    forged = s3_client(gw, creds, secret="not-the-secret")
    with pytest.raises(ClientError) as bad_signature:
        forged.get_object(Bucket=BUCKET, Key="public.bin")
    assert error_of(bad_signature) == ("SignatureDoesNotMatch", 403)
    anonymous = requests.get(f"{gw.gateway_url}/{BUCKET}/public.bin", timeout=10)
    assert anonymous.status_code == 403
    assert moved(before, scrape(gw)) == {
        requests_total("getObject", "s3", 403): 2, duration_count("getObject", "s3"): 2,
        denials("signature_mismatch"): 1, denials("missing_auth"): 1,
    }


def test_unroutable_requests_are_operation_unknown(gw):
    before = scrape(gw)
    response = requests.request("PATCH", f"{gw.gateway_url}/{BUCKET}/public.bin", timeout=10)
    assert response.status_code == 405
    assert moved(before, scrape(gw)) == {
        requests_total("unknown", "s3", 405): 1, duration_count("unknown", "s3"): 1,
    }


def test_histogram_has_buckets_from_half_a_millisecond(gw):
    samples = scrape(gw)
    bounds = {dict(labels)["le"] for name, labels in samples
              if name == "tollgate_gateway_request_duration_seconds_bucket"
              and ("operation", "getObject") in labels and ("dialect", "s3") in labels}
    assert {"0.0005", "0.001", "1.0", "60.0", "+Inf"} <= bounds, bounds


def denial_line(server, marker: str, timeout: float = 5) -> str:
    """The server's "gateway request denied" line containing `marker` (the log is flushed
    every few milliseconds)."""
    deadline = time.monotonic() + timeout
    while True:
        for line in server.output().splitlines():
            if "gateway request denied" in line and marker in line:
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no denial line with {marker}:\n{server.output()[-4000:]}")
        time.sleep(0.05)


def declared_metric_names() -> set:
    """Every metric name the server's sources declare (`label: "tollgate_…"`, and the
    duration histogram's constant), so that a metric added later is checked too."""
    root = Path(__file__).resolve().parent.parent / "Sources"
    names = set()
    for path in root.rglob("*.swift"):
        text = path.read_text()
        names.update(re.findall(r'label: "(tollgate_[a-z_]+)"', text))
        names.update(re.findall(r'Label = "(tollgate_[a-z_]+)"', text))
    assert len(names) >= 10, names
    return names


def test_every_metric_is_exported_from_the_start():
    """Each metric once, on a server that was never reloaded: the ones made with the first
    configuration (its rate limiters) counted into nothing before the metrics system was
    bootstrapped first thing."""
    server = Server({"AccessKeySecret": ROOT_SECRET, "AccessKeyID": ROOT_ACCESS_KEY_ID,
                     "RateLimits": {"PerAddressPerMinute": 2, "PerAddressBurst": 2}}).start()
    try:
        creds = endpoint_credentials(server)
        requests.get(server.url + "/?Action=NoSuchAction", timeout=10)  # an STS refusal
        requests.get(server.url + "/", timeout=10)  # throttled: the address's burst of 2 is spent
        root = root_client(server)
        root.put_object(Bucket=server.bucket, Key="m.txt", Body=b"m")
        root.get_object(Bucket=server.bucket, Key="m.txt")["Body"].read()
        # A revoked key's request.
        result = server.cli("token", "revoke", "--config", str(server.config_path), "--access-key-id", creds["AccessKeyId"])
        assert result.returncode == 0, result.stderr
        client = s3_client(server, creds)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client.head_object(Bucket=server.bucket, Key="m.txt")
            except ClientError:
                break
            time.sleep(0.2)
        exported = {name.removesuffix("_count") for (name, _) in scrape(server)}
        text = requests.get(server.url + "/metrics", timeout=10).text
        # The upstream STS metrics exist per configured upstream: test_upstream_sts.py checks them.
        missing = sorted(name for name in declared_metric_names()
                         if not name.startswith("tollgate_upstream_") and f"# TYPE {name} " not in text and name not in exported)
        assert missing == [], f"declared but not exported: {missing}"
        samples = scrape(server)
        assert samples.get(key("tollgate_token_requests_throttled_total", limit="address"), 0) >= 1
        assert samples.get(key("tollgate_token_refusals_total", code="InvalidAction"), 0) == 1
        assert samples.get(key("tollgate_gateway_revoked_requests_total"), 0) >= 1
    finally:
        server.cleanup()
