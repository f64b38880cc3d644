"""Hot reload of config.json: every key that reloads is changed on a running server and its effect
observed through the API, with a bad edit before it (logged with file and reason, the previous
behaviour kept). Keys that need a restart are reported as such. And the buckets role policies
name exist: the reference flow uploads with no bucket command."""
import json
import os
import re
import signal
import socket
import time
from datetime import datetime, timezone

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import ROOT, ROOT_SECRET, Server, free_port, get_json
from s3_helpers import ROOT_ACCESS_KEY_ID, error_of, issued_credentials, root_client, s3_client

OLD_SECRET = "rotated-out-root-secret-0123456789abcdefghij"


@pytest.fixture
def server():
    s = Server({"AccessKeySecret": ROOT_SECRET, "AccessKeyID": ROOT_ACCESS_KEY_ID}).start()
    yield s
    s.cleanup()


def write_atomically(path, text: str):
    """As editors and configuration tools do: the poll never reads half a file."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def members(s) -> dict:
    return json.loads(s.config_path.read_text())


def log_since(s, mark: int) -> str:
    return s.output()[mark:]


def wait_for_log(s, mark: int, pattern: str, timeout: float = 10) -> str:
    """Waits until a line written after `mark` matches `pattern`; returns that line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log_since(s, mark).splitlines():
            if re.search(pattern, line):
                return line
        time.sleep(0.1)
    raise AssertionError(f"no log line matching {pattern!r} after the edit:\n{log_since(s, mark)}")


def edit(s, change: dict = None, *, raw: str = None, sighup: bool = True, expect: str = "config reloaded") -> str:
    """Writes config.json: the members of the last accepted edit updated by `change` (None
    removes one), or `raw` text. Triggers a reload with SIGHUP (or leaves it to the poll) and
    returns the log line matching `expect`."""
    mark = len(s.output())
    if not hasattr(s, "accepted"):
        s.accepted = members(s)
    accepted = s.accepted
    if raw is None:
        updated = dict(accepted)
        for key, value in (change or {}).items():
            if value is None:
                updated.pop(key, None)
            else:
                updated[key] = value
        raw = json.dumps(updated, indent=2)
    write_atomically(s.config_path, raw)
    if sighup:
        s.process.send_signal(signal.SIGHUP)
    line = wait_for_log(s, mark, expect)
    if expect != "config reload refused":
        s.accepted = json.loads(raw)
    return line


def refused(s, change: dict = None, *, raw: str = None, file: str = None, reason: str, sighup: bool = True) -> str:
    """A bad edit: logged with the file and the reason; the caller then checks the previous
    behaviour holds."""
    line = edit(s, change, raw=raw, sighup=sighup, expect="config reload refused")
    assert f"config.file={file or s.config_path}" in line, line
    assert reason in line, line
    assert "keeping the running configuration" in line
    return line


def token(s) -> dict:
    status, _, body = get_json(s.url + "/")
    assert status == 200, body
    return json.loads(body)


def lifetime(credentials: dict) -> float:
    expiration = datetime.strptime(credentials["Expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    return (expiration - datetime.now(timezone.utc)).total_seconds()


def sts_client(s, access_key_id=ROOT_ACCESS_KEY_ID, secret=ROOT_SECRET):
    return boto3.client("sts", endpoint_url=s.url, region_name="us-east-1", aws_access_key_id=access_key_id,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}))


def assume(s, role: str, **extra) -> dict:
    return sts_client(s).assume_role(RoleArn=f"arn:aws:iam::000000000000:role/{role}", RoleSessionName="reload-test", **extra)


# ---------------------------------------------------------------------------------------------
# Each reloadable key.


