"""`TrustedProxies`, end to end: behind a trusted proxy (here 127.0.0.1, the test itself playing
the proxy) `X-Forwarded-For` / `Forwarded` name the client for `aws:SourceIp`, the token
endpoint's per-address rate limit and the log, and `X-Forwarded-Proto: https` is
`aws:SecureTransport`; from any other peer those headers change nothing."""
import json
import time

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET, Server
from s3_helpers import ROOT_ACCESS_KEY_ID, issued_credentials, s3_client

POLICIES = {
    # Writes only from the documentation network 203.0.113.0/24.
    "from_office": {"Version": "1", "Statement": [{
        "Effect": "Allow", "Action": ["oss:PutObject"], "Resource": ["acs:oss:*:*:$BUCKET_NAME/*"],
        "Condition": {"IpAddress": {"acs:SourceIp": "203.0.113.0/24"}},
    }]},
    "secure": {"Version": "1", "Statement": [{
        "Effect": "Allow", "Action": ["oss:PutObject"], "Resource": ["acs:oss:*:*:$BUCKET_NAME/*"],
        "Condition": {"Bool": {"acs:SecureTransport": "true"}},
    }]},
}
RATE_LIMITS = {"PerAddressPerMinute": 2, "PerAddressBurst": 2}


def proxied_server(trusted: list) -> Server:
    config = {"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET, "RateLimits": RATE_LIMITS,
              "Roles": {name: f"policy/{name}.txt" for name in POLICIES}}
    if trusted:
        config["TrustedProxies"] = trusted
    server = Server(config)
    for role, policy in POLICIES.items():
        (server.dir / "policy" / f"{role}.txt").write_text(json.dumps(policy))
    return server.start()


@pytest.fixture(scope="module")
def behind_proxy():
    server = proxied_server(["10.0.0.0/8", "127.0.0.1", "::1"])
    yield server
    server.cleanup()


@pytest.fixture(scope="module", params=[[], ["192.0.2.1", "10.0.0.0/8"]], ids=["none", "others"])
def direct(request):
    """127.0.0.1 is not a trusted proxy: no TrustedProxies at all, or a list without it."""
    server = proxied_server(request.param)
    yield server
    server.cleanup()


def forwarding_client(server, role: str, headers: dict):
    """A boto3 client whose requests get `headers` added after signing, as a proxy adds them."""
    client = s3_client(server, issued_credentials(server, "--role", role))

    def add_headers(request, **_):
        for name, value in headers.items():
            request.headers[name] = value

    client.meta.events.register("before-send.s3.*", add_headers)
    return client


def put(client, bucket: str, key: str):
    """None when allowed, else the error code and status."""
    try:
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
        return None
    except ClientError as error:
        return error.response["Error"].get("Code"), error.response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.mark.parametrize("headers, allowed", [
    ({"X-Forwarded-For": "203.0.113.7"}, True),
    ({"X-Forwarded-For": "198.51.100.7"}, False),
    # A client's own X-Forwarded-For is to the left of what the proxy appends.
    ({"X-Forwarded-For": "203.0.113.7, 198.51.100.7"}, False),
    # Trusted hops to the right are skipped.
    ({"X-Forwarded-For": "203.0.113.7, 10.1.2.3"}, True),
    ({"Forwarded": 'for="203.0.113.7:5000";proto=https'}, True),
    ({"Forwarded": "for=198.51.100.7", "X-Forwarded-For": "203.0.113.7"}, False),
    # Malformed: ignored, the client is the proxy itself.
    ({"X-Forwarded-For": "203.0.113.7, not-an-address"}, False),
    ({}, False),
])
def test_source_ip_behind_a_trusted_proxy(behind_proxy, headers, allowed):
    client = forwarding_client(behind_proxy, "from_office", headers)
    assert put(client, behind_proxy.bucket, "office/report") == (None if allowed else ("AccessDenied", 403))


def test_forwarding_headers_from_an_untrusted_peer_change_nothing(direct):
    client = forwarding_client(direct, "from_office", {"X-Forwarded-For": "203.0.113.7", "Forwarded": "for=203.0.113.7"})
    assert put(client, direct.bucket, "office/report") == ("AccessDenied", 403)
    secure = forwarding_client(direct, "secure", {"X-Forwarded-Proto": "https", "Forwarded": "for=203.0.113.7;proto=https"})
    assert put(secure, direct.bucket, "secure/report") == ("AccessDenied", 403)
    # The rate limit is per peer: a different X-Forwarded-For on each request does not escape it.
    answers = [requests.get(direct.url + "/", headers={"X-Forwarded-For": f"203.0.113.{n}"}, timeout=10)
               for n in range(1, 4)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    keys = [a.json()["AccessKeyId"] for a in answers[:2]]
    records = direct.audit_records(*keys)
    assert [records[key]["client_address"] for key in keys] == ["127.0.0.1", "127.0.0.1"]
    time.sleep(0.3)
    assert "client.address=203.0.113." not in direct.output()


@pytest.mark.parametrize("headers, allowed", [
    ({"X-Forwarded-Proto": "https"}, True),
    ({"X-Forwarded-Proto": "http"}, False),
    ({"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"}, True),
    ({"Forwarded": "for=203.0.113.7;proto=https"}, True),
    ({"Forwarded": "for=203.0.113.7"}, False),
    ({}, False),
])
def test_forwarded_proto_https_is_secure_transport(behind_proxy, headers, allowed):
    client = forwarding_client(behind_proxy, "secure", headers)
    assert put(client, behind_proxy.bucket, "secure/report") == (None if allowed else ("AccessDenied", 403))


def test_rate_limits_audit_and_logs_count_the_forwarded_client(behind_proxy):
    def vend(client: str) -> requests.Response:
        return requests.get(behind_proxy.url + "/", headers={"X-Forwarded-For": client}, timeout=10)

    first = [vend("203.0.113.50") for _ in range(3)]
    assert [r.status_code for r in first] == [200, 200, 429]
    # Another client behind the same proxy has its own bucket.
    other = vend("203.0.113.51")
    assert other.status_code == 200
    keys = [first[0].json()["AccessKeyId"], first[1].json()["AccessKeyId"], other.json()["AccessKeyId"]]
    records = behind_proxy.audit_records(*keys)
    assert [records[key]["client_address"] for key in keys] == ["203.0.113.50", "203.0.113.50", "203.0.113.51"]
    time.sleep(0.3)
    refused = [line for line in behind_proxy.output().splitlines() if "token request refused" in line]
    assert any("client.address=203.0.113.50" in line for line in refused), refused
