"""`tollgate bucket list | create | delete` against a running server, seen by a real S3 client."""
import json
import re

import pytest
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET, Server
from s3_helpers import endpoint_credentials, s3_client


@pytest.fixture(scope="module")
def tg():
    s = Server({"AccessKeySecret": ROOT_SECRET, "Buckets": ["tollgate"]}).start()
    yield s
    s.cleanup()


def bucket(tg, *args):
    return tg.cli("bucket", *args, "--config", str(tg.config_path))


def test_create_list_delete_seen_by_a_gateway_client_at_once(tg):
    client = s3_client(tg, endpoint_credentials(tg))
    created = bucket(tg, "create", "photos-cli")
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "created bucket photos-cli"
    # A client of the running gateway sees it at once, and can use it.
    assert "photos-cli" in [b["Name"] for b in client.list_buckets()["Buckets"]]
    client.put_object(Bucket="photos-cli", Key="a.txt", Body=b"x")

    listed = bucket(tg, "list")
    assert listed.returncode == 0, listed.stderr
    line = [l for l in listed.stdout.splitlines() if l.startswith("photos-cli ")][0]
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", line), line
    as_json = json.loads(bucket(tg, "list", "--json").stdout)
    assert {"tollgate", "photos-cli"} <= {b["Name"] for b in as_json}
    assert all(b["CreationDate"] for b in as_json)

    # Not empty: one clear line, exit 1, and the bucket and its object stay.
    refused = bucket(tg, "delete", "photos-cli")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == ['tollgate: bucket "photos-cli" is not empty: delete its objects first']
    assert client.get_object(Bucket="photos-cli", Key="a.txt")["Body"].read() == b"x"

    client.delete_object(Bucket="photos-cli", Key="a.txt")
    deleted = bucket(tg, "delete", "photos-cli")
    assert deleted.returncode == 0, deleted.stderr
    assert "photos-cli" not in [b["Name"] for b in client.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as excinfo:
        client.put_object(Bucket="photos-cli", Key="a.txt", Body=b"x")
    assert excinfo.value.response["Error"]["Code"] == "NoSuchBucket"


@pytest.mark.parametrize("args,code,message", [
    (["create", "Bad_Name"], 2, 'tollgate: invalid bucket name "Bad_Name"'),
    (["create", "ab"], 2, 'tollgate: invalid bucket name "ab"'),
    (["delete", "no-such-bucket"], 1, 'tollgate: bucket "no-such-bucket" does not exist'),
    (["create", "tollgate"], 1, 'tollgate: bucket "tollgate" already exists'),
])
def test_refusals_are_one_line(tg, args, code, message):
    result = bucket(tg, *args)
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr


def test_no_running_gateway_is_reported(tg):
    # The same config with a gateway port nothing listens on.
    s = Server({"AccessKeySecret": ROOT_SECRET})
    try:
        result = s.cli("bucket", "list", "--config", str(s.config_path))
        assert result.returncode == 1
        assert "no gateway answers at http://127.0.0.1:" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    finally:
        s.cleanup()