def test_token_expire_time_reloads_when_the_file_changes_without_a_signal(server):
    assert 800 < lifetime(token(server)) <= 900
    line = refused(server, {"TokenExpireTime": "99"}, reason="TokenExpireTime must be at least 900 seconds", sighup=False)
    assert 'reload.reason="file changed"' in line
    mark = len(server.output())
    time.sleep(2.5)  # two more polls: the same bad content is not logged again
    assert "config reload refused" not in log_since(server, mark)
    assert 800 < lifetime(token(server)) <= 900, "the running lifetime stays"

    line = edit(server, {"TokenExpireTime": "1800"}, sighup=False)
    assert "config.changed=TokenExpireTime" in line and 'reload.reason="file changed"' in line, line
    assert 1700 < lifetime(token(server)) <= 1800


def test_variables_change_the_bucket_the_policies_name(server):
    writer = s3_client(server, issued_credentials(server, "--role", "readwrite"))
    writer.put_object(Bucket="tollgate", Key="before.txt", Body=b"x")
    refused(server, raw=server.config_path.read_text().rstrip()[:-1], reason="invalid JSON")  # no closing brace
    writer.put_object(Bucket="tollgate", Key="still.txt", Body=b"x")

    mark = len(server.output())
    line = edit(server, {"Variables": {"BUCKET_NAME": "media-bucket"}})
    assert "config.changed=Variables" in line, line
    assert "policies reloaded" not in log_since(server, mark)
    wait_for_log(server, mark, r"bucket created bucket.name=media-bucket")
    # The same token: its role's policy now names the new bucket, and only it.
    writer.put_object(Bucket="media-bucket", Key="after.txt", Body=b"y")
    with pytest.raises(ClientError) as excinfo:
        writer.put_object(Bucket="tollgate", Key="after.txt", Body=b"y")
    assert error_of(excinfo) == ("AccessDenied", 403)


def test_roles_become_issuable_and_removed_roles_are_refused(server):
    with pytest.raises(ClientError) as excinfo:
        assume(server, "extra")
    assert error_of(excinfo) == ("AccessDenied", 403)
    reader = s3_client(server, issued_credentials(server, "--role", "read"))
    reader.list_objects_v2(Bucket="tollgate")

    roles = members(server)["Roles"]
    missing = server.dir / "policy" / "missing.txt"
    refused(server, {"Roles": {**roles, "extra": "policy/missing.txt"}}, file=missing, reason="cannot read the file")
    with pytest.raises(ClientError):
        assume(server, "extra")

    line = edit(server, {"Roles": {**roles, "extra": {"PolicyFile": "policy/bucket_read_policy.txt", "MaxSessionSeconds": 1200}}})
    assert "config.changed=Roles" in line and "policy.roles=default,extra,isolated,read,readwrite" in line, line
    credentials = assume(server, "extra")["Credentials"]
    extra = s3_client(server, access_key_id=credentials["AccessKeyId"], secret=credentials["SecretAccessKey"],
                      token=credentials["SessionToken"])
    extra.list_objects_v2(Bucket="tollgate")
    with pytest.raises(ClientError) as excinfo:  # MaxSessionSeconds reloads with the role
        assume(server, "extra", DurationSeconds=3600)
    assert error_of(excinfo) == ("ValidationError", 400)

    del roles["read"]
    edit(server, {"Roles": {**roles, "extra": "policy/bucket_read_policy.txt"}})
    with pytest.raises(ClientError) as excinfo:
        assume(server, "read")
    assert error_of(excinfo) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as excinfo:  # a token of the removed role is refused too
        reader.list_objects_v2(Bucket="tollgate")
    assert error_of(excinfo) == ("AccessDenied", 403)
    assume(server, "extra", DurationSeconds=3600)  # its MaxSessionSeconds went with the object form


