"""The S3 gateway end to end (issue 4, "Acceptance — interoperability with real clients").

The real binary, credentials from the real token endpoint (or `tollgate token issue`), and
only real clients: boto3/botocore, plain HTTP for presigned URLs, and the AWS CLI. Nothing in
this file computes a signature.
"""
import email.utils
import gzip
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import unquote_plus

import boto3
import botocore.auth
import botocore.awsrequest
from botocore.config import Config
import pytest
import requests

from conftest import ROOT_SECRET, Server
from s3_helpers import (ROOT_ACCESS_KEY_ID, AwsCli, ClientError, MiB, TransferConfig, endpoint_credentials,
                        error_of, issued_credentials, leftover_temporary_files, object_keys, root_client,
                        s3_client, sha256_file, write_random_file)

# Runs on the local store and again on the S3 backend over RGW (conftest.BACKENDS).
ON_RGW_TOO = True

BUCKET = "tollgate"
OUTSIDE = "outside-policy"


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def quoted(etag: str) -> str:
    return f'"{etag}"'


# ---------------------------------------------------------------------------------------------
# Fixtures: one server for the module, root credentials known ("AccessKeyID" set explicitly).


@pytest.fixture(scope="module")
def creds(gw):
    """The token endpoint's JSON: `GET /` (default role, all_policy.txt)."""
    return endpoint_credentials(gw)


@pytest.fixture(scope="module")
def s3(gw, creds):
    return s3_client(gw, creds)


@pytest.fixture(scope="module")
def root(gw):
    return root_client(gw)


@pytest.fixture(scope="module")
def outside_bucket(root):
    root.create_bucket(Bucket=OUTSIDE)
    root.put_object(Bucket=OUTSIDE, Key="present.txt", Body=b"root wrote this")
    return OUTSIDE


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


def assert_absent(root, key, bucket=BUCKET):
    with pytest.raises(ClientError) as excinfo:
        root.head_object(Bucket=bucket, Key=key)
    assert error_of(excinfo) == ("404", 404), f"{bucket}/{key} was stored"


def assert_no_temporary_files(server):
    assert leftover_temporary_files(server) == []


def xml_error(body: bytes) -> dict:
    root = ET.fromstring(body)
    assert root.tag == "Error", body
    return {child.tag: child.text for child in root}


# ---------------------------------------------------------------------------------------------
# The flow: token endpoint → boto3 → object operations.


def test_credentials_come_from_the_token_endpoint(creds):
    assert creds["StatusCode"] == 200
    assert creds["AccessKeyId"].startswith("STS.") and creds["SecurityToken"].startswith("TG1.")


def test_list_buckets_head_bucket_location(s3):
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert BUCKET in names
    assert s3.head_bucket(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"] == 200
    location = s3.get_bucket_location(Bucket=BUCKET)
    assert location.get("LocationConstraint") in (None, "", "us-east-1")


def test_put_get_head_delete(s3):
    key = "flow/hello.txt"
    body = b"hello, tollgate\n" * 100
    before = datetime.now(timezone.utc)
    put = s3.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType="text/plain")
    assert put["ETag"] == quoted(md5(body))

    got = s3.get_object(Bucket=BUCKET, Key=key)
    assert got["Body"].read() == body
    assert got["ETag"] == put["ETag"]
    assert got["ContentLength"] == len(body)
    assert got["ContentType"] == "text/plain"
    assert before - timedelta(seconds=2) <= got["LastModified"] <= datetime.now(timezone.utc) + timedelta(seconds=2)
    assert got["ResponseMetadata"]["HTTPHeaders"].get("x-amz-request-id")

    head = s3.head_object(Bucket=BUCKET, Key=key)
    assert (head["ContentLength"], head["ETag"], head["ContentType"]) == (len(body), put["ETag"], "text/plain")
    assert head["LastModified"] == got["LastModified"]

    # Overwrite, then delete (DELETE answers 204, also for a key that is already gone).
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"version two")
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"version two"
    assert s3.delete_object(Bucket=BUCKET, Key=key)["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as excinfo:
        s3.get_object(Bucket=BUCKET, Key=key)
    assert error_of(excinfo) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as excinfo:
        s3.head_object(Bucket=BUCKET, Key=key)
    assert error_of(excinfo) == ("404", 404)
    assert s3.delete_object(Bucket=BUCKET, Key=key)["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_empty_object(s3):
    s3.put_object(Bucket=BUCKET, Key="flow/empty", Body=b"")
    got = s3.get_object(Bucket=BUCKET, Key="flow/empty")
    assert got["Body"].read() == b"" and got["ContentLength"] == 0
    assert got["ETag"] == quoted(md5(b""))


LIST_KEYS = ["list/a.txt", "list/b/1.txt", "list/b/2.txt", "list/c/d/3.txt", "list/e.txt", "listing-elsewhere/x"]


@pytest.fixture(scope="module")
def listed(s3):
    for key in LIST_KEYS:
        s3.put_object(Bucket=BUCKET, Key=key, Body=key.encode())
    return LIST_KEYS


def test_list_v1_with_delimiter(s3, listed):
    page = s3.list_objects(Bucket=BUCKET, Prefix="list/", Delimiter="/")
    assert [o["Key"] for o in page["Contents"]] == ["list/a.txt", "list/e.txt"]
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == ["list/b/", "list/c/"]
    assert page["Prefix"] == "list/" and page["Delimiter"] == "/" and page["IsTruncated"] is False
    first = page["Contents"][0]
    assert first["Size"] == len(b"list/a.txt") and first["ETag"] == quoted(md5(b"list/a.txt"))


def test_list_v2_with_delimiter(s3, listed):
    page = s3.list_objects_v2(Bucket=BUCKET, Prefix="list/", Delimiter="/")
    assert [o["Key"] for o in page["Contents"]] == ["list/a.txt", "list/e.txt"]
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == ["list/b/", "list/c/"]
    assert page["KeyCount"] == 4 and page["IsTruncated"] is False
    nested = s3.list_objects_v2(Bucket=BUCKET, Prefix="list/c/", Delimiter="/")
    assert "Contents" not in nested and [p["Prefix"] for p in nested["CommonPrefixes"]] == ["list/c/d/"]
    everything = s3.list_objects_v2(Bucket=BUCKET, Prefix="list/")
    assert [o["Key"] for o in everything["Contents"]] == LIST_KEYS[:5]


def test_list_pagination(s3, listed):
    # v2: max-keys and continuation tokens.
    page = s3.list_objects_v2(Bucket=BUCKET, Prefix="list/", MaxKeys=2)
    assert [o["Key"] for o in page["Contents"]] == LIST_KEYS[:2]
    assert page["IsTruncated"] is True and page["MaxKeys"] == 2
    keys = []
    for p in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="list/", PaginationConfig={"PageSize": 2}):
        keys += [o["Key"] for o in p.get("Contents", [])]
    assert keys == LIST_KEYS[:5]
    # v2: start-after.
    after = s3.list_objects_v2(Bucket=BUCKET, Prefix="list/", StartAfter="list/b/2.txt")
    assert [o["Key"] for o in after["Contents"]] == ["list/c/d/3.txt", "list/e.txt"]
    # v1: marker.
    v1 = s3.list_objects(Bucket=BUCKET, Prefix="list/", MaxKeys=2)
    assert [o["Key"] for o in v1["Contents"]] == LIST_KEYS[:2] and v1["IsTruncated"] is True
    v1b = s3.list_objects(Bucket=BUCKET, Prefix="list/", Marker="list/b/1.txt")
    assert [o["Key"] for o in v1b["Contents"]] == LIST_KEYS[2:5]
    # Paging with a delimiter: contents and common prefixes each appear exactly once.
    seen_keys, seen_prefixes = [], []
    for paginator in ("list_objects", "list_objects_v2"):
        seen_keys, seen_prefixes = [], []
        for p in s3.get_paginator(paginator).paginate(Bucket=BUCKET, Prefix="list/", Delimiter="/",
                                                      PaginationConfig={"PageSize": 1}):
            seen_keys += [o["Key"] for o in p.get("Contents", [])]
            seen_prefixes += [c["Prefix"] for c in p.get("CommonPrefixes", [])]
        assert (seen_keys, seen_prefixes) == (["list/a.txt", "list/e.txt"], ["list/b/", "list/c/"]), paginator


def test_copy_metadata_directive(s3):
    source = "copy/source.txt"
    body = b"copy me"
    s3.put_object(Bucket=BUCKET, Key=source, Body=body, ContentType="text/plain", CacheControl="max-age=60",
                  Metadata={"color": "blue"})
    copied = s3.copy_object(Bucket=BUCKET, Key="copy/same.txt", CopySource={"Bucket": BUCKET, "Key": source})
    assert copied["CopyObjectResult"]["ETag"] == quoted(md5(body))
    head = s3.head_object(Bucket=BUCKET, Key="copy/same.txt")
    assert head["Metadata"] == {"color": "blue"}
    assert head["ContentType"] == "text/plain" and head["CacheControl"] == "max-age=60"
    assert s3.get_object(Bucket=BUCKET, Key="copy/same.txt")["Body"].read() == body

    explicit = s3.copy_object(Bucket=BUCKET, Key="copy/explicit-copy.txt", CopySource=f"{BUCKET}/{source}",
                              MetadataDirective="COPY")
    assert explicit["CopyObjectResult"]["ETag"] == quoted(md5(body))
    assert s3.head_object(Bucket=BUCKET, Key="copy/explicit-copy.txt")["Metadata"] == {"color": "blue"}

    s3.copy_object(Bucket=BUCKET, Key="copy/replaced.txt", CopySource={"Bucket": BUCKET, "Key": source},
                   MetadataDirective="REPLACE", ContentType="application/json", Metadata={"shape": "round"})
    head = s3.head_object(Bucket=BUCKET, Key="copy/replaced.txt")
    assert head["Metadata"] == {"shape": "round"}
    assert head["ContentType"] == "application/json"
    assert "CacheControl" not in head
    assert s3.get_object(Bucket=BUCKET, Key="copy/replaced.txt")["Body"].read() == body

    # A key that needs encoding in x-amz-copy-source.
    odd = "copy/späce + 100%.txt"
    s3.put_object(Bucket=BUCKET, Key=odd, Body=b"odd")
    s3.copy_object(Bucket=BUCKET, Key="copy/odd-copy", CopySource={"Bucket": BUCKET, "Key": odd})
    assert s3.get_object(Bucket=BUCKET, Key="copy/odd-copy")["Body"].read() == b"odd"

    with pytest.raises(ClientError) as excinfo:
        s3.copy_object(Bucket=BUCKET, Key="copy/never", CopySource={"Bucket": BUCKET, "Key": "copy/missing"})
    assert error_of(excinfo) == ("NoSuchKey", 404)


def test_delete_objects(s3):
    keys = [f"batch/{i}" for i in range(6)]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=key.encode())
    result = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys[:3] + ["batch/missing"]]})
    assert sorted(d["Key"] for d in result["Deleted"]) == sorted(keys[:3] + ["batch/missing"])
    assert not result.get("Errors")
    assert object_keys(s3, BUCKET, "batch/") == set(keys[3:])
    quiet = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys[3:]], "Quiet": True})
    assert not quiet.get("Deleted") and not quiet.get("Errors")
    assert object_keys(s3, BUCKET, "batch/") == set()


