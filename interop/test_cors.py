"""CORS for browser apps, tested as a browser sends it (raw requests with Origin and the
preflight's Access-Control-Request-* headers): the gateway's rules and the token endpoint's
origins from config.json's CORS section, and buckets' own rules (Put/Get/DeleteBucketCors with
boto3 and oss2), which replace the config's for their bucket."""
import json
import subprocess

import boto3
import oss2
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import ROOT, ROOT_SECRET, Server, binary
from oss_helpers import refused, sts_bucket
from s3_helpers import ROOT_ACCESS_KEY_ID, error_of, issued_credentials, root_client, s3_client

APP = "https://app.example.com"
# Virtual-hosted requests name their bucket in Host: BUCKET.BASE_DOMAIN.
BASE_DOMAIN = "s3.tollgate.test"
CORS = {
    "Gateway": [{"AllowedOrigins": [APP, "http://localhost:*"], "AllowedMethods": ["GET", "PUT", "HEAD"],
                 "AllowedHeaders": ["content-type", "x-amz-*", "authorization"], "ExposeHeaders": ["x-amz-meta-owner"],
                 "MaxAgeSeconds": 600}],
    "TokenEndpoint": [APP],
}


@pytest.fixture(scope="module")
def gw():
    server = Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET, "CORS": CORS,
                     "GatewayBaseDomain": BASE_DOMAIN}).start()
    yield server
    server.cleanup()