def old_token(s, secret: str) -> dict:
    """Credentials signed with another root secret, as a server that ran with it issued them."""
    old = s.dir / "old-config.json"
    old.write_text(json.dumps({**members(s), "AccessKeySecret": secret, "PreviousAccessKeySecrets": [], "DevelopmentMode": True}))
    result = s.cli("token", "issue", "--config", str(old), "--role", "readwrite")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_previous_secrets_and_development_mode(server):
    client = s3_client(server, old_token(server, OLD_SECRET))
    with pytest.raises(ClientError) as excinfo:
        client.put_object(Bucket="tollgate", Key="old.txt", Body=b"x")
    assert error_of(excinfo) == ("InvalidToken", 400)
    refused(server, {"PreviousAccessKeySecrets": [OLD_SECRET, "short"]}, reason="PreviousAccessKeySecrets[1] must be at least 32 bytes")
    with pytest.raises(ClientError):
        client.put_object(Bucket="tollgate", Key="old.txt", Body=b"x")

    line = edit(server, {"PreviousAccessKeySecrets": [OLD_SECRET]})
    assert "config.changed=PreviousAccessKeySecrets" in line
    client.put_object(Bucket="tollgate", Key="old.txt", Body=b"x")
    refused(server, {"Port": "not a port"}, reason="Port must be a whole number")
    client.put_object(Bucket="tollgate", Key="old-still.txt", Body=b"x")

    # DevelopmentMode decides whether a short secret is acceptable, on reload as at start-up.
    short = "short-dev-secret"
    edit(server, {"PreviousAccessKeySecrets": [short], "DevelopmentMode": True})
    s3_client(server, old_token(server, short)).put_object(Bucket="tollgate", Key="dev.txt", Body=b"x")
    with pytest.raises(ClientError) as excinfo:
        client.put_object(Bucket="tollgate", Key="old-gone.txt", Body=b"x")
    assert error_of(excinfo) == ("InvalidToken", 400)
    refused(server, {"DevelopmentMode": None}, reason="PreviousAccessKeySecrets[0] must be at least 32 bytes")


def test_buckets_appear_and_sighup_recreates_a_missing_one(server):
    root = root_client(server)
    with pytest.raises(ClientError) as excinfo:
        root.head_bucket(Bucket="extra-bucket")
    assert error_of(excinfo)[1] == 404
    refused(server, {"Buckets": ["tollgate", "Extra_Bucket"]}, reason="is not a valid bucket name")

    mark = len(server.output())
    line = edit(server, {"Buckets": ["tollgate", "extra-bucket"]})
    assert "config.changed=Buckets" in line
    # The bucket is created after the reload line is written: wait for its own line.
    assert "bucket.named_by=Buckets" in wait_for_log(server, mark, "bucket created bucket.name=extra-bucket")
    root.head_bucket(Bucket="extra-bucket")

    # SIGHUP with nothing changed still creates what is missing.
    root.delete_bucket(Bucket="extra-bucket")
    mark = len(server.output())
    server.process.send_signal(signal.SIGHUP)
    assert "reload.reason=SIGHUP" in wait_for_log(server, mark, "config reloaded, nothing changed")
    wait_for_log(server, mark, "bucket created bucket.name=extra-bucket")
    root.head_bucket(Bucket="extra-bucket")


def statuses(s, count: int) -> list:
    return [get_json(s.url + "/")[0] for _ in range(count)]


def test_rate_limits_set_the_429_threshold(server):
    assert statuses(server, 6) == [200] * 6
    refused(server, {"RateLimits": {"PerMinute": 3}}, reason="RateLimits: unknown key")
    assert statuses(server, 6) == [200] * 6

    edit(server, {"RateLimits": {"PerAddressPerMinute": 3}})
    assert statuses(server, 4) == [200, 200, 200, 429]
    edit(server, {"RateLimits": None})
    assert statuses(server, 6) == [200] * 6


def test_authentication_added_refuses_anonymous_callers(server):
    assert get_json(server.url + "/")[0] == 200
    refused(server, {"Authentication": {}}, reason="list at least one provider")
    assert get_json(server.url + "/")[0] == 200

    line = edit(server, {"Authentication": {"Webhook": {"URL": "http://127.0.0.1:9/verify"}}})
    assert "config.changed=Authentication" in line
    status, _, body = get_json(server.url + "/")
    assert status == 401 and json.loads(body)["ErrorCode"] == "MissingAuthenticationToken", body
    edit(server, {"Authentication": {"AllowAnonymous": True, "Webhook": {"URL": "http://127.0.0.1:9/verify"}}})
    assert get_json(server.url + "/")[0] == 200