def test_metadata_round_trip(s3):
    key = "meta/report.txt.gz"
    body = gzip.compress(b"metadata round trip\n" * 50, mtime=0)
    expires = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    metadata = {"author": "Ann Example", "n": "1", "mixed-case-value": "Value With CAPS and spaces"}
    s3.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType="text/plain; charset=utf-8",
                  ContentEncoding="gzip", ContentDisposition='attachment; filename="report 2026.txt"',
                  CacheControl="public, max-age=31536000, immutable", Expires=expires, Metadata=metadata)
    for response in (s3.get_object(Bucket=BUCKET, Key=key), s3.head_object(Bucket=BUCKET, Key=key)):
        assert response["ContentType"] == "text/plain; charset=utf-8"
        assert response["ContentEncoding"] == "gzip"
        assert response["ContentDisposition"] == 'attachment; filename="report 2026.txt"'
        assert response["CacheControl"] == "public, max-age=31536000, immutable"
        assert response["ResponseMetadata"]["HTTPHeaders"]["expires"] == "Wed, 02 Jan 2030 03:04:05 GMT"
        assert response["Metadata"] == metadata
        assert response["ContentLength"] == len(body)
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == body


def test_multipart_upload_file_50mib(s3, tmp):
    source, target = tmp / "big.bin", tmp / "big.out"
    digest = write_random_file(source, 50 * MiB)
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=4)
    s3.upload_file(str(source), BUCKET, "multipart/big.bin", Config=config)
    head = s3.head_object(Bucket=BUCKET, Key="multipart/big.bin")
    assert head["ContentLength"] == 50 * MiB
    part_md5s = b""
    with open(source, "rb") as f:
        for chunk in iter(lambda: f.read(5 * MiB), b""):
            part_md5s += hashlib.md5(chunk).digest()
    assert head["ETag"] == quoted(f"{md5(part_md5s)}-10")
    s3.download_file(BUCKET, "multipart/big.bin", str(target), Config=config)
    assert sha256_file(target) == digest
    # And in one streamed GET.
    streamed = hashlib.sha256()
    for chunk in s3.get_object(Bucket=BUCKET, Key="multipart/big.bin")["Body"].iter_chunks(MiB):
        streamed.update(chunk)
    assert streamed.hexdigest() == digest
    assert not s3.list_multipart_uploads(Bucket=BUCKET, Prefix="multipart/").get("Uploads")


@pytest.fixture(scope="module")
def presigner(gw, creds):
    """botocore presigns with SigV2 (query `Signature=`) unless told otherwise for us-east-1
    (interop/test_sigv2.py covers that); these tests ask for SigV4 the documented way."""
    return s3_client(gw, creds, signature_version="s3v4")


def test_presigned_get_and_put(s3, presigner):
    s3.put_object(Bucket=BUCKET, Key="presign/get me.txt", Body=b"presigned body")
    url = presigner.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "presign/get me.txt"}, ExpiresIn=300)
    assert "X-Amz-Signature=" in url and "X-Amz-Security-Token=" in url and "Authorization" not in url
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200 and response.read() == b"presigned body"

    put_url = presigner.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "presign/put.bin"}, ExpiresIn=300)
    payload = os.urandom(256 * 1024)
    response = requests.put(put_url, data=payload, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["ETag"] == quoted(md5(payload))
    assert s3.get_object(Bucket=BUCKET, Key="presign/put.bin")["Body"].read() == payload

    # Changing the signed URL (another key) breaks the signature.
    tampered = url.replace("get%20me.txt", "put.bin")
    assert tampered != url
    response = requests.get(tampered, timeout=30)
    assert response.status_code == 403 and xml_error(response.content)["Code"] == "SignatureDoesNotMatch"


def test_presigned_url_expires(s3, presigner):
    s3.put_object(Bucket=BUCKET, Key="presign/short", Body=b"short-lived")
    url = presigner.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "presign/short"}, ExpiresIn=1)
    time.sleep(2.1)
    response = requests.get(url, timeout=30)
    assert response.status_code == 403
    error = xml_error(response.content)
    assert error["Code"] == "AccessDenied" and error["Message"] == "Request has expired"
    # X-Amz-Expires is at most seven days.
    too_long = presigner.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "presign/short"},
                                                ExpiresIn=604801)
    response = requests.get(too_long, timeout=30)
    assert response.status_code == 400
    assert xml_error(response.content)["Code"] == "AuthorizationQueryParametersError"
    week = presigner.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "presign/short"},
                                            ExpiresIn=604800)
    assert requests.get(week, timeout=30).content == b"short-lived"


