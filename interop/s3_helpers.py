"""Helpers for the S3 gateway interoperability tests: real clients only (boto3, the AWS CLI).

Nothing here signs a request itself: credentials come from the token endpoint or from
`tollgate token issue`, and boto3/botocore or the AWS CLI do all the signing.
"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET, S3_ROOT_ACCESS_KEY_ID, get_json

ROOT_ACCESS_KEY_ID = S3_ROOT_ACCESS_KEY_ID
REGION = "us-east-1"
MiB = 1024 * 1024




def endpoint_credentials(server) -> dict:
    """Credentials from `GET /` on the token endpoint (the default role)."""
    status, _, body = get_json(server.url + "/")
    assert status == 200, body
    return json.loads(body)


def issued_credentials(server, *args, faketime: str = None) -> dict:
    """Credentials from `tollgate token issue --config … ARGS` (optionally under faketime)."""
    from conftest import binary
    command = [binary(), "token", "issue", "--config", str(server.config_path), *args]
    if faketime:
        command = ["faketime", "-f", faketime, *command]
    result = subprocess.run(command, cwd=server.dir, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def client_config(**extra) -> Config:
    return Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                  connect_timeout=10, read_timeout=120, **extra)


def s3_client(server, credentials: dict = None, *, access_key_id=None, secret=None, token=None, verify=None, **config):
    """A boto3 S3 client on the gateway. `credentials` is the token endpoint's JSON; the
    keyword arguments override single fields (or give root credentials)."""
    if credentials is not None:
        access_key_id = access_key_id or credentials["AccessKeyId"]
        secret = secret or credentials["AccessKeySecret"]
        token = token if token is not None else credentials["SecurityToken"]
    return boto3.client(
        "s3", endpoint_url=server.gateway_url, region_name=REGION,
        aws_access_key_id=access_key_id, aws_secret_access_key=secret,
        aws_session_token=token or None, verify=verify, config=client_config(**config))


def root_client(server):
    return s3_client(server, access_key_id=ROOT_ACCESS_KEY_ID, secret=ROOT_SECRET)


def error_of(excinfo) -> tuple:
    """(Error.Code, HTTP status) of a botocore ClientError."""
    error = excinfo.value
    assert isinstance(error, ClientError), repr(error)
    return error.response["Error"].get("Code"), error.response["ResponseMetadata"]["HTTPStatusCode"]


def sha256_file(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_random_file(path, size: int) -> str:
    """Writes `size` random bytes and returns the file's SHA-256."""
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        remaining = size
        while remaining:
            piece = os.urandom(min(MiB, remaining))
            f.write(piece)
            digest.update(piece)
            remaining -= len(piece)
    return digest.hexdigest()


def object_keys(client, bucket: str, prefix: str = "") -> set:
    keys = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.update(item["Key"] for item in page.get("Contents", []))
    return keys


def leftover_temporary_files(server) -> list:
    """Files in the store's tmp/ directory (the embedded store writes bodies there first)."""
    tmp = Path(server.dir) / "data" / "store" / "tmp"
    return sorted(str(p) for p in tmp.rglob("*") if p.is_file()) if tmp.exists() else []


class AwsCli:
    """The AWS CLI (`aws`) with the given credentials in its environment and nothing from the
    machine's own AWS configuration."""

    def __init__(self, server, credentials: dict):
        self.server = server
        self.dir = Path(tempfile.mkdtemp(prefix="tollgate-awscli-"))
        config_file = self.dir / "config"
        config_file.write_text("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n")
        credentials_file = self.dir / "credentials"
        credentials_file.write_text("")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self.env.update({
            "AWS_ACCESS_KEY_ID": credentials["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": credentials["AccessKeySecret"],
            "AWS_SESSION_TOKEN": credentials["SecurityToken"],
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": str(config_file),
            "AWS_SHARED_CREDENTIALS_FILE": str(credentials_file),
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_MAX_ATTEMPTS": "1",
        })

    def run(self, *args, check=True, timeout=300):
        command = ["aws", "--endpoint-url", self.server.gateway_url, *args]
        result = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        return result

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


__all__ = ["AwsCli", "ClientError", "MiB", "ROOT_ACCESS_KEY_ID", "TransferConfig", "endpoint_credentials",
           "error_of", "issued_credentials", "leftover_temporary_files", "object_keys", "root_client",
           "s3_client", "sha256_file", "write_random_file"]