def test_multipart_limits_reload(server):
    client = s3_client(server, token(server))
    uploads = [client.create_multipart_upload(Bucket="tollgate", Key=f"big-{n}")["UploadId"] for n in range(2)]
    refused(server, {"MaxMultipartUploadsPerBucket": 0}, reason="MaxMultipartUploadsPerBucket must be at least 1")
    client.create_multipart_upload(Bucket="tollgate", Key="big-2")

    edit(server, {"MaxMultipartUploadsPerBucket": 3})
    with pytest.raises(ClientError) as excinfo:
        client.create_multipart_upload(Bucket="tollgate", Key="big-3")
    assert error_of(excinfo) == ("TooManyUploads", 400)
    assert len(uploads) == 2

    refused(server, {"MultipartUploadExpirySeconds": -5}, reason="MultipartUploadExpirySeconds must be at least 1")
    assert len(client.list_multipart_uploads(Bucket="tollgate").get("Uploads", [])) == 3
    mark = len(server.output())
    edit(server, {"MultipartUploadExpirySeconds": 1})
    wait_for_log(server, mark, r"expired multipart uploads aborted upload.count=3", timeout=15)
    assert client.list_multipart_uploads(Bucket="tollgate").get("Uploads", []) == []


def virtual_host_get(s, credentials: dict, bucket: str, key: str) -> requests.Response:
    """GET bucket.s3.test/key, presigned by boto3 for virtual-host addressing and sent to the
    gateway's loopback address with that Host."""
    host = f"s3.test:{s.gateway_port}"
    presigner = boto3.client("s3", endpoint_url=f"http://{host}", region_name="us-east-1",
                             aws_access_key_id=credentials["AccessKeyId"], aws_secret_access_key=credentials["AccessKeySecret"],
                             aws_session_token=credentials["SecurityToken"],
                             config=Config(signature_version="s3v4", s3={"addressing_style": "virtual"}))
    url = presigner.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=300)
    assert url.startswith(f"http://{bucket}.{host}/{key}?"), url
    return requests.get(url.replace(f"{bucket}.{host}", f"127.0.0.1:{s.gateway_port}", 1),
                        headers={"Host": f"{bucket}.{host}"}, timeout=10)


def test_gateway_base_domain_turns_on_virtual_hosts(server):
    credentials = token(server)
    s3_client(server, credentials).put_object(Bucket="tollgate", Key="hello.txt", Body=b"virtual")
    assert virtual_host_get(server, credentials, "tollgate", "hello.txt").status_code != 200
    refused(server, {"GatewayBaseDomain": 5}, reason="GatewayBaseDomain must be a string")

    edit(server, {"GatewayBaseDomain": "s3.test"})
    answer = virtual_host_get(server, credentials, "tollgate", "hello.txt")
    assert answer.status_code == 200 and answer.content == b"virtual", answer.text


def test_policy_file_edits_reload_and_say_so(server):
    writer = s3_client(server, issued_credentials(server, "--role", "readwrite"))
    policy = server.dir / "policy" / "bucket_read_write_policy.txt"
    mark = len(server.output())
    write_atomically(policy, '{"Version": "1", "Statement": [ {"Effect": "Perhaps"} ]}')
    line = wait_for_log(server, mark, "config reload refused")
    assert f"config.file={policy}" in line and "bucket_read_write_policy.txt:1:" in line, line
    writer.put_object(Bucket="tollgate", Key="kept.txt", Body=b"x")

    mark = len(server.output())
    write_atomically(policy, (ROOT / "policy" / "bucket_read_policy.txt").read_text())
    line = wait_for_log(server, mark, "config reloaded")
    assert f"config.policy_files={policy}" in line and "config.changed=-" in line, line
    with pytest.raises(ClientError) as excinfo:
        writer.put_object(Bucket="tollgate", Key="refused.txt", Body=b"x")
    assert error_of(excinfo) == ("AccessDenied", 403)