def test_error_document_shape(presigner):
    url = presigner.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "errors/missing key"}, ExpiresIn=300)
    response = requests.get(url, timeout=30)
    assert response.status_code == 404
    assert response.headers["Content-Type"].startswith("application/xml")
    error = xml_error(response.content)
    assert error["Code"] == "NoSuchKey" and error["Message"]
    assert error["Resource"] == f"/{BUCKET}/errors/missing key"
    assert error["RequestId"] and response.headers["x-amz-request-id"] == error["RequestId"]


def test_conditional_get(s3):
    key = "cond/object"
    etag = s3.put_object(Bucket=BUCKET, Key=key, Body=b"conditional")["ETag"]
    modified = s3.head_object(Bucket=BUCKET, Key=key)["LastModified"]
    hour = timedelta(hours=1)

    def status(**conditions):
        try:
            return s3.get_object(Bucket=BUCKET, Key=key, **conditions)["ResponseMetadata"]["HTTPStatusCode"]
        except ClientError as error:
            return error.response["Error"]["Code"], error.response["ResponseMetadata"]["HTTPStatusCode"]

    assert status(IfMatch=etag) == 200
    assert status(IfMatch='"0123456789abcdef0123456789abcdef"') == ("PreconditionFailed", 412)
    assert status(IfNoneMatch=etag) == ("304", 304)
    assert status(IfNoneMatch='"0123456789abcdef0123456789abcdef"') == 200
    assert status(IfModifiedSince=modified + hour) == ("304", 304)
    assert status(IfModifiedSince=modified - hour) == 200
    assert status(IfUnmodifiedSince=modified - hour) == ("PreconditionFailed", 412)
    assert status(IfUnmodifiedSince=modified + hour) == 200
    # S3's precedence: If-Match true + If-Unmodified-Since false → 200.
    assert status(IfMatch=etag, IfUnmodifiedSince=modified - hour) == 200
    # If-None-Match false + If-Modified-Since true → 304.
    assert status(IfNoneMatch=etag, IfModifiedSince=modified - hour) == ("304", 304)
    with pytest.raises(ClientError) as excinfo:
        s3.head_object(Bucket=BUCKET, Key=key, IfNoneMatch=etag)
    assert error_of(excinfo) == ("304", 304)
    with pytest.raises(ClientError) as excinfo:
        s3.head_object(Bucket=BUCKET, Key=key, IfMatch='"0123456789abcdef0123456789abcdef"')
    assert error_of(excinfo) == ("412", 412)


def test_conditional_put_if_none_match(s3):
    key = "cond/create-once"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as excinfo:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"second", IfNoneMatch="*")
    assert error_of(excinfo) == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"first"


def test_ranged_get(s3):
    body = bytes(range(256)) * 4
    s3.put_object(Bucket=BUCKET, Key="range/object", Body=body)
    cases = {"bytes=0-9": (body[:10], "bytes 0-9/1024"),
             "bytes=10-": (body[10:], "bytes 10-1023/1024"),
             "bytes=-5": (body[-5:], "bytes 1019-1023/1024"),
             "bytes=1000-5000": (body[1000:], "bytes 1000-1023/1024")}
    for range_header, (expected, content_range) in cases.items():
        got = s3.get_object(Bucket=BUCKET, Key="range/object", Range=range_header)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206, range_header
        assert got["ContentRange"] == content_range, range_header
        assert got["ContentLength"] == len(expected), range_header
        assert got["Body"].read() == expected, range_header
    with pytest.raises(ClientError) as excinfo:
        s3.get_object(Bucket=BUCKET, Key="range/object", Range="bytes=999999-")
    assert error_of(excinfo) == ("InvalidRange", 416)


ODD_KEYS = [
    "odd/with space.txt",
    "odd/ trailing and leading ",
    "odd/unicodé/ファイル.txt",
    "odd/émoji 🎉.bin",
    "odd/plus+sign+.txt",
    "odd/percent%20literal%.txt",
    "odd/100%",
    "odd/dots/../up.txt",
    "odd/./dot.txt",
    "odd/..",
    "odd//double//slash.txt",
    "odd/question?mark&and=equals#hash",
    "odd/tilde~star*quote'paren()",
    "odd/xml <tag> & \"quotes\"",
]


def model_listing(keys, prefix, delimiter=None):
    contents, prefixes = [], []
    for key in sorted(keys, key=lambda k: k.encode()):
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix):]
        if delimiter and delimiter in rest:
            common = prefix + rest[: rest.index(delimiter) + len(delimiter)]
            if common not in prefixes:
                prefixes.append(common)
        else:
            contents.append(key)
    return contents, prefixes


@pytest.fixture(scope="module")
def odd_keys(s3):
    for key in ODD_KEYS:
        s3.put_object(Bucket=BUCKET, Key=key, Body=key.encode())
    return ODD_KEYS


def test_odd_keys_round_trip(s3, odd_keys):
    for key in odd_keys:
        got = s3.get_object(Bucket=BUCKET, Key=key)
        assert got["Body"].read() == key.encode(), key
        assert s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == len(key.encode()), key


def test_odd_keys_list(s3, odd_keys):
    contents, prefixes = model_listing(odd_keys, "odd/")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="odd/")["Contents"]] == contents
    assert [o["Key"] for o in s3.list_objects(Bucket=BUCKET, Prefix="odd/")["Contents"]] == contents
    contents, prefixes = model_listing(odd_keys, "odd/", "/")
    for page in (s3.list_objects_v2(Bucket=BUCKET, Prefix="odd/", Delimiter="/"),
                 s3.list_objects(Bucket=BUCKET, Prefix="odd/", Delimiter="/")):
        assert [o["Key"] for o in page.get("Contents", [])] == contents
        assert [p["Prefix"] for p in page.get("CommonPrefixes", [])] == prefixes
    unicode_page = s3.list_objects_v2(Bucket=BUCKET, Prefix="odd/unicodé/")
    assert [o["Key"] for o in unicode_page["Contents"]] == ["odd/unicodé/ファイル.txt"]


def test_list_encoding_type_url(s3, odd_keys):
    """With EncodingType=url given explicitly, botocore does not decode: the raw values are
    what the gateway sent, and each must decode (as botocore's own auto mode decodes, with
    unquote_plus) to the stored key."""
    for operation in (s3.list_objects, s3.list_objects_v2):
        page = operation(Bucket=BUCKET, Prefix="odd/", EncodingType="url")
        assert page["EncodingType"] == "url"
        raw = [o["Key"] for o in page["Contents"]]
        for value in raw:
            assert value.isascii() and " " not in value and "<" not in value, value
        assert [unquote_plus(k) for k in raw] == model_listing(odd_keys, "odd/")[0]
        delimited = operation(Bucket=BUCKET, Prefix="odd/", Delimiter="/", EncodingType="url")
        assert [unquote_plus(p["Prefix"]) for p in delimited["CommonPrefixes"]] == model_listing(odd_keys, "odd/", "/")[1]


