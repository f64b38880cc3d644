"""The token endpoint end to end: the real binary, a real HTTP client."""
import json
import os
import re
import stat
import time
from datetime import datetime, timezone

import boto3
import botocore.config
import botocore.exceptions
import pytest

from conftest import ROOT, ROOT_SECRET, Server, get_json

SHAPE = re.compile(
    r'^\{"StatusCode":200,"AccessKeyId":"STS\.[A-Za-z0-9]{24}","AccessKeySecret":"[A-Za-z0-9_-]{40,}",'
    r'"SecurityToken":"TG1\.[^"]+","Expiration":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"\}$')


@pytest.mark.parametrize("path", ["/", "/sts/getkey", "/sts/getsts"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_shape_and_aliases(server, path, method):
    before = time.time()
    status, headers, body = get_json(server.url + path, method)
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    assert SHAPE.match(body), body
    data = json.loads(body)
    assert isinstance(data["StatusCode"], int) and data["StatusCode"] == 200
    # The Android SDK parses Expiration with yyyy-MM-dd'T'HH:mm:ss (UTC).
    expiration = datetime.strptime(data["Expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert before + 900 - 2 <= expiration.timestamp() <= time.time() + 900 + 1


def test_unknown_path_is_json_404(server):
    status, _, body = get_json(server.url + "/nothing/here")
    assert status == 404
    data = json.loads(body)
    assert data == {"StatusCode": 404, "ErrorCode": "NotFound", "ErrorMessage": "No such endpoint: /nothing/here"}


def test_healthz(server):
    status, _, body = get_json(server.url + "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"


def test_logs_name_tokens_but_never_hold_secrets():
    """At `debug`, every issue is a `token issued` line; at no level does a secret reach the log."""
    server = Server({"AccessKeySecret": ROOT_SECRET}, env={"LOG_LEVEL": "debug"}).start()
    try:
        issued = [json.loads(get_json(server.url + "/")[2]) for _ in range(3)]
        time.sleep(0.3)
        log = server.output()
    finally:
        server.cleanup()
    for credentials in issued:
        lines = [line for line in log.splitlines() if credentials["AccessKeyId"] in line]
        assert len(lines) == 1 and "token issued" in lines[0]
        assert "client.address=127.0.0.1" in lines[0] and "token.role=default" in lines[0]
        assert credentials["AccessKeySecret"] not in log
        for part in credentials["SecurityToken"].split(".")[2:]:
            assert part not in log
    assert ROOT_SECRET not in log


def test_issues_are_recorded_in_the_audit_file_not_logged_at_info(server):
    """At the default level the audit file is the one record of an issue: no log line repeats it."""
    issued = json.loads(get_json(server.url + "/")[2])
    assert server.audit_records(issued["AccessKeyId"])[issued["AccessKeyId"]]["role"] == "default"
    time.sleep(0.1)
    assert issued["AccessKeyId"] not in server.output()


def test_token_inspect_and_tamper(server):
    token = json.loads(get_json(server.url + "/")[2])["SecurityToken"]
    ok = server.cli("token", "inspect", "--config", str(server.config_path), token)
    assert ok.returncode == 0, ok.stderr
    claims = json.loads(ok.stdout)
    assert claims["Valid"] is True and claims["Role"] == "default"
    position = len(token) - 5
    tampered = token[:position] + ("A" if token[position] != "A" else "B") + token[position + 1:]
    bad = server.cli("token", "inspect", "--config", str(server.config_path), tampered)
    assert bad.returncode == 1
    assert "bad signature" in bad.stderr


def test_token_issue_cli(server):
    result = server.cli("token", "issue", "--config", str(server.config_path), "--user", "alice",
                        "--role", "isolated", "--duration", "1800")
    assert result.returncode == 0, result.stderr
    assert SHAPE.match(result.stdout.strip()), result.stdout
    data = json.loads(result.stdout)
    inspected = json.loads(server.cli("token", "inspect", "--config", str(server.config_path),
                                      data["SecurityToken"], check=True).stdout)
    assert inspected["Subject"] == "alice" and inspected["Role"] == "isolated"
    unknown = server.cli("token", "issue", "--config", str(server.config_path), "--role", "nope")
    assert unknown.returncode == 2 and "unknown role" in unknown.stderr


@pytest.mark.parametrize("change,message", [
    ({"TokenExpireTime": "60"}, "TokenExpireTime must be at least 900 seconds (got 60)"),
    ({"TokenExpireTime": 50000}, "TokenExpireTime must be at most 43200 seconds (got 50000)"),
    ({"AccessKeySecret": "too-short"}, "AccessKeySecret must be at least 32 bytes"),
    ({"PolicyFile": "policy/missing.txt"}, "policy/missing.txt:1:1: cannot read the file"),
])
def test_bad_config_stops_with_exit_2_and_one_line(change, message):
    s = Server(change)
    try:
        result = s.cli("serve", "--config", str(s.config_path))
        assert result.returncode == 2, (result.returncode, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert message in lines[0]
    finally:
        s.cleanup()


def test_invalid_json_config():
    s = Server({})
    try:
        s.config_path.write_text('{"PolicyFile": "policy/all_policy.txt",')
        result = s.cli("serve", "--config", str(s.config_path))
        assert result.returncode == 2
        # Named by line and column, like a policy file's errors.
        assert re.search(r"config\.json:1:\d+: invalid JSON: ", result.stderr), result.stderr
    finally:
        s.cleanup()


def test_unknown_keys_are_warned_about():
    s = Server({"AccessKeySecret": "x" * 40, "Colour": "blue"}).start()
    try:
        time.sleep(0.2)
        assert re.search(r"warning .*config.keys=Colour", s.output()), s.output()
    finally:
        s.cleanup()


def test_reference_config_unmodified_generates_secret_once():
    """The reference file, byte for byte, on the default ports; first start prints the root credentials."""
    s = Server({})
    try:
        reference = (
            '{\n  "AccessKeyID" : "",\n  "AccessKeySecret" : "",\n  "RoleArn" : "",\n'
            '  "TokenExpireTime" : "900",\n  "PolicyFile": "policy/all_policy.txt"\n}\n')
        s.config_path.write_text(reference)
        s.port, s.gateway_port = 7080, 9000
        s.start()
        status, _, body = get_json(s.url + "/")
        assert status == 200 and SHAPE.match(body)
        s.stop()
        first = s.output()
        assert first.count("AccessKeySecret:") == 1
        secret_file = s.dir / "data" / "root-credentials.json"
        assert stat.S_IMODE(os.stat(secret_file).st_mode) == 0o600
        stored = json.loads(secret_file.read_text())
        assert len(stored["AccessKeySecret"]) >= 43 and stored["AccessKeySecret"] in first

        s.log_path.unlink()
        s.start()
        status, _, body = get_json(s.url + "/")
        assert status == 200
        s.stop()
        assert "AccessKeySecret:" not in s.output(), "printed only at first start"
        assert stored["AccessKeySecret"] not in s.output()
    finally:
        s.cleanup()


def s3_client(s):
    credentials = json.loads(get_json(s.url + "/")[2])
    return boto3.client(
        "s3", endpoint_url=s.gateway_url, region_name="us-east-1",
        aws_access_key_id=credentials["AccessKeyId"], aws_secret_access_key=credentials["AccessKeySecret"],
        aws_session_token=credentials["SecurityToken"],
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def test_policy_edits_apply_and_broken_edits_keep_the_last_good_policy():
    s = Server({"AccessKeySecret": "x" * 40, "PolicyFile": "policy/live.txt"})
    live = s.dir / "policy" / "live.txt"
    live.write_text((ROOT / "policy" / "all_policy.txt").read_text())
    s.start()
    try:
        live.write_text('{"Version": "1", "Statement": [ {"Effect": "Perhaps"} ]}')
        deadline = time.time() + 15
        while "config reload refused" not in s.output() and time.time() < deadline:
            time.sleep(0.2)
        assert "config reload refused" in s.output()
        assert "live.txt:1:" in s.output()
        client = s3_client(s)
        client.put_object(Bucket="tollgate", Key="still-allowed", Body=b"x")  # the last good policy stays in force

        live.write_text((ROOT / "policy" / "bucket_read_policy.txt").read_text() + "\n")
        deadline = time.time() + 15
        while "config reloaded" not in s.output() and time.time() < deadline:
            time.sleep(0.2)
        assert "config reloaded" in s.output()
        # Tokens already issued follow the edited policy: the role's policy is read at request time.
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            client.put_object(Bucket="tollgate", Key="now-refused", Body=b"x")
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
        assert client.get_object(Bucket="tollgate", Key="still-allowed")["Body"].read() == b"x"
    finally:
        s.cleanup()