# ---------------------------------------------------------------------------------------------
# Keys that need a restart.


def test_restart_only_keys_are_reported_and_the_rest_applies(server):
    port, gateway_port = server.port, server.gateway_port
    mark = len(server.output())
    edit(server, {"Port": free_port(), "GatewayPort": free_port(), "IdleTimeoutSeconds": 5, "TokenExpireTime": 1800},
         expect="takes effect after a restart")
    line = wait_for_log(server, mark, "changed in config.json; takes effect after a restart")
    assert "config.keys=GatewayPort,IdleTimeoutSeconds,Port" in line, line
    assert "config.changed=TokenExpireTime" in wait_for_log(server, mark, "config reloaded")
    # Still on the ports it started on; everything else works, with the new lifetime.
    assert (server.port, server.gateway_port) == (port, gateway_port)
    credentials = token(server)
    assert 1700 < lifetime(credentials) <= 1800
    client = s3_client(server, credentials)
    client.put_object(Bucket="tollgate", Key="still-serving.txt", Body=b"ok")
    assert client.get_object(Bucket="tollgate", Key="still-serving.txt")["Body"].read() == b"ok"
    # A connection idle for longer than the new IdleTimeoutSeconds is still open: 60 s holds.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        time.sleep(6)
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert connection.recv(64).startswith(b"HTTP/1.1 200"), "closed by the new idle timeout"


# ---------------------------------------------------------------------------------------------
# Buckets the policies name (the reference flow).


def reference_server(**extra) -> Server:
    """The repository's config.json as it is, with only the listeners moved to free loopback
    ports, and bucket_read_write_policy.txt edited to name the operator's bucket."""
    s = Server({})
    reference = json.loads((ROOT / "config.json").read_text())
    assert reference["Variables"] == {"BUCKET_NAME": "tollgate"}
    reference.update({"ListenAddress": "127.0.0.1", "Port": s.port, "GatewayAddress": "127.0.0.1", "GatewayPort": s.gateway_port}, **extra)
    s.config_path.write_text(json.dumps(reference, indent=2))
    policy = s.dir / "policy" / "bucket_read_write_policy.txt"
    policy.write_text(policy.read_text().replace("$BUCKET_NAME", "my-app-bucket"))
    return s


def upload_as_app(s) -> dict:
    """An app's first upload: credentials vended for the readwrite role, then boto3."""
    credentials = issued_credentials(s, "--role", "readwrite")
    s3_client(s, credentials).put_object(Bucket="my-app-bucket", Key="first/upload.txt", Body=b"hello")
    return credentials


def test_reference_flow_the_bucket_a_policy_names_exists():
    s = reference_server().start()
    try:
        assert "bucket created bucket.name=my-app-bucket" in s.output(), s.output()
        credentials = upload_as_app(s)
        assert s3_client(s, credentials).get_object(Bucket="my-app-bucket", Key="first/upload.txt")["Body"].read() == b"hello"
    finally:
        s.cleanup()


def test_create_policy_buckets_false_leaves_it_absent_until_switched_on():
    s = reference_server(CreatePolicyBuckets=False).start()
    try:
        assert "bucket.name=my-app-bucket" not in s.output()
        with pytest.raises(ClientError) as excinfo:
            upload_as_app(s)
        assert error_of(excinfo) == ("NoSuchBucket", 404)

        mark = len(s.output())
        edit(s, {"CreatePolicyBuckets": None})
        line = wait_for_log(s, mark, "bucket created bucket.name=my-app-bucket")
        assert "bucket_read_write_policy.txt" in line, line
        upload_as_app(s)
    finally:
        s.cleanup()