def test_list_v1_round_trips_what_botocore_sends(s3):
    """botocore asks ListObjects (v1) for `encoding-type=url` by itself and decodes Marker,
    NextMarker, Delimiter, the keys and the common prefixes, but not Prefix, which S3 leaves as
    given in v1: a prefix XML has to escape (a newline) comes back as sent, as in v2."""
    keys = ["\nline/a", "\nline/b\tc", "\nline/d", "\nline/sub\n1/x", "\nline/sub\n1/y", "\nline/z ✓"]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    for prefix in ("\n", "\nline/", "\nline/sub\n"):
        v1, v2 = s3.list_objects(Bucket=BUCKET, Prefix=prefix), s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        assert v1["Prefix"] == prefix == v2["Prefix"], (v1["Prefix"], v2["Prefix"])
        assert [o["Key"] for o in v1["Contents"]] == [k for k in keys if k.startswith(prefix)]
    page = s3.list_objects(Bucket=BUCKET, Prefix="\nline/", Delimiter="\n", Marker="\nline/a", MaxKeys=2)
    assert (page["Prefix"], page["Delimiter"], page["Marker"]) == ("\nline/", "\n", "\nline/a")
    assert [o["Key"] for o in page["Contents"]] == ["\nline/b\tc", "\nline/d"]
    assert page["IsTruncated"] and page["NextMarker"] == "\nline/d"
    rest = s3.list_objects(Bucket=BUCKET, Prefix="\nline/", Delimiter="\n", Marker=page["NextMarker"])
    assert [p["Prefix"] for p in rest["CommonPrefixes"]] == ["\nline/sub\n"]
    assert [o["Key"] for o in rest["Contents"]] == ["\nline/z ✓"]
    assert [k for p in s3.get_paginator("list_objects").paginate(Bucket=BUCKET, Prefix="\n", PaginationConfig={"PageSize": 2})
            for k in (o["Key"] for o in p.get("Contents", []))] == keys
    s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys]})


def test_odd_keys_delete_objects(s3):
    keys = [k.replace("odd/", "odd-delete/", 1) for k in ODD_KEYS]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    result = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys]})
    assert sorted(d["Key"] for d in result["Deleted"]) == sorted(keys) and not result.get("Errors")
    assert object_keys(s3, BUCKET, "odd-delete/") == set()


def test_multipart_errors(s3, gw):
    key = "mperr/object.bin"
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key, ContentType="application/x-test")["UploadId"]
    big1, big2, small3, small4 = os.urandom(5 * MiB), os.urandom(5 * MiB), b"3" * 1024, b"4" * 1024
    etags = {}
    for number, data in ((1, big1), (2, big2), (3, small3), (4, small4)):
        etags[number] = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=number, Body=data)["ETag"]
        assert etags[number] == quoted(md5(data))
    parts = s3.list_parts(Bucket=BUCKET, Key=key, UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == [
        (1, etags[1], 5 * MiB), (2, etags[2], 5 * MiB), (3, etags[3], 1024), (4, etags[4], 1024)]
    uploads = s3.list_multipart_uploads(Bucket=BUCKET, Prefix="mperr/")["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in uploads] == [(key, upload)]

    def complete(numbers, etag_override=None):
        listed = [{"PartNumber": n, "ETag": (etag_override or {}).get(n, etags.get(n, quoted("0" * 32)))} for n in numbers]
        with pytest.raises(ClientError) as excinfo:
            s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": listed})
        return error_of(excinfo)

    assert complete([3, 4]) == ("EntityTooSmall", 400)
    assert complete([1, 2], {1: quoted("f" * 32)}) == ("InvalidPart", 400)
    assert complete([1, 5]) == ("InvalidPart", 400)
    assert complete([2, 1]) == ("InvalidPartOrder", 400)
    assert_absent(s3, key)

    # After the refused attempts the upload is intact and completes.
    done = s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": etags[n]} for n in (1, 2, 4)]})
    expected_etag = quoted(md5(hashlib.md5(big1).digest() + hashlib.md5(big2).digest() + hashlib.md5(small4).digest()) + "-3")
    assert done["ETag"] == expected_etag
    got = s3.get_object(Bucket=BUCKET, Key=key)
    assert got["ETag"] == expected_etag and got["ContentType"] == "application/x-test"
    assert hashlib.sha256(got["Body"].read()).digest() == hashlib.sha256(big1 + big2 + small4).digest()

    # NoSuchUpload: abort, then upload a part / complete / list parts.
    second = s3.create_multipart_upload(Bucket=BUCKET, Key="mperr/aborted.bin")["UploadId"]
    part = s3.upload_part(Bucket=BUCKET, Key="mperr/aborted.bin", UploadId=second, PartNumber=1, Body=b"p")["ETag"]
    assert s3.abort_multipart_upload(Bucket=BUCKET, Key="mperr/aborted.bin", UploadId=second)["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as excinfo:
        s3.upload_part(Bucket=BUCKET, Key="mperr/aborted.bin", UploadId=second, PartNumber=2, Body=b"q")
    assert error_of(excinfo) == ("NoSuchUpload", 404)
    with pytest.raises(ClientError) as excinfo:
        s3.complete_multipart_upload(Bucket=BUCKET, Key="mperr/aborted.bin", UploadId=second,
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part}]})
    assert error_of(excinfo) == ("NoSuchUpload", 404)
    with pytest.raises(ClientError) as excinfo:
        s3.list_parts(Bucket=BUCKET, Key="mperr/aborted.bin", UploadId=second)
    assert error_of(excinfo) == ("NoSuchUpload", 404)
    # The completed upload is gone too.
    with pytest.raises(ClientError) as excinfo:
        s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=9, Body=b"late")
    assert error_of(excinfo) == ("NoSuchUpload", 404)
    assert_absent(s3, "mperr/aborted.bin")
    assert not s3.list_multipart_uploads(Bucket=BUCKET, Prefix="mperr/").get("Uploads")
    assert_no_temporary_files(gw)