def presigned(server, method, key, bucket="tollgate", **params):
    s3 = boto3.client("s3", endpoint_url=server.gateway_url, region_name="us-east-1", aws_access_key_id=ROOT_ACCESS_KEY_ID,
                      aws_secret_access_key=ROOT_SECRET, config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    return s3.generate_presigned_url(method, Params={"Bucket": bucket, "Key": key, **params}, ExpiresIn=300)


def assert_grants(allowed, origin, methods, headers, max_age):
    """A preflight answered 200 with a rule's grants: the origin, its methods, the headers asked for."""
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["Access-Control-Allow-Origin"] == origin
    assert set(allowed.headers["Access-Control-Allow-Methods"].split(", ")) == methods
    assert allowed.headers["Access-Control-Allow-Headers"] == headers
    assert allowed.headers["Access-Control-Max-Age"] == max_age
    assert "Origin" in allowed.headers["Vary"]


def test_gateway_preflight_allowed_and_refused(gw):
    allowed = requests.options(f"{gw.gateway_url}/tollgate/photos/cat.jpg", timeout=10, headers={
        "Origin": APP, "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "content-type, x-amz-date"})
    assert_grants(allowed, APP, {"GET", "PUT", "HEAD"}, "content-type, x-amz-date", "600")
    assert allowed.content == b""
    for headers in ({"Origin": "https://evil.example", "Access-Control-Request-Method": "PUT"},
                    {"Origin": APP, "Access-Control-Request-Method": "DELETE"},
                    {"Origin": APP, "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "x-custom"},
                    {"Access-Control-Request-Method": "GET"}):
        refused = requests.options(f"{gw.gateway_url}/tollgate/photos/cat.jpg", headers=headers, timeout=10)
        assert refused.status_code == 403 and "<Code>AccessForbidden</Code>" in refused.text, headers
        assert "Access-Control-Allow-Origin" not in refused.headers


def test_gateway_actual_requests_carry_the_headers(gw):
    put = requests.put(presigned(gw, "put_object", "cors/a.txt"), data=b"from the browser", headers={"Origin": "http://localhost:3000"}, timeout=10)
    assert put.status_code == 200
    assert put.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
    exposed = put.headers["Access-Control-Expose-Headers"]
    for name in ("ETag", "x-amz-request-id", "x-oss-request-id", "x-oss-hash-crc64ecma", "x-amz-meta-owner"):
        assert name in exposed
    get = requests.get(presigned(gw, "get_object", "cors/a.txt"), headers={"Origin": APP}, timeout=10)
    assert get.status_code == 200 and get.content == b"from the browser"
    assert get.headers["Access-Control-Allow-Origin"] == APP and "Origin" in get.headers["Vary"]
    # An error answer carries them too, so the page can read why.
    missing = requests.get(presigned(gw, "get_object", "cors/missing.txt"), headers={"Origin": APP}, timeout=10)
    assert missing.status_code == 404 and missing.headers["Access-Control-Allow-Origin"] == APP
    # Another origin, or a method no rule allows: no CORS headers, the browser keeps the answer from the page.
    other = requests.get(presigned(gw, "get_object", "cors/a.txt"), headers={"Origin": "https://evil.example"}, timeout=10)
    assert "Access-Control-Allow-Origin" not in other.headers
    # Preflight is no way around authentication.
    anonymous = requests.get(f"{gw.gateway_url}/tollgate/cors/a.txt", headers={"Origin": APP}, timeout=10)
    assert anonymous.status_code == 403 and b"from the browser" not in anonymous.content


def test_token_endpoint_origins(gw):
    preflight = requests.options(f"{gw.url}/", headers={"Origin": APP, "Access-Control-Request-Method": "GET",
                                                       "Access-Control-Request-Headers": "authorization"}, timeout=10)
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == APP
    assert preflight.headers["Access-Control-Allow-Headers"] == "authorization"
    token = requests.get(f"{gw.url}/", headers={"Origin": APP}, timeout=10)
    assert token.status_code == 200 and token.json()["StatusCode"] == 200
    assert token.headers["Access-Control-Allow-Origin"] == APP
    stranger = requests.get(f"{gw.url}/", headers={"Origin": "https://evil.example"}, timeout=10)
    assert "Access-Control-Allow-Origin" not in stranger.headers


def test_without_cors_config_nothing_changes():
    server = Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET}).start()
    try:
        token = requests.get(f"{server.url}/", headers={"Origin": APP}, timeout=10)
        assert "Access-Control-Allow-Origin" not in token.headers
        preflight = requests.options(f"{server.gateway_url}/tollgate/x", headers={"Origin": APP, "Access-Control-Request-Method": "GET"}, timeout=10)
        assert preflight.status_code == 403
    finally:
        server.cleanup()


def test_bad_cors_config_names_the_key(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"AccessKeySecret": ROOT_SECRET, "PolicyFile": "policy/all_policy.txt",
                                  "CORS": {"Gateway": [{"AllowedOrigins": ["app.example.com"], "AllowedMethods": ["GET"]}]}}))
    result = subprocess.run([binary(), "serve", "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "CORS.Gateway[0].AllowedOrigins" in result.stderr, result.stderr


# MARK: Buckets' own rules (PutBucketCors / GetBucketCors / DeleteBucketCors)

UPLOADER = "https://uploader.example.org"
BUCKET_RULES = [{"ID": "uploads", "AllowedOrigins": [UPLOADER, "https://*.uploader.example.org"], "AllowedMethods": ["PUT", "POST", "GET"],
                 "AllowedHeaders": ["content-type", "x-amz-*"], "ExposeHeaders": ["x-amz-version-id"], "MaxAgeSeconds": 1200}]


def fresh_bucket(server, name):
    s3 = root_client(server)
    s3.create_bucket(Bucket=name)
    return s3


def preflight(url, origin, method, headers=None, host=None):
    sent = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers:
        sent["Access-Control-Request-Headers"] = headers
    if host:
        sent["Host"] = host
    return requests.options(url, headers=sent, timeout=10)


def test_boto3_bucket_cors(gw):
    s3 = fresh_bucket(gw, "cors-boto3")
    with pytest.raises(ClientError) as none:
        s3.get_bucket_cors(Bucket="cors-boto3")
    assert error_of(none) == ("NoSuchCORSConfiguration", 404)
    s3.put_bucket_cors(Bucket="cors-boto3", CORSConfiguration={"CORSRules": BUCKET_RULES})
    assert s3.get_bucket_cors(Bucket="cors-boto3")["CORSRules"] == BUCKET_RULES
    # Replaced whole.
    s3.put_bucket_cors(Bucket="cors-boto3", CORSConfiguration={"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]})
    assert s3.get_bucket_cors(Bucket="cors-boto3")["CORSRules"] == [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]
    for rules, code in (([{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}], "InvalidRequest"),
                        ([{"AllowedOrigins": ["https://*.*.example.com"], "AllowedMethods": ["GET"]}], "InvalidRequest"),
                        ([{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}] * 101, "InvalidRequest"),
                        ([{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "MaxAgeSeconds": -1}], "MalformedXML")):
        with pytest.raises(ClientError) as bad:
            s3.put_bucket_cors(Bucket="cors-boto3", CORSConfiguration={"CORSRules": rules})
        assert error_of(bad) == (code, 400), rules
    assert s3.get_bucket_cors(Bucket="cors-boto3")["CORSRules"] == [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]
    for _ in range(2):
        assert s3.delete_bucket_cors(Bucket="cors-boto3")["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as deleted:
        s3.get_bucket_cors(Bucket="cors-boto3")
    assert error_of(deleted) == ("NoSuchCORSConfiguration", 404)
    with pytest.raises(ClientError) as missing:
        s3.put_bucket_cors(Bucket="cors-no-such-bucket", CORSConfiguration={"CORSRules": BUCKET_RULES})
    assert error_of(missing) == ("NoSuchBucket", 404)


def oss2_root(server, name):
    return oss2.Bucket(oss2.Auth(ROOT_ACCESS_KEY_ID, ROOT_SECRET), server.gateway_url, name, connect_timeout=30)


def test_oss2_bucket_cors(gw):
    bucket = oss2_root(gw, "cors-oss2")
    bucket.create_bucket()
    refused(bucket.get_bucket_cors, 404, "NoSuchCORSConfiguration")
    rule = oss2.models.CorsRule(allowed_origins=[UPLOADER], allowed_methods=["GET", "PUT", "POST"], allowed_headers=["*"],
                                expose_headers=["x-oss-meta-owner", "x-oss-request-id"], max_age_seconds=100)
    bucket.put_bucket_cors(oss2.models.BucketCors([rule, oss2.models.CorsRule(allowed_origins=["*"], allowed_methods=["HEAD"])],
                                                  response_vary=True))
    result = bucket.get_bucket_cors()
    assert [(r.allowed_origins, r.allowed_methods, r.allowed_headers, r.expose_headers, r.max_age_seconds) for r in result.rules] == [
        ([UPLOADER], ["GET", "PUT", "POST"], ["*"], ["x-oss-meta-owner", "x-oss-request-id"], 100),
        (["*"], ["HEAD"], [], [], None)]
    assert result.response_vary is True
    refused(lambda: bucket.put_bucket_cors(oss2.models.BucketCors([oss2.models.CorsRule(allowed_origins=["*"], allowed_methods=["PATCH"])])),
            400, "InvalidRequest")
    assert len(bucket.get_bucket_cors().rules) == 2
    assert bucket.delete_bucket_cors().status == 204
    assert bucket.delete_bucket_cors().status == 204
    refused(bucket.get_bucket_cors, 404, "NoSuchCORSConfiguration")


def test_bucket_rules_replace_the_default_for_a_browser(gw):
    s3 = fresh_bucket(gw, "cors-browser")
    s3.put_object(Bucket="cors-browser", Key="photos/cat.jpg", Body=b"meow")
    url = f"{gw.gateway_url}/cors-browser/photos/cat.jpg"
    # No rules of its own yet: config.json's default decides.
    assert preflight(url, APP, "PUT", "content-type").status_code == 200
    assert preflight(url, UPLOADER, "PUT").status_code == 403

    s3.put_bucket_cors(Bucket="cors-browser", CORSConfiguration={"CORSRules": BUCKET_RULES})
    allowed = preflight(url, UPLOADER, "PUT", "content-type, x-amz-date, x-amz-security-token")
    assert_grants(allowed, UPLOADER, {"PUT", "POST", "GET"}, "content-type, x-amz-date, x-amz-security-token", "1200")
    assert "x-amz-version-id" in allowed.headers["Access-Control-Expose-Headers"]
    assert preflight(url, "https://cdn.uploader.example.org", "POST").status_code == 200
    # The default no longer applies to this bucket...
    replaced = preflight(url, APP, "PUT", "content-type")
    assert replaced.status_code == 403 and "<Code>AccessForbidden</Code>" in replaced.text
    assert "Access-Control-Allow-Origin" not in replaced.headers
    assert preflight(url, UPLOADER, "DELETE").status_code == 403
    assert preflight(url, UPLOADER, "PUT", "x-custom").status_code == 403
    # ...but still to every other bucket.
    assert preflight(f"{gw.gateway_url}/tollgate/photos/cat.jpg", APP, "PUT").status_code == 200
    assert preflight(f"{gw.gateway_url}/tollgate/photos/cat.jpg", UPLOADER, "PUT").status_code == 403
    # Virtual-hosted: the bucket is in Host, as for any request.
    virtual = f"{gw.gateway_url}/photos/cat.jpg"
    assert preflight(virtual, UPLOADER, "PUT", host=f"cors-browser.{BASE_DOMAIN}:{gw.gateway_port}").status_code == 200
    assert preflight(virtual, APP, "PUT", host=f"cors-browser.{BASE_DOMAIN}:{gw.gateway_port}").status_code == 403
    assert preflight(virtual, APP, "PUT", host=f"tollgate.{BASE_DOMAIN}:{gw.gateway_port}").status_code == 200

    # The actual requests, as the browser sends them after the preflight.
    put = requests.put(presigned(gw, "put_object", "photos/dog.jpg", bucket="cors-browser"), data=b"woof",
                       headers={"Origin": UPLOADER, "Content-Type": "image/jpeg"}, timeout=10)
    assert put.status_code == 200
    assert put.headers["Access-Control-Allow-Origin"] == UPLOADER
    for name in ("ETag", "x-amz-request-id", "x-amz-version-id"):
        assert name in put.headers["Access-Control-Expose-Headers"]
    get = requests.get(presigned(gw, "get_object", "photos/dog.jpg", bucket="cors-browser"), headers={"Origin": APP}, timeout=10)
    assert get.status_code == 200 and get.content == b"woof"
    assert "Access-Control-Allow-Origin" not in get.headers

    # Deleting the bucket's rules brings the default back.
    s3.delete_bucket_cors(Bucket="cors-browser")
    assert preflight(url, APP, "PUT", "content-type").status_code == 200
    assert preflight(url, UPLOADER, "PUT").status_code == 403
    get = requests.get(presigned(gw, "get_object", "photos/dog.jpg", bucket="cors-browser"), headers={"Origin": APP}, timeout=10)
    assert get.headers["Access-Control-Allow-Origin"] == APP


def test_rules_go_with_their_bucket(gw):
    s3 = fresh_bucket(gw, "cors-gone")
    s3.put_bucket_cors(Bucket="cors-gone", CORSConfiguration={"CORSRules": BUCKET_RULES})
    assert preflight(f"{gw.gateway_url}/cors-gone/x", UPLOADER, "PUT").status_code == 200
    s3.delete_bucket(Bucket="cors-gone")
    s3.create_bucket(Bucket="cors-gone")
    with pytest.raises(ClientError) as none:
        s3.get_bucket_cors(Bucket="cors-gone")
    assert error_of(none) == ("NoSuchCORSConfiguration", 404)
    assert preflight(f"{gw.gateway_url}/cors-gone/x", UPLOADER, "PUT").status_code == 403
    assert preflight(f"{gw.gateway_url}/cors-gone/x", APP, "PUT").status_code == 200


def test_read_only_role_may_not_change_the_rules(gw):
    root = root_client(gw)
    root.put_bucket_cors(Bucket="tollgate", CORSConfiguration={"CORSRules": BUCKET_RULES})
    try:
        credentials = issued_credentials(gw, "--role", "read")
        reader = s3_client(gw, credentials)
        for call in (lambda: reader.put_bucket_cors(Bucket="tollgate", CORSConfiguration={"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]}),
                     lambda: reader.delete_bucket_cors(Bucket="tollgate"),
                     lambda: reader.get_bucket_cors(Bucket="tollgate")):
            with pytest.raises(ClientError) as denied:
                call()
            assert error_of(denied) == ("AccessDenied", 403)
        oss_reader = sts_bucket(gw, credentials, "v1", "tollgate")
        refused(lambda: oss_reader.put_bucket_cors(oss2.models.BucketCors([oss2.models.CorsRule(allowed_origins=["*"], allowed_methods=["GET"])])),
                403, "AccessDenied")
        refused(oss_reader.delete_bucket_cors, 403, "AccessDenied")
        assert root.get_bucket_cors(Bucket="tollgate")["CORSRules"] == BUCKET_RULES
    finally:
        root.delete_bucket_cors(Bucket="tollgate")


def simulate(policy, action, resource):
    return subprocess.run([binary(), "policy", "simulate", "--config", "config.json", "--policy", str(policy),
                           "--action", action, "--resource", resource], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_policy_tools_know_the_cors_actions(tmp_path):
    # IAM's s3:PutBucketCORS is what OSS's DeleteBucketCors needs too.
    policy = tmp_path / "cors.json"
    policy.write_text(json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:PutBucketCORS", "s3:GetBucketCORS"], "Resource": "arn:aws:s3:::tollgate"}]}))
    check = subprocess.run([binary(), "policy", "check", "--config", "config.json", str(policy)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    for action in ("oss:PutBucketCors", "oss:DeleteBucketCors", "oss:GetBucketCors", "s3:PutBucketCORS"):
        allowed = simulate(policy, action, "acs:oss:*:*:tollgate")
        assert allowed.returncode == 0 and allowed.stdout.startswith("Allow"), (action, allowed.stdout, allowed.stderr)
    # The reference read-write policy grants objects only.
    denied = simulate("policy/bucket_read_write_policy.txt", "s3:PutBucketCORS", "arn:aws:s3:::tollgate")
    assert denied.returncode == 1 and denied.stdout.startswith("Deny"), denied.stdout + denied.stderr
