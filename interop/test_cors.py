"""CORS for browser apps, tested as a browser sends it (raw requests with Origin and the
preflight's Access-Control-Request-* headers): the gateway's rules and the token endpoint's
origins from config.json's CORS section."""
import json
import subprocess

import boto3
import pytest
import requests
from botocore.config import Config

from conftest import ROOT_SECRET, Server, binary
from s3_helpers import ROOT_ACCESS_KEY_ID

APP = "https://app.example.com"
CORS = {
    "Gateway": [{"AllowedOrigins": [APP, "http://localhost:*"], "AllowedMethods": ["GET", "PUT", "HEAD"],
                 "AllowedHeaders": ["content-type", "x-amz-*", "authorization"], "ExposeHeaders": ["x-amz-meta-owner"],
                 "MaxAgeSeconds": 600}],
    "TokenEndpoint": [APP],
}


@pytest.fixture(scope="module")
def gw():
    server = Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET, "CORS": CORS}).start()
    yield server
    server.cleanup()


def presigned(server, method, key, **params):
    s3 = boto3.client("s3", endpoint_url=server.gateway_url, region_name="us-east-1", aws_access_key_id=ROOT_ACCESS_KEY_ID,
                      aws_secret_access_key=ROOT_SECRET, config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    return s3.generate_presigned_url(method, Params={"Bucket": "tollgate", "Key": key, **params}, ExpiresIn=300)


def test_gateway_preflight_allowed_and_refused(gw):
    allowed = requests.options(f"{gw.gateway_url}/tollgate/photos/cat.jpg", timeout=10, headers={
        "Origin": APP, "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "content-type, x-amz-date"})
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["Access-Control-Allow-Origin"] == APP
    assert set(allowed.headers["Access-Control-Allow-Methods"].split(", ")) == {"GET", "PUT", "HEAD"}
    assert allowed.headers["Access-Control-Allow-Headers"] == "content-type, x-amz-date"
    assert allowed.headers["Access-Control-Max-Age"] == "600"
    assert "Origin" in allowed.headers["Vary"]
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