def test_bucket_not_empty(s3):
    bucket = "scratch-bucket"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="keep", Body=b"x")
    with pytest.raises(ClientError) as excinfo:
        s3.delete_bucket(Bucket=bucket)
    assert error_of(excinfo) == ("BucketNotEmpty", 409)
    s3.delete_object(Bucket=bucket, Key="keep")
    assert s3.delete_bucket(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as excinfo:
        s3.head_bucket(Bucket=bucket)
    assert error_of(excinfo) == ("404", 404)


def test_no_such_key_and_bucket(s3):
    with pytest.raises(ClientError) as excinfo:
        s3.get_object(Bucket=BUCKET, Key="nothing/here")
    assert error_of(excinfo) == ("NoSuchKey", 404)
    missing = "no-such-bucket-anywhere"
    for call in (lambda: s3.get_object(Bucket=missing, Key="k"),
                 lambda: s3.put_object(Bucket=missing, Key="k", Body=b"x"),
                 lambda: s3.list_objects_v2(Bucket=missing),
                 lambda: s3.list_objects(Bucket=missing),
                 lambda: s3.delete_bucket(Bucket=missing)):
        with pytest.raises(ClientError) as excinfo:
            call()
        assert error_of(excinfo) == ("NoSuchBucket", 404)
    with pytest.raises(ClientError) as excinfo:
        s3.head_bucket(Bucket=missing)
    assert error_of(excinfo) == ("404", 404)


def test_content_md5_mismatch_is_refused(s3, gw):
    import base64
    wrong = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
    with pytest.raises(ClientError) as excinfo:
        s3.put_object(Bucket=BUCKET, Key="digest/bad", Body=b"the real body", ContentMD5=wrong)
    assert error_of(excinfo) == ("BadDigest", 400)
    assert_absent(s3, "digest/bad")
    assert_no_temporary_files(gw)


def test_expect_100_continue_is_answered(gw, creds):
    """botocore sends PutObject/UploadPart with `Expect: 100-continue` and waits up to one
    second for `100 Continue` before sending the body anyway; a server that never answers it
    costs every upload a second."""
    client = s3_client(gw, creds)
    client.put_object(Bucket=BUCKET, Key="expect/warm-up", Body=b"x")
    for attempt in range(3):
        started = time.monotonic()
        client.put_object(Bucket=BUCKET, Key="expect/timed", Body=b"y" * 4096)
        elapsed = time.monotonic() - started
        assert elapsed < 0.5, f"PUT took {elapsed:.2f} s (attempt {attempt}): no 100 Continue from the gateway?"


def test_connection_reused_after_refused_upload(gw, creds, presigner):
    """botocore sends every PutObject/UploadPart body with `Expect: 100-continue`; when the
    gateway answers with an error instead of 100, botocore does not send the body and reuses
    the connection. The next request on it must work (the server must close the connection or
    otherwise not take the next request for the unsent body)."""
    client = s3_client(gw, creds, max_pool_connections=1)
    for attempt in range(2):
        with pytest.raises(ClientError) as excinfo:
            client.put_object(Bucket="no-such-bucket-anywhere", Key="k", Body=b"body that is never sent")
        assert error_of(excinfo) == ("NoSuchBucket", 404)
        assert BUCKET in [b["Name"] for b in client.list_buckets()["Buckets"]], attempt
    # Without Expect: a refused presigned PUT whose body was sent; the same connection goes on.
    url = presigner.generate_presigned_url("put_object", Params={"Bucket": "no-such-bucket-anywhere", "Key": "k"}, ExpiresIn=300)
    ok_url = presigner.generate_presigned_url("list_objects_v2", Params={"Bucket": BUCKET, "Prefix": "none/"}, ExpiresIn=300)
    with requests.Session() as session:
        for _ in range(2):
            response = session.put(url, data=os.urandom(256 * 1024), timeout=30)
            assert response.status_code == 404 and xml_error(response.content)["Code"] == "NoSuchBucket"
            assert session.get(ok_url, timeout=30).status_code == 200


@pytest.mark.parametrize("algorithm", ["CRC32", "SHA1", "SHA256"])
def test_flexible_checksums(s3, algorithm):
    """boto3 sends x-amz-checksum-<algorithm> for PutObject (CRC32 by default)."""
    key = f"checksum/{algorithm}"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"checksummed body", ChecksumAlgorithm=algorithm)
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"checksummed body"


@pytest.mark.parametrize("header", [{"ChecksumCRC32": "AAAAAA=="},
                                    {"ChecksumSHA256": "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}],
                         ids=["crc32", "sha256"])
def test_wrong_checksum_is_refused(s3, gw, header):
    with pytest.raises(ClientError) as excinfo:
        s3.put_object(Bucket=BUCKET, Key="checksum/wrong", Body=b"not what the checksum says", **header)
    assert error_of(excinfo) == ("BadDigest", 400)
    assert_absent(s3, "checksum/wrong")
    assert_no_temporary_files(gw)


def test_virtual_host_addressing(monkeypatch):
    """With GatewayBaseDomain set, `bucket.<domain>` addresses the bucket (boto3's virtual
    addressing). The names resolve to loopback through a stub resolver in this process."""
    import socket
    server = Server({"AccessKeySecret": ROOT_SECRET, "AccessKeyID": ROOT_ACCESS_KEY_ID,
                     "GatewayBaseDomain": "gw.test"}).start()
    try:
        real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: real(
            "127.0.0.1" if host == "gw.test" or str(host).endswith(".gw.test") else host, *a, **k))
        credentials = endpoint_credentials(server)
        import boto3
        from botocore.config import Config
        client = boto3.client("s3", endpoint_url=f"http://gw.test:{server.gateway_port}", region_name="us-east-1",
                              aws_access_key_id=credentials["AccessKeyId"], aws_secret_access_key=credentials["AccessKeySecret"],
                              aws_session_token=credentials["SecurityToken"],
                              config=Config(s3={"addressing_style": "virtual"}, retries={"max_attempts": 1}))
        sent = []
        client.meta.events.register("before-send.s3", lambda request, **_: sent.append(request.url))
        client.put_object(Bucket=BUCKET, Key="vhost/a b.txt", Body=b"virtual")
        assert client.get_object(Bucket=BUCKET, Key="vhost/a b.txt")["Body"].read() == b"virtual"
        assert [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="vhost/")["Contents"]] == ["vhost/a b.txt"]
        assert all(url.startswith(f"http://{BUCKET}.gw.test:") for url in sent), sent
        # Path style keeps working on the same server.
        path_client = s3_client(server, credentials)
        assert path_client.get_object(Bucket=BUCKET, Key="vhost/a b.txt")["Body"].read() == b"virtual"
    finally:
        server.cleanup()


# ---------------------------------------------------------------------------------------------
# The AWS CLI with the same credentials in its environment.


@pytest.fixture(scope="module")
def cli(gw):
    aws = AwsCli(gw, endpoint_credentials(gw))
    yield aws
    aws.cleanup()


def test_cli_cp_up_and_down_20mib(cli, tmp):
    source, target = tmp / "twenty.bin", tmp / "twenty.out"
    digest = write_random_file(source, 20 * MiB)
    cli.run("s3", "cp", str(source), f"s3://{BUCKET}/cli/twenty.bin")
    cli.run("s3", "cp", f"s3://{BUCKET}/cli/twenty.bin", str(target))
    assert sha256_file(target) == digest
    head = json.loads(cli.run("s3api", "head-object", "--bucket", BUCKET, "--key", "cli/twenty.bin").stdout)
    assert head["ContentLength"] == 20 * MiB
    assert head["ETag"].startswith('"') and head["ETag"].endswith('-3"')  # the CLI's 8 MiB parts


def test_cli_s3api_head_object_metadata(cli, s3):
    s3.put_object(Bucket=BUCKET, Key="cli/meta.txt", Body=b"cli metadata", ContentType="text/markdown",
                  Metadata={"origin": "boto3"})
    head = json.loads(cli.run("s3api", "head-object", "--bucket", BUCKET, "--key", "cli/meta.txt").stdout)
    assert head["ContentLength"] == len(b"cli metadata")
    assert head["ETag"] == quoted(md5(b"cli metadata"))
    assert head["ContentType"] == "text/markdown" and head["Metadata"] == {"origin": "boto3"}
    missing = cli.run("s3api", "head-object", "--bucket", BUCKET, "--key", "cli/absent", check=False)
    assert missing.returncode != 0 and "404" in missing.stderr


def test_cli_ls(cli, s3):
    s3.put_object(Bucket=BUCKET, Key="cli-ls/one.txt", Body=b"1")
    s3.put_object(Bucket=BUCKET, Key="cli-ls/dir/two.txt", Body=b"22")
    s3.put_object(Bucket=BUCKET, Key="cli-ls/with space.txt", Body=b"333")
    buckets = cli.run("s3", "ls").stdout
    assert any(line.split()[-1] == BUCKET for line in buckets.splitlines()), buckets
    lines = cli.run("s3", "ls", f"s3://{BUCKET}/cli-ls/").stdout.splitlines()
    assert any(line.split() == ["PRE", "dir/"] for line in lines), lines
    files = {line[31:].strip(): line.split()[2] for line in lines if "PRE" not in line}
    assert files == {"one.txt": "1", "with space.txt": "3"}, lines
    recursive = cli.run("s3", "ls", "--recursive", f"s3://{BUCKET}/cli-ls/").stdout
    assert sorted(line.split(None, 3)[3] for line in recursive.splitlines()) == [
        "cli-ls/dir/two.txt", "cli-ls/one.txt", "cli-ls/with space.txt"]


