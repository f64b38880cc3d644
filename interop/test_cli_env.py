"""What the Docker image relies on, through the real binary: TOLLGATE_CONFIG for every command,
the root secret from a file (Docker secrets), and `tollgate healthcheck` on the configured port."""
import json
import os
import subprocess

import boto3
import pytest
from botocore.config import Config

from conftest import ROOT, ROOT_SECRET, Server, binary, free_port, get_json


def run(*args, env=None, cwd="/", timeout=60):
    """The binary with a clean environment plus `env`, from a directory without a config.json."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
    return subprocess.run([binary(), *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def server():
    s = Server({"AccessKeySecret": ROOT_SECRET}).start()
    yield s
    s.cleanup()


def test_every_command_reads_tollgate_config(server, tmp_path):
    env = {"TOLLGATE_CONFIG": str(server.config_path)}
    issued = run("token", "issue", "--user", "alice", env=env)
    assert issued.returncode == 0, issued.stderr
    token = json.loads(issued.stdout)["SecurityToken"]

    inspected = run("token", "inspect", token, env=env)
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["Subject"] == "alice"

    revoked = run("token", "revoke", "--subject", "mallory", env=env)
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout)["File"] == str(server.dir / "data" / "revocations.json")

    # policy check/simulate fill $BUCKET_NAME from the config's Variables.
    policy = tmp_path / "p.txt"
    policy.write_text('{"Version": "1", "Statement": [{"Effect": "Allow", "Action": ["oss:GetObject"],'
                      ' "Resource": ["acs:oss:*:*:$BUCKET_NAME/*"]}]}')
    assert run("policy", "check", str(policy)).returncode == 1, "without the config the placeholder is unfilled"
    checked = run("policy", "check", str(policy), env=env)
    assert checked.returncode == 0, checked.stderr
    simulated = run("policy", "simulate", "--policy", str(policy), "--action", "oss:GetObject",
                    "--resource", f"acs:oss:*:*:{server.bucket}/a.txt", env=env)
    assert simulated.returncode == 0, simulated.stdout + simulated.stderr

    healthy = run("healthcheck", env=env)
    assert healthy.returncode == 0, healthy.stderr


def test_the_flag_wins_over_tollgate_config(server):
    result = run("token", "issue", "--config", str(server.config_path), env={"TOLLGATE_CONFIG": "/nonexistent/config.json"})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", [["token", "issue"], ["serve"], ["healthcheck"], ["policy", "check", "x.txt"]])
def test_a_missing_tollgate_config_names_the_path(command):
    result = run(*command, env={"TOLLGATE_CONFIG": "/nonexistent/tollgate/config.json"})
    assert result.returncode != 0
    assert "/nonexistent/tollgate/config.json: cannot read the file" in result.stderr


def test_healthcheck_follows_the_configured_port(server, tmp_path):
    assert run("healthcheck", "--config", str(server.config_path)).returncode == 0
    # The same config with a port nothing listens on: unhealthy, exit 1, naming the URL.
    port = free_port()
    config = json.loads(server.config_path.read_text())
    stale = server.dir / "stale-config.json"
    stale.write_text(json.dumps({**config, "Port": port}))
    result = run("healthcheck", "--config", str(stale), "--timeout", "2")
    assert result.returncode == 1
    assert f"http://127.0.0.1:{port}/healthz" in result.stderr


def test_root_secret_from_a_file(tmp_path, monkeypatch):
    secret_file = tmp_path / "root_secret"
    secret_file.write_text(ROOT_SECRET + "\n")
    monkeypatch.delenv("TOLLGATE_ACCESS_KEY_SECRET", raising=False)
    monkeypatch.setenv("TOLLGATE_ACCESS_KEY_SECRET_FILE", str(secret_file))
    s = Server({}).start()
    try:
        assert "generated root credentials" not in s.output(), "the file's secret is used, none generated"
        # A token signed with the secret itself verifies against the server's secret from the file.
        issued = run("token", "issue", "--config", str(s.config_path), env={"TOLLGATE_ACCESS_KEY_SECRET": ROOT_SECRET})
        token = json.loads(issued.stdout)
        status, _, body = get_json(f"{s.url}/healthz")
        assert status == 200, body
        inspected = run("token", "inspect", token["SecurityToken"], "--config", str(s.config_path),
                        env={"TOLLGATE_ACCESS_KEY_SECRET_FILE": str(secret_file)})
        assert inspected.returncode == 0, inspected.stderr
        # And the gateway accepts it: the server signs with the file's secret.
        s3 = boto3.client("s3", endpoint_url=s.gateway_url, region_name="us-east-1",
                          aws_access_key_id=token["AccessKeyId"], aws_secret_access_key=token["AccessKeySecret"],
                          aws_session_token=token["SecurityToken"],
                          config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
        s3.put_object(Bucket=s.bucket, Key="from-file.txt", Body=b"x")
    finally:
        s.cleanup()


@pytest.mark.parametrize("setup, message", [
    ("missing", "{file}: TOLLGATE_ACCESS_KEY_SECRET_FILE: cannot read the file"),
    ("weak", "TOLLGATE_ACCESS_KEY_SECRET_FILE ({file}) must be at least 32 bytes"),
    ("both", "set TOLLGATE_ACCESS_KEY_SECRET or TOLLGATE_ACCESS_KEY_SECRET_FILE, not both"),
])
def test_a_bad_secret_file_is_a_config_error(tmp_path, setup, message):
    secret_file = tmp_path / "root_secret"
    env = {"TOLLGATE_CONFIG": str(ROOT / "config.json"), "TOLLGATE_ACCESS_KEY_SECRET_FILE": str(secret_file),
           "TOLLGATE_DATA_DIR": str(tmp_path / "data")}
    if setup == "weak":
        secret_file.write_text("short\n")
    if setup == "both":
        secret_file.write_text(ROOT_SECRET)
        env["TOLLGATE_ACCESS_KEY_SECRET"] = ROOT_SECRET
    result = run("token", "issue", env=env)
    assert result.returncode == 2
    assert message.format(file=secret_file) in result.stderr
    assert not (tmp_path / "data").exists(), "nothing generated on a config error"