def test_cli_sync_tree_up_and_down(cli, s3, tmp):
    up = tmp / "tree"
    files = {"top.txt": b"top\n", "a/one.txt": b"one\n", "a/b/two.bin": os.urandom(300 * 1024),
             "a/b/c/three.txt": b"three\n", "with space/fünf.txt": b"five\n", "big/nine.bin": os.urandom(9 * MiB)}
    for name, data in files.items():
        (up / name).parent.mkdir(parents=True, exist_ok=True)
        (up / name).write_bytes(data)
        # Files that existed before the sync. (S3 LastModified has whole seconds, so a file
        # written in the same second as its upload looks newer than its copy, to S3 as well.)
        an_hour_ago = time.time() - 3600
        os.utime(up / name, (an_hour_ago, an_hour_ago))
    cli.run("s3", "sync", str(up), f"s3://{BUCKET}/sync/")
    assert object_keys(s3, BUCKET, "sync/") == {f"sync/{name}" for name in files}
    # Nothing changed locally: a second sync uploads nothing.
    again = cli.run("s3", "sync", str(up), f"s3://{BUCKET}/sync/")
    assert "upload:" not in again.stdout, again.stdout
    down = tmp / "down"
    cli.run("s3", "sync", f"s3://{BUCKET}/sync/", str(down))
    got = {str(p.relative_to(down)): p.read_bytes() for p in down.rglob("*") if p.is_file()}
    assert got.keys() == files.keys()
    for name, data in files.items():
        assert got[name] == data, name


# ---------------------------------------------------------------------------------------------
# Refusals: each with the code an SDK user sees, and nothing stored.


def test_bucket_outside_the_policy(gw, root, outside_bucket):
    readwrite = s3_client(gw, issued_credentials(gw, "--role", "readwrite"))
    readwrite.put_object(Bucket=BUCKET, Key="readwrite/own.txt", Body=b"mine")  # its own bucket: allowed
    for call in (lambda: readwrite.put_object(Bucket=outside_bucket, Key="intruder.txt", Body=b"x"),
                 lambda: readwrite.get_object(Bucket=outside_bucket, Key="present.txt"),
                 lambda: readwrite.list_objects_v2(Bucket=outside_bucket),
                 lambda: readwrite.delete_object(Bucket=outside_bucket, Key="present.txt"),
                 lambda: readwrite.create_multipart_upload(Bucket=outside_bucket, Key="intruder.bin")):
        with pytest.raises(ClientError) as excinfo:
            call()
        assert error_of(excinfo) == ("AccessDenied", 403)
    assert object_keys(root, outside_bucket) == {"present.txt"}
    assert not root.list_multipart_uploads(Bucket=outside_bucket).get("Uploads")
    assert_no_temporary_files(gw)


def test_read_role_cannot_write(gw, root, tmp):
    root.put_object(Bucket=BUCKET, Key="readonly/existing.txt", Body=b"original")
    reader_credentials = issued_credentials(gw, "--role", "read")
    reader = s3_client(gw, reader_credentials)
    assert reader.get_object(Bucket=BUCKET, Key="readonly/existing.txt")["Body"].read() == b"original"
    assert [o["Key"] for o in reader.list_objects_v2(Bucket=BUCKET, Prefix="readonly/")["Contents"]] == ["readonly/existing.txt"]
    large = tmp / "large.bin"
    write_random_file(large, 6 * MiB)
    for call in (lambda: reader.put_object(Bucket=BUCKET, Key="readonly/new.txt", Body=b"x"),
                 lambda: reader.put_object(Bucket=BUCKET, Key="readonly/existing.txt", Body=b"overwritten"),
                 lambda: reader.put_object(Bucket=BUCKET, Key="readonly/large.bin", Body=open(large, "rb")),
                 lambda: reader.delete_object(Bucket=BUCKET, Key="readonly/existing.txt"),
                 lambda: reader.copy_object(Bucket=BUCKET, Key="readonly/copy.txt",
                                            CopySource={"Bucket": BUCKET, "Key": "readonly/existing.txt"}),
                 lambda: reader.create_multipart_upload(Bucket=BUCKET, Key="readonly/multi.bin")):
        with pytest.raises(ClientError) as excinfo:
            call()
        assert error_of(excinfo) == ("AccessDenied", 403)
    # A presigned PUT made with the read token is refused the same way.
    url = s3_client(gw, reader_credentials, signature_version="s3v4").generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": "readonly/presigned.txt"}, ExpiresIn=300)
    response = requests.put(url, data=b"x" * 1000, timeout=30)
    assert response.status_code == 403 and xml_error(response.content)["Code"] == "AccessDenied"
    assert object_keys(root, BUCKET, "readonly/") == {"readonly/existing.txt"}
    assert root.get_object(Bucket=BUCKET, Key="readonly/existing.txt")["Body"].read() == b"original"
    assert not root.list_multipart_uploads(Bucket=BUCKET, Prefix="readonly/").get("Uploads")
    assert_no_temporary_files(gw)


def test_per_user_isolation(gw, root):
    root.put_object(Bucket=BUCKET, Key="bob/secret.txt", Body=b"bob's")
    alice = s3_client(gw, issued_credentials(gw, "--user", "alice", "--role", "isolated"))
    alice.put_object(Bucket=BUCKET, Key="alice/notes.txt", Body=b"alice's")
    assert alice.get_object(Bucket=BUCKET, Key="alice/notes.txt")["Body"].read() == b"alice's"
    assert [o["Key"] for o in alice.list_objects_v2(Bucket=BUCKET, Prefix="alice/")["Contents"]] == ["alice/notes.txt"]
    for call in (lambda: alice.get_object(Bucket=BUCKET, Key="bob/secret.txt"),
                 lambda: alice.head_object(Bucket=BUCKET, Key="bob/secret.txt"),
                 lambda: alice.put_object(Bucket=BUCKET, Key="bob/planted.txt", Body=b"x"),
                 lambda: alice.delete_object(Bucket=BUCKET, Key="bob/secret.txt"),
                 lambda: alice.list_objects_v2(Bucket=BUCKET, Prefix="bob/"),
                 lambda: alice.list_objects_v2(Bucket=BUCKET)):
        with pytest.raises(ClientError) as excinfo:
            call()
        code, status = error_of(excinfo)
        assert status == 403 and code in ("AccessDenied", "403"), (code, status)  # HEAD has no body
    assert object_keys(root, BUCKET, "bob/") == {"bob/secret.txt"}
    assert root.get_object(Bucket=BUCKET, Key="bob/secret.txt")["Body"].read() == b"bob's"


def test_expired_token(gw, root):
    # The real binary mints the token an hour in the past (faketime), so it expired 45 min ago.
    expired = issued_credentials(gw, "--duration", "900", faketime="-1h")
    expiration = datetime.strptime(expired["Expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert expiration < datetime.now(timezone.utc) - timedelta(minutes=40)
    client = s3_client(gw, expired)
    with pytest.raises(ClientError) as excinfo:
        client.put_object(Bucket=BUCKET, Key="expired/x.txt", Body=b"x")
    assert error_of(excinfo) == ("ExpiredToken", 400)
    with pytest.raises(ClientError) as excinfo:
        client.list_objects_v2(Bucket=BUCKET)
    assert error_of(excinfo) == ("ExpiredToken", 400)
    assert_absent(root, "expired/x.txt")


def flip(text: str, position: int) -> str:
    return text[:position] + ("A" if text[position] != "A" else "B") + text[position + 1:]


def test_tampered_token(gw, root, creds):
    token = creds["SecurityToken"]
    prefix, key_id, claims, mac = token.split(".")
    for tampered in (flip(token, len(prefix) + len(key_id) + 2 + len(claims) // 2),  # a claims byte
                     flip(token, len(token) - 3)):                                      # a MAC byte
        assert tampered != token and len(tampered) == len(token)
        client = s3_client(gw, creds, token=tampered)
        with pytest.raises(ClientError) as excinfo:
            client.put_object(Bucket=BUCKET, Key="tampered/x.txt", Body=b"x")
        assert error_of(excinfo) == ("InvalidToken", 400)
    assert_absent(root, "tampered/x.txt")


def test_token_of_another_key(gw, root, creds):
    other = endpoint_credentials(gw)
    client = s3_client(gw, creds, token=other["SecurityToken"])
    with pytest.raises(ClientError) as excinfo:
        client.put_object(Bucket=BUCKET, Key="mismatch/x.txt", Body=b"x")
    assert error_of(excinfo) == ("InvalidToken", 400)
    assert_absent(root, "mismatch/x.txt")


def test_wrong_secret(gw, root, creds):
    wrong = creds["AccessKeySecret"][:-4] + ("AAAA" if not creds["AccessKeySecret"].endswith("AAAA") else "BBBB")
    for client in (s3_client(gw, creds, secret=wrong),
                   s3_client(gw, access_key_id=ROOT_ACCESS_KEY_ID, secret=ROOT_SECRET + "x")):
        with pytest.raises(ClientError) as excinfo:
            client.put_object(Bucket=BUCKET, Key="wrong-secret/x.txt", Body=b"x")
        assert error_of(excinfo) == ("SignatureDoesNotMatch", 403)
    assert_absent(root, "wrong-secret/x.txt")


def test_unknown_access_key(gw, root):
    client = s3_client(gw, access_key_id="AKIAUNKNOWNKEY000000", secret="x" * 40)
    with pytest.raises(ClientError) as excinfo:
        client.put_object(Bucket=BUCKET, Key="unknown-key/x.txt", Body=b"x")
    assert error_of(excinfo) == ("InvalidAccessKeyId", 403)
    assert_absent(root, "unknown-key/x.txt")


def test_temporary_credentials_without_session_token(gw, root, creds):
    client = s3_client(gw, creds, token="")
    with pytest.raises(ClientError) as excinfo:
        client.put_object(Bucket=BUCKET, Key="no-token/x.txt", Body=b"x")
    code, status = error_of(excinfo)
    # S3's answer for a required header that is missing; AWS itself says InvalidAccessKeyId for
    # an ASIA key without its token. Either tells the SDK user what is wrong.
    assert (code, status) in (("MissingSecurityHeader", 400), ("InvalidAccessKeyId", 403))
    assert_absent(root, "no-token/x.txt")


@pytest.mark.parametrize("skew", [timedelta(minutes=-20), timedelta(minutes=20)], ids=["behind", "ahead"])
def test_skewed_clock(gw, root, creds, monkeypatch, skew):
    """The device clock is off by 20 minutes: botocore's own signer stamps the skewed time
    (its clock is patched, nothing else)."""
    real = botocore.auth.get_current_datetime
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: real(*a, **k) + skew)
    client = s3_client(gw, creds)
    with pytest.raises(ClientError) as excinfo:
        client.put_object(Bucket=BUCKET, Key="skewed/x.txt", Body=b"x")
    assert error_of(excinfo) == ("RequestTimeTooSkewed", 403)
    server_date = email.utils.parsedate_to_datetime(excinfo.value.response["ResponseMetadata"]["HTTPHeaders"]["date"])
    assert abs((server_date - datetime.now(timezone.utc)).total_seconds()) < 5
    monkeypatch.undo()
    assert_absent(root, "skewed/x.txt")


def test_small_skew_is_accepted(gw, creds, monkeypatch):
    real = botocore.auth.get_current_datetime
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: real(*a, **k) - timedelta(minutes=10))
    client = s3_client(gw, creds)
    client.put_object(Bucket=BUCKET, Key="skewed/ten-minutes.txt", Body=b"ok")
    assert client.get_object(Bucket=BUCKET, Key="skewed/ten-minutes.txt")["Body"].read() == b"ok"


def test_root_credentials_have_full_access(root):
    root.create_bucket(Bucket="root-only")
    root.put_object(Bucket="root-only", Key="k", Body=b"v")
    assert root.get_object(Bucket="root-only", Key="k")["Body"].read() == b"v"
    root.delete_object(Bucket="root-only", Key="k")
    root.delete_bucket(Bucket="root-only")


# ---------------------------------------------------------------------------------------------
# aws-chunked uploads, as boto3 sends them by default over HTTPS.
#
# Over plain HTTP botocore signs the payload instead, so a client is pointed at an https://
# endpoint and its fully signed request is carried to the loopback gateway over plain HTTP by a
# `before-send` hook. The signature covers the Host header, not the scheme; every byte of the
# request — aws-chunked framing, the x-amz-checksum-crc32 trailer, the signature — is boto3's.


def https_signed_client(gw, creds, tamper=None):
    client = boto3.client(
        "s3", endpoint_url=f"https://127.0.0.1:{gw.gateway_port}", region_name="us-east-1",
        aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["AccessKeySecret"],
        aws_session_token=creds["SecurityToken"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    seen = {}

    def send_over_http(request, **kwargs):
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        body = bytes(body or b"")
        seen["headers"] = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        seen["body"] = body
        if tamper is not None:
            body = tamper(body)
        url = request.url.replace("https://", "http://", 1)
        headers = {k: v for k, v in request.headers.items() if k.lower() != "transfer-encoding"}
        if request.headers.get("Transfer-Encoding") == b"chunked":
            # As boto3 sends it: aws-chunked inside HTTP chunked transfer (requests streams a generator so).
            data = (body[i:i + 8192] for i in range(0, len(body), 8192))
        else:
            data = body
        response = requests.request(request.method, url, headers=headers, data=data, timeout=30)
        return botocore.awsrequest.AWSResponse(url, response.status_code, response.headers, _Raw(response.content))

    client.meta.events.register("before-send.s3", send_over_http)
    return client, seen


class _Raw:
    """The raw stream botocore reads a response body from."""

    def __init__(self, content):
        self._content = content
        self._read = False

    def stream(self, **kwargs):
        if not self._read:
            self._read = True
            yield self._content

    def read(self, *args, **kwargs):
        if self._read:
            return b""
        self._read = True
        return self._content


def test_aws_chunked_upload_with_crc32_trailer(gw, creds, root):
    client, seen = https_signed_client(gw, creds)
    body = os.urandom(200 * 1024 + 17)
    put = client.put_object(Bucket=BUCKET, Key="chunked/trailer.bin", Body=body, ContentType="application/x-test")
    assert seen["headers"]["X-Amz-Content-SHA256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER", seen["headers"]
    assert "aws-chunked" in seen["headers"]["Content-Encoding"]
    assert seen["headers"]["X-Amz-Trailer"] == "x-amz-checksum-crc32"
    assert b"x-amz-checksum-crc32:" in seen["body"], "the CRC32 travels in the trailer"
    got = root.get_object(Bucket=BUCKET, Key="chunked/trailer.bin")
    assert got["Body"].read() == body, "stored bytes are the decoded payload, not the framing"
    assert got["ContentType"] == "application/x-test"
    assert got.get("ContentEncoding") in (None, ""), "aws-chunked is not stored as the object's encoding"
    assert put["ETag"] == quoted(md5(body))


def test_aws_chunked_upload_with_a_wrong_trailer_checksum_stores_nothing(gw, creds, root):
    def corrupt_payload(body):
        # Flip one payload byte inside the first chunk: the framing stays valid, the CRC32 does not.
        header_end = body.index(b"\r\n") + 2
        return body[:header_end] + bytes([body[header_end] ^ 0xFF]) + body[header_end + 1:]

    client, _ = https_signed_client(gw, creds, tamper=corrupt_payload)
    with pytest.raises(ClientError) as excinfo:
        client.put_object(Bucket=BUCKET, Key="chunked/corrupt.bin", Body=os.urandom(64 * 1024))
    assert excinfo.value.response["Error"]["Code"] == "BadDigest"
    assert_absent(root, "chunked/corrupt.bin")
    assert_no_temporary_files(gw)


# ---------------------------------------------------------------------------------------------
# A small object's first GET is read from the store's files; it then stays in memory, and later
# GETs are answered on the connection's event loop (GatewayFastPath). The answers must be the
# same, header for header, apart from the date and the request id.

VARYING = {"date", "x-amz-request-id", "x-oss-request-id"}


def same_answer(first: requests.Response, second: requests.Response):
    """Status, headers and body alike, but for the date and the request id (also in an error's XML)."""
    body = lambda response: re.sub(rb"<RequestId>[^<]*</RequestId>", b"", response.content)
    assert (first.status_code, body(first)) == (second.status_code, body(second))
    strip = lambda headers: {k.lower(): v for k, v in headers.items() if k.lower() not in VARYING}
    assert strip(first.headers) == strip(second.headers)


@pytest.mark.parametrize("headers", [{}, {"Range": "bytes=2-5"}, {"Range": "bytes=100-"}])
def test_a_small_objects_answer_is_the_same_from_memory(s3, headers):
    key = "fast/small-" + "-".join(f"{k}{v}" for k, v in headers.items()).replace("=", "").replace(" ", "")
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"0123456789", ContentType="text/plain", Metadata={"owner": "me"},
                  Tagging="a=1")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key, "ResponseCacheControl": "no-store"})
    first = requests.get(url, headers=headers)  # from the file: nothing has read it whole yet
    requests.get(url)  # a whole read: now it is in memory
    second = requests.get(url, headers=headers)
    same_answer(first, second)
    assert first.status_code in (200, 206, 416)
    # Conditions are answered from memory as from disk.
    etag = second.headers.get("ETag") or s3.head_object(Bucket=BUCKET, Key=key)["ETag"]
    same_answer(requests.get(url, headers={**headers, "If-None-Match": etag}), requests.get(url, headers={**headers, "If-None-Match": etag}))
    assert requests.get(url, headers={"If-Match": '"nope"'}).status_code == 412
    # boto3 reads it the same both ways.
    reads = [s3.get_object(Bucket=BUCKET, Key=key) for _ in range(2)]
    assert [r["Body"].read() for r in reads] == [b"0123456789"] * 2
    assert reads[0]["Metadata"] == reads[1]["Metadata"] == {"owner": "me"}


@pytest.mark.parametrize("headers", [{}, {"Range": "bytes=2-5"}, {"Range": "bytes=100-"}, {"If-None-Match": '"{etag}"'},
                                     {"If-Match": '"nope"'}])
def test_a_head_is_the_same_from_memory(s3, headers):
    """The first HEAD after a write reads the row from the index (through Hummingbird's responder);
    later ones find it in memory and are answered on the connection's event loop. Both alike,
    header for header, for a large object too (its row is cached, its bytes are not)."""
    for size in (10, 64 * 1024):
        key = f"fast/head-{size}-" + "-".join(f"{k}{v}" for k, v in headers.items()).replace("=", "").replace(" ", "").replace('"', "")
        put = s3.put_object(Bucket=BUCKET, Key=key, Body=(b"0123456789" * 7000)[:size], ContentType="text/plain",
                            Metadata={"owner": "me"}, Tagging="a=1", ChecksumAlgorithm="CRC32")
        asked = {k: v.replace('"{etag}"', put["ETag"]) for k, v in headers.items()}
        url = s3.generate_presigned_url("head_object", Params={"Bucket": BUCKET, "Key": key})
        first = requests.head(url, headers=asked)  # the write emptied the cache: from the index
        second = requests.head(url, headers=asked)  # from memory
        same_answer(first, second)
        assert first.status_code in (200, 206, 304, 412, 416)
        length = {200: str(size)}.get(second.status_code, "0")
        if second.status_code == 206:
            start, end = map(int, second.headers["Content-Range"].split(" ")[1].split("/")[0].split("-"))
            length = str(end - start + 1)
        # NIO's encoder leaves Content-Length off a 304.
        assert second.content == b"" and second.headers.get("Content-Length", "0") == length


@pytest.mark.parametrize("headers", [{}, {"Range": "bytes=2-5"}])
def test_a_head_takes_response_overrides_as_a_get_does(s3, headers):
    """S3's HeadObject takes the response-* parameters GetObject takes (boto3's Response* fields),
    from the index and from memory alike; a range keeps them too."""
    key = "fast/head-overrides-" + "".join(headers.values()).replace("=", "").replace(" ", "")
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"0123456789", ContentType="text/plain", CacheControl="max-age=60")
    overrides = {"ResponseContentType": "text/csv", "ResponseCacheControl": "no-store", "ResponseContentLanguage": "fr",
                 "ResponseContentDisposition": 'attachment; filename="a.csv"', "ResponseContentEncoding": "identity",
                 "ResponseExpires": datetime(2030, 1, 1, tzinfo=timezone.utc)}
    head_url = s3.generate_presigned_url("head_object", Params={"Bucket": BUCKET, "Key": key, **overrides})
    get_url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key, **overrides})
    first = requests.head(head_url, headers=headers)  # from the index
    second = requests.head(head_url, headers=headers)  # from memory
    got = requests.get(get_url, headers=headers)
    same_answer(first, second)
    for answer in (first, second, got):
        assert answer.headers["Content-Type"] == "text/csv" and answer.headers["Cache-Control"] == "no-store"
        assert answer.headers["Content-Language"] == "fr" and answer.headers["Content-Disposition"] == 'attachment; filename="a.csv"'
        assert answer.headers["Content-Encoding"] == "identity" and answer.headers["Expires"] == "Tue, 01 Jan 2030 00:00:00 GMT"
    assert first.headers["Content-Length"] == got.headers["Content-Length"]
    head = s3.head_object(Bucket=BUCKET, Key=key, **overrides)
    assert (head["ContentType"], head["CacheControl"], head["ContentLanguage"]) == ("text/csv", "no-store", "fr")
    # Without them, the object's own headers.
    plain = s3.head_object(Bucket=BUCKET, Key=key)
    assert (plain["ContentType"], plain["CacheControl"]) == ("text/plain", "max-age=60")


def test_a_head_for_the_checksum_is_the_same_from_memory(s3):
    """boto3 asks for the checksum (a signed header) and reads the same answer both ways."""
    key = "fast/head-checksum"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"0123456789", ChecksumAlgorithm="CRC32", Metadata={"owner": "me"})
    heads = [s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED") for _ in range(2)]
    strip = lambda head: {k: v for k, v in head["ResponseMetadata"]["HTTPHeaders"].items() if k not in VARYING}
    assert strip(heads[0]) == strip(heads[1])
    assert heads[1]["ChecksumCRC32"] == heads[0]["ChecksumCRC32"] and heads[1]["Metadata"] == {"owner": "me"}


def test_a_refused_get_is_the_same_whether_or_not_the_object_is_in_memory(s3):
    s3.put_object(Bucket=BUCKET, Key="fast/refused.txt", Body=b"secret-ish")
    good = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "fast/refused.txt"})
    assert requests.get(good).status_code == 200  # now in memory
    forged = good[:-1] + ("1" if good.endswith("0") else "0")
    in_memory = requests.get(forged)
    missing = requests.get(forged.replace("fast/refused.txt", "fast/never-written.txt"))
    assert in_memory.status_code == missing.status_code == 403
    assert xml_error(in_memory.content)["Code"] == xml_error(missing.content)["Code"] == "SignatureDoesNotMatch"
