"""The OSS dialect of the object gateway, end to end with Alibaba's own Python SDK (oss2).

The reference mobile flow: credentials fetched from the token endpoint the way the Android
SDK's auth-server provider fetches them, then oss2 signing with them (V1 `StsAuth` and V4
`ProviderAuthV4`), against the real `tollgate serve` on loopback. oss2 talks path-style to an
IP endpoint by itself (`oss2.api._determine_endpoint_type`: `utils.is_ip_or_localhost(netloc)`
→ `_ENDPOINT_TYPE_IP` → `scheme://netloc/bucket/key`).
"""
import hashlib
import os
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import oss2
import pytest
import requests

from conftest import ROOT_SECRET, Server, on_backend
from oss_helpers import (MiB, OTHER_BUCKET, REGION, ROOT_ACCESS_KEY_ID, VERSIONS, android_fetch,
                         assert_absent, boto3_client, captured_oss2_signing, http_date_of, iso_prefix,
                         issue, parse_expiration, refused, root_bucket, run_skewed_client, sts_auth, sts_bucket)


# Runs on the local store and again on the S3 backend over RGW (conftest.BACKENDS).
ON_RGW_TOO = True


# MARK: Fixtures

@pytest.fixture(scope="module")
def oss_server(request, backend):
    s = on_backend(request, backend, {"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET}).start()
    try:
        root_bucket(s, OTHER_BUCKET).create_bucket()
        yield s
    finally:
        s.cleanup()


@pytest.fixture(scope="module")
def creds(oss_server):
    """The default role's credentials (the reference all_policy), as the Android SDK gets them."""
    return android_fetch(oss_server.url)


@pytest.fixture(scope="module", params=VERSIONS)
def version(request):
    return request.param


@pytest.fixture(scope="module")
def bucket(oss_server, creds, version):
    return sts_bucket(oss_server, creds, version)


@pytest.fixture(scope="module")
def root(oss_server):
    return root_bucket(oss_server)


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def md5_b64(data: bytes) -> str:
    import base64
    return base64.b64encode(hashlib.md5(data).digest()).decode()


# MARK: Credentials

def test_credentials_as_the_android_sdk_reads_them(oss_server):
    before = datetime.now(timezone.utc).replace(microsecond=0)
    creds = android_fetch(oss_server.url)
    after = datetime.now(timezone.utc)
    assert creds["AccessKeyId"].startswith("STS.")
    assert creds["SecurityToken"].startswith("TG1.")
    expiration = parse_expiration(creds["Expiration"])
    # TokenExpireTime "900" in the fixture's config.
    assert before + timedelta(seconds=899) <= expiration <= after + timedelta(seconds=901), creds["Expiration"]
    # The aliases answer the same way.
    for path in ("/sts/getkey", "/sts/getsts"):
        parse_expiration(android_fetch(oss_server.url + path)["Expiration"])


# MARK: Objects, V1 and V4

def test_put_get_head_meta(oss_server, bucket, root, version):
    key = f"{version}/photos/hello world ✓.jpg"
    body = os.urandom(1000)
    headers = {"Content-Type": "image/jpeg", "x-oss-meta-a": "alpha", "x-oss-meta-camera-model": "Pixel 8",
               "Cache-Control": "max-age=60", "Content-Disposition": 'attachment; filename="x.jpg"',
               "Content-MD5": md5_b64(body)}
    put = bucket.put_object(key, body, headers=headers)
    assert put.status == 200
    assert put.etag.lower() == md5_hex(body)
    assert put.request_id and put.request_id == put.headers["x-oss-request-id"]

    got = bucket.get_object(key)
    assert got.read() == body
    assert got.status == 200
    assert got.etag == put.etag
    assert got.content_length == 1000
    assert got.content_type == "image/jpeg"
    assert got.headers["x-oss-meta-a"] == "alpha"
    assert got.headers["x-oss-meta-camera-model"] == "Pixel 8"
    assert got.headers["Cache-Control"] == "max-age=60"
    assert got.headers["Content-Disposition"] == 'attachment; filename="x.jpg"'
    assert got.headers["x-oss-object-type"] == "Normal"
    assert got.headers["x-oss-request-id"]

    head = bucket.head_object(key)
    assert head.status == 200
    assert head.content_length == 1000
    assert head.etag == put.etag
    assert head.content_type == "image/jpeg"
    assert head.object_type == "Normal"
    assert head.headers["x-oss-meta-a"] == "alpha"
    assert head.last_modified == got.last_modified
    assert abs(head.last_modified - time.time()) < 120

    meta = bucket.get_object_meta(key)
    assert meta.status == 200
    assert meta.etag == put.etag
    assert meta.content_length == 1000
    assert meta.last_modified == head.last_modified

    assert bucket.object_exists(key)
    assert root.get_object(key).read() == body  # the same object for the root credentials

    # A wrong Content-MD5 is refused and leaves nothing.
    bad = f"{version}/photos/bad-md5"
    refused(lambda: bucket.put_object(bad, b"abc", headers={"Content-MD5": md5_b64(b"abd")}), 400, "InvalidDigest")
    assert_absent(oss_server, bad)

    bucket.delete_object(key)
    assert not bucket.object_exists(key)


def test_not_found_errors(oss_server, bucket, version):
    missing = refused(lambda: bucket.get_object(f"{version}/no/such/key"), 404, "NoSuchKey")
    # HEAD has no body: oss2 reads the code from `x-oss-err`, the error document OSS sends in a
    # header (base64), and so tells a missing key from a missing bucket.
    head = refused(lambda: bucket.head_object(f"{version}/no/such/key"), 404, "NoSuchKey")
    assert head.body == b"" and head.details.get("Key") == f"{version}/no/such/key", head.details
    assert head.details.get("RequestId") == head.headers["x-oss-request-id"]
    refused(lambda: bucket.get_object_meta(f"{version}/no/such/key"), 404, "NoSuchKey")
    assert bucket.object_exists(f"{version}/no/such/key") is False
    missing_bucket = sts_bucket(oss_server, issue(oss_server, "--role", "read"), version, "no-such-bucket-oss")
    refused(lambda: root_bucket(oss_server, "no-such-bucket-oss").head_object("k"), 404, "NoSuchBucket")
    with pytest.raises(oss2.exceptions.NoSuchBucket):
        root_bucket(oss_server, "no-such-bucket-oss").object_exists("k")
    # A refused HEAD says why as well.
    refused(lambda: missing_bucket.head_object("k"), 403, "AccessDenied")
    assert bucket.delete_object(f"{version}/no/such/key").status == 204  # deleting nothing succeeds
    no_bucket = refused(lambda: root_bucket(oss_server, "no-such-bucket-oss").get_object("k"), 404, "NoSuchBucket")
    # OSS (like S3) names the missing key and bucket in the error body.
    assert (missing.details.get("Key"), no_bucket.details.get("BucketName")) == \
        (f"{version}/no/such/key", "no-such-bucket-oss"), (missing.body, no_bucket.body)


@pytest.mark.parametrize("name", [
    "a+b=c&d;e,f(g)!h*i'j~k@l$m", "what?.txt", "100%.txt", "sp  ace/tab\tname", "日本語/ファイル.txt",
    "trailing-slash-dir/", "#hash", "dots/../x", "emoji 😀.bin",
])
def test_special_character_keys(oss_server, bucket, version, name):
    """Keys that stress V1's canonical resource and V4's canonical URI: oss2 percent-encodes
    them in the URL (`/` too, unless slash_safe), the gateway must sign over the decoded key."""
    key = f"{version}/keys/{name}"
    body = name.encode() * 3
    bucket.put_object(key, body, headers={"x-oss-meta-name": "n"})
    assert bucket.get_object(key).read() == body
    assert bucket.head_object(key).content_length == len(body)
    assert key in [o.key for o in bucket.list_objects_v2(prefix=key).object_list]
    response = requests.get(bucket.sign_url("GET", key, 60))
    assert response.status_code == 200, response.text
    assert response.content == body
    assert root_bucket(oss_server).get_object(key).read() == body
    bucket.delete_object(key)
    assert not bucket.object_exists(key)


def test_ranged_get(bucket, version):
    key = f"{version}/range/blob.bin"
    body = bytes(range(256)) * 4  # 1024 bytes
    bucket.put_object(key, body)

    part = bucket.get_object(key, byte_range=(10, 19))
    assert part.status == 206
    assert part.read() == body[10:20]
    assert part.headers["Content-Range"] == "bytes 10-19/1024"
    assert part.content_length == 10

    tail = bucket.get_object(key, headers={"Range": "bytes=1000-"})
    assert tail.status == 206
    assert tail.read() == body[1000:]
    assert tail.headers["Content-Range"] == "bytes 1000-1023/1024"

    suffix = bucket.get_object(key, byte_range=(None, 5))
    assert suffix.status == 206
    assert suffix.read() == body[-5:]

    head = bucket.head_object(key, headers={"Range": "bytes=0-99"})
    assert head.status == 206
    assert head.content_length == 100

    # oss2's resumable download: parallel ranged GETs pinned with If-Match on the ETag.
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "blob.bin")
        oss2.resumable_download(bucket, key, target, store=oss2.ResumableDownloadStore(root=tmp),
                                multiget_threshold=100, part_size=300, num_threads=3)
        with open(target, "rb") as f:
            assert f.read() == body


def test_conditional_get(bucket, version):
    key = f"{version}/conditional/object.txt"
    put = bucket.put_object(key, b"conditional body")
    etag = '"' + put.etag + '"'
    head = bucket.head_object(key)
    last_modified = head.headers["Last-Modified"]
    earlier = format_datetime(datetime.fromtimestamp(head.last_modified - 3600, timezone.utc), usegmt=True)
    later = format_datetime(datetime.fromtimestamp(head.last_modified + 3600, timezone.utc), usegmt=True)

    refused(lambda: bucket.get_object(key, headers={"If-None-Match": etag}), 304, "")
    refused(lambda: bucket.head_object(key, headers={"If-None-Match": etag}), 304, "")
    assert bucket.get_object(key, headers={"If-None-Match": '"0123456789abcdef0123456789abcdef"'}).read() == b"conditional body"

    refused(lambda: bucket.get_object(key, headers={"If-Modified-Since": last_modified}), 304, "")
    assert bucket.get_object(key, headers={"If-Modified-Since": earlier}).read() == b"conditional body"

    assert bucket.get_object(key, headers={"If-Match": etag}).read() == b"conditional body"
    refused(lambda: bucket.get_object(key, headers={"If-Match": '"0123456789abcdef0123456789abcdef"'}),
            412, "PreconditionFailed")
    refused(lambda: bucket.get_object(key, headers={"If-Unmodified-Since": earlier}), 412, "PreconditionFailed")
    assert bucket.get_object(key, headers={"If-Unmodified-Since": later}).read() == b"conditional body"

    # Conditions combine with Range.
    part = bucket.get_object(key, byte_range=(0, 10), headers={"If-Match": etag})
    assert part.status == 206 and part.read() == b"conditional"


def test_list_v1_and_v2(bucket, version):
    prefix = f"{version}/list/"
    names = ["a.txt", "b/1.txt", "b/2.txt", "c/3.txt", "d.txt", "100% sure+.txt", "z ✓.txt"]
    for name in names:
        bucket.put_object(prefix + name, name.encode())
    everything = sorted(prefix + name for name in names)  # byte order = code point order here

    # v1, delimiter: objects at this level and the common prefixes below it.
    listing = bucket.list_objects(prefix=prefix, delimiter="/")
    assert [o.key for o in listing.object_list] == sorted(prefix + n for n in names if "/" not in n)
    assert listing.prefix_list == [prefix + "b/", prefix + "c/"]
    assert listing.is_truncated is False
    info = {o.key: o for o in listing.object_list}[prefix + "a.txt"]
    assert info.size == 5
    assert info.etag.lower() == md5_hex(b"a.txt")
    assert abs(info.last_modified - time.time()) < 120

    # v1, paged with markers.
    first = bucket.list_objects(prefix=prefix, max_keys=2)
    assert [o.key for o in first.object_list] == everything[:2]
    assert first.is_truncated is True
    assert first.next_marker == everything[1]
    second = bucket.list_objects(prefix=prefix, max_keys=2, marker=first.next_marker)
    assert [o.key for o in second.object_list] == everything[2:4]
    assert [o.key for o in oss2.ObjectIterator(bucket, prefix=prefix, max_keys=2)] == everything

    # v2, delimiter.
    listing2 = bucket.list_objects_v2(prefix=prefix, delimiter="/")
    assert [o.key for o in listing2.object_list] == [o.key for o in listing.object_list]
    assert listing2.prefix_list == [prefix + "b/", prefix + "c/"]
    assert listing2.is_truncated is False

    # v2, paged with continuation tokens, and start-after.
    page = bucket.list_objects_v2(prefix=prefix, max_keys=3)
    assert [o.key for o in page.object_list] == everything[:3]
    assert page.is_truncated is True and page.next_continuation_token
    rest = bucket.list_objects_v2(prefix=prefix, max_keys=100, continuation_token=page.next_continuation_token)
    assert [o.key for o in rest.object_list] == everything[3:]
    assert [o.key for o in oss2.ObjectIteratorV2(bucket, prefix=prefix, max_keys=2)] == everything
    after = bucket.list_objects_v2(prefix=prefix, start_after=everything[4])
    assert [o.key for o in after.object_list] == everything[5:]

    # The prefix iterator under a common prefix.
    assert [o.key for o in oss2.ObjectIterator(bucket, prefix=prefix + "b/")] == [prefix + "b/1.txt", prefix + "b/2.txt"]


def test_copy_object(oss_server, bucket, version):
    source = f"{version}/copy/source ✓ 1+1.txt"
    body = b"copy me " * 100
    put = bucket.put_object(source, body, headers={"Content-Type": "text/plain", "x-oss-meta-a": "alpha"})

    target = f"{version}/copy/target ✓.txt"
    copied = bucket.copy_object(oss_server.bucket, source, target)
    assert copied.status == 200
    got = bucket.get_object(target)
    assert got.read() == body
    assert got.content_type == "text/plain"
    assert got.headers["x-oss-meta-a"] == "alpha"
    assert got.etag == put.etag

    replaced = f"{version}/copy/replaced.txt"
    bucket.copy_object(oss_server.bucket, source, replaced,
                       headers={"x-oss-metadata-directive": "REPLACE", "x-oss-meta-b": "beta",
                                "Content-Type": "application/json"})
    head = bucket.head_object(replaced)
    assert head.content_type == "application/json"
    assert head.headers["x-oss-meta-b"] == "beta"
    assert "x-oss-meta-a" not in head.headers
    assert bucket.get_object(replaced).read() == body

    refused(lambda: bucket.copy_object(oss_server.bucket, f"{version}/copy/missing", f"{version}/copy/never"),
            404, "NoSuchKey")
    assert_absent(oss_server, f"{version}/copy/never")

    # oss2 reads CopyObject's result ETag from the response's ETag header (OSS sends it there as
    # well as in the CopyObjectResult body).
    assert copied.etag == put.etag, dict(copied.headers)


def test_batch_delete(bucket, version):
    keys = [f"{version}/batch/one", f"{version}/batch/two words ✓", f"{version}/batch/100%+"]
    keep = f"{version}/batch/keep"
    for key in keys + [keep]:
        bucket.put_object(key, b"x")
    missing = f"{version}/batch/never-existed"
    result = bucket.batch_delete_objects(keys + [missing])
    assert result.status == 200
    assert sorted(result.deleted_keys) == sorted(keys + [missing])
    for key in keys:
        assert not bucket.object_exists(key)
    assert bucket.object_exists(keep)


def test_append_object(bucket, version):
    key = f"{version}/logs/app.log"
    first = bucket.append_object(key, 0, b"line one\n", headers={"Content-Type": "text/plain", "x-oss-meta-a": "log"})
    assert first.status == 200
    assert first.next_position == 9
    second = bucket.append_object(key, first.next_position, b"line two\n")
    assert second.next_position == 18

    error = refused(lambda: bucket.append_object(key, 9, b"again\n"), 409, "PositionNotEqualToLength")
    assert error.headers["x-oss-next-append-position"] == "18"
    assert isinstance(error, oss2.exceptions.PositionNotEqualToLength)

    got = bucket.get_object(key)
    assert got.read() == b"line one\nline two\n"
    assert got.content_type == "text/plain"
    assert got.headers["x-oss-meta-a"] == "log"
    head = bucket.head_object(key)
    assert head.object_type == "Appendable"
    assert head.headers["x-oss-next-append-position"] == "18"
    assert head.content_length == 18

    # A normal object cannot be appended to.
    normal = f"{version}/logs/normal.log"
    bucket.put_object(normal, b"normal")
    refused(lambda: bucket.append_object(normal, 6, b"more"), 409, "ObjectNotAppendable")
    assert bucket.get_object(normal).read() == b"normal"


def test_multipart_operations(oss_server, bucket, version):
    key = f"{version}/multipart/manual.bin"
    part1, part2 = os.urandom(256 * 1024), os.urandom(1000)
    init = bucket.init_multipart_upload(key, headers={"Content-Type": "video/mp4", "x-oss-meta-a": "mp"})
    upload_id = init.upload_id
    assert upload_id
    r1 = bucket.upload_part(key, upload_id, 1, part1)
    r2 = bucket.upload_part(key, upload_id, 2, part2)
    assert r1.etag.lower() == md5_hex(part1)

    parts = bucket.list_parts(key, upload_id, marker="0")
    assert [(p.part_number, p.size) for p in parts.parts] == [(1, len(part1)), (2, len(part2))]
    assert [p.etag for p in parts.parts] == [r1.etag, r2.etag]
    uploads = bucket.list_multipart_uploads(prefix=f"{version}/multipart/")
    assert (key, upload_id) in [(u.key, u.upload_id) for u in uploads.upload_list]

    done = bucket.complete_multipart_upload(key, upload_id, [oss2.models.PartInfo(1, r1.etag), oss2.models.PartInfo(2, r2.etag)])
    assert done.status == 200
    expected_etag = hashlib.md5(hashlib.md5(part1).digest() + hashlib.md5(part2).digest()).hexdigest() + "-2"
    assert done.etag.lower() == expected_etag
    got = bucket.get_object(key)
    assert got.read() == part1 + part2
    assert got.content_type == "video/mp4"
    assert got.headers["x-oss-meta-a"] == "mp"
    assert got.headers["x-oss-object-type"] == "Multipart"

    # Abort: the upload and its parts are gone, nothing is stored.
    aborted = f"{version}/multipart/aborted.bin"
    upload = bucket.init_multipart_upload(aborted).upload_id
    bucket.upload_part(aborted, upload, 1, b"part")
    bucket.abort_multipart_upload(aborted, upload)
    refused(lambda: bucket.list_parts(aborted, upload, marker="0"), 404, "NoSuchUpload")
    assert_absent(oss_server, aborted)


def test_list_parts_as_oss2_sends_it(bucket, version):
    """oss2's `list_parts` and `PartIterator` start with `part-number-marker` present and empty
    (the query `?uploadId=…&part-number-marker&max-parts=1000`): that means "from the start"."""
    key = f"{version}/multipart/listed.bin"
    upload_id = bucket.init_multipart_upload(key).upload_id
    try:
        etags = [bucket.upload_part(key, upload_id, n, os.urandom(100 * 1024)).etag for n in (1, 2, 3)]
        assert [p.etag for p in bucket.list_parts(key, upload_id).parts] == etags
        assert [p.part_number for p in oss2.PartIterator(bucket, key, upload_id, max_parts=2)] == [1, 2, 3]
    finally:
        bucket.abort_multipart_upload(key, upload_id)


def test_resumable_upload_30_mib(oss_server, bucket, version, tmp_path):
    key = f"{version}/big/resumable.bin"
    data = os.urandom(30 * MiB)
    source = tmp_path / "upload.bin"
    source.write_bytes(data)
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    result = oss2.resumable_upload(bucket, key, str(source), store=oss2.ResumableStore(root=str(store_dir)),
                                   multipart_threshold=1 * MiB, part_size=1 * MiB, num_threads=4,
                                   headers={"x-oss-meta-a": "big", "Content-Type": "application/octet-stream"})
    assert result.status == 200
    head = bucket.head_object(key)
    assert head.content_length == 30 * MiB
    assert head.object_type == "Multipart"
    assert head.etag.endswith("-30")
    assert head.headers["x-oss-meta-a"] == "big"
    digest = hashlib.md5()
    stream = bucket.get_object(key)
    for chunk in iter(lambda: stream.read(MiB), b""):
        digest.update(chunk)
    assert digest.hexdigest() == hashlib.md5(data).hexdigest()
    # The same object through S3: same size and ETag.
    s3_head = boto3_client(oss_server).head_object(Bucket=oss_server.bucket, Key=key)
    assert s3_head["ETag"].strip('"') == head.etag.lower() and s3_head["ContentLength"] == 30 * MiB
    assert s3_head["Metadata"] == {"a": "big"}
    # The upload finished, so oss2 dropped its checkpoint record.
    assert not any(p.is_file() for p in store_dir.rglob("*"))
    # No multipart upload is left open.
    assert key not in [u.key for u in oss2.MultipartUploadIterator(bucket, prefix=key)]


def test_presigned_urls_with_plain_http(oss_server, bucket, creds, version):
    key = f"{version}/presigned/dir/file ✓.txt"
    put_url = bucket.sign_url("PUT", key, 60)
    if version == "v1":
        assert "security-token=" in put_url and "OSSAccessKeyId=" in put_url and "Signature=" in put_url
    elif version == "v2":
        assert "x-oss-signature-version=OSS2" in put_url and "x-oss-access-key-id=" in put_url
        assert "security-token=" in put_url and "x-oss-signature=" in put_url and "x-oss-expires=" in put_url
    else:
        assert "x-oss-security-token=" in put_url and "x-oss-signature=" in put_url
    response = requests.put(put_url, data=b"uploaded with a presigned url")
    assert response.status_code == 200, response.text
    assert response.headers.get("x-oss-request-id")
    assert response.headers["ETag"].strip('"').lower() == md5_hex(b"uploaded with a presigned url")

    get_url = bucket.sign_url("GET", key, 60)
    response = requests.get(get_url)
    assert response.status_code == 200, response.text
    assert response.content == b"uploaded with a presigned url"

    # Signed headers: Content-Type and user metadata, sent as signed.
    typed = f"{version}/presigned/typed.json"
    signed_headers = {"Content-Type": "application/json", "x-oss-meta-a": "presigned"}
    response = requests.put(bucket.sign_url("PUT", typed, 60, headers=signed_headers), data=b"{}", headers=signed_headers)
    assert response.status_code == 200, response.text
    head = bucket.head_object(typed)
    assert head.content_type == "application/json"
    assert head.headers["x-oss-meta-a"] == "presigned"
    # The same URL with a different Content-Type does not match the signature.
    response = requests.put(bucket.sign_url("PUT", typed, 60, headers=signed_headers), data=b"[]",
                            headers={**signed_headers, "Content-Type": "text/plain"})
    assert response.status_code == 403
    assert ET.fromstring(response.content).findtext("Code") == "SignatureDoesNotMatch"
    assert bucket.get_object(typed).read() == b"{}"

    # A presigned GET with response-* overrides.
    url = bucket.sign_url("GET", typed, 60, params={"response-content-type": "text/csv"})
    response = requests.get(url)
    assert response.status_code == 200 and response.headers["Content-Type"] == "text/csv"

    # A tampered signature is refused, as OSS XML.
    tampered = get_url[:-1] + ("0" if get_url[-1] != "0" else "1")
    response = requests.get(tampered)
    assert response.status_code == 403
    error = ET.fromstring(response.content)
    assert error.findtext("Code") == "SignatureDoesNotMatch"
    assert error.findtext("RequestId") == response.headers["x-oss-request-id"]

    # The security token twice (header and query) is an InvalidArgument.
    response = requests.get(get_url, headers={"x-oss-security-token": creds["SecurityToken"]})
    assert response.status_code == 400, response.text
    assert ET.fromstring(response.content).findtext("Code") == "InvalidArgument"

    # An expired URL: AccessDenied, "Request has expired."
    short = bucket.sign_url("GET", key, 1)
    time.sleep(2.2)
    response = requests.get(short)
    assert response.status_code == 403, response.text
    error = ET.fromstring(response.content)
    assert error.findtext("Code") == "AccessDenied"
    assert "expired" in error.findtext("Message").lower()

    # A presigned PUT refused for a read-only token stores nothing.
    read = sts_bucket(oss_server, issue(oss_server, "--role", "read"), version)
    denied = f"{version}/presigned/denied.txt"
    response = requests.put(read.sign_url("PUT", denied, 60), data=b"no")
    assert response.status_code == 403
    assert ET.fromstring(response.content).findtext("Code") == "AccessDenied"
    assert_absent(oss_server, denied)


@pytest.mark.parametrize("signer", ["v2", "v4"])
def test_presigned_additional_headers(oss_server, creds, signer):
    """V2 and V4 presigned URLs can sign extra headers (`x-oss-additional-headers`): sent as signed
    they pass, changed they are refused."""
    bucket = sts_bucket(oss_server, creds, signer)
    key = f"{signer}/presigned/additional.txt"
    headers = {"Content-Disposition": "inline", "Content-Type": "text/plain"}
    url = bucket.sign_url("PUT", key, 60, headers=headers, additional_headers=["content-disposition"])
    assert "x-oss-additional-headers=content-disposition" in url
    changed = requests.put(url, data=b"changed", headers={**headers, "Content-Disposition": "attachment"})
    assert changed.status_code == 403, changed.text
    assert ET.fromstring(changed.content).findtext("Code") == "SignatureDoesNotMatch"
    assert_absent(oss_server, key)
    response = requests.put(url, data=b"additional", headers=headers)
    assert response.status_code == 200, response.text
    head = bucket.head_object(key)
    assert head.headers["Content-Disposition"] == "inline"
    assert bucket.get_object(key).read() == b"additional"


# MARK: Refusals

def test_buckets(oss_server, creds, version):
    """CreateBucket and ListBuckets: root may, the read role may not."""
    read_creds = issue(oss_server, "--role", "read")
    new = f"tollgate-new-{version}"
    refused(lambda: sts_bucket(oss_server, read_creds, version, new).create_bucket(), 403, "AccessDenied")
    refused(lambda: root_bucket(oss_server, new).list_objects(), 404, "NoSuchBucket")
    read_service = oss2.Service(sts_auth(read_creds, version), oss_server.gateway_url, region=REGION)
    refused(lambda: read_service.list_buckets(), 403, "AccessDenied")
    # oss2 requires each <Bucket> of ListAllMyBucketsResult to carry Name, Location, CreationDate,
    # ExtranetEndpoint, IntranetEndpoint and StorageClass (oss2.xml_utils.parse_list_buckets).
    listed = oss2.Service(oss2.Auth(ROOT_ACCESS_KEY_ID, ROOT_SECRET), oss_server.gateway_url).list_buckets()
    names = [b.name for b in listed.buckets]
    assert oss_server.bucket in names and OTHER_BUCKET in names and new not in names
    assert all(abs(b.creation_date - time.time()) < 3600 for b in listed.buckets)


def test_read_role_cannot_write(oss_server, bucket, version):
    read_creds = issue(oss_server, "--role", "read")
    read = sts_bucket(oss_server, read_creds, version)
    existing = f"{version}/refusals/readable.txt"
    bucket.put_object(existing, b"readable")
    assert read.get_object(existing).read() == b"readable"  # the token itself works
    assert [o.key for o in read.list_objects(prefix=f"{version}/refusals/").object_list] == [existing]

    key = f"{version}/refusals/read-put.txt"
    refused(lambda: read.put_object(key, b"denied"), 403, "AccessDenied")
    refused(lambda: read.put_object(key, os.urandom(2 * MiB)), 403, "AccessDenied")
    refused(lambda: read.append_object(key, 0, b"denied"), 403, "AccessDenied")
    refused(lambda: read.copy_object(oss_server.bucket, existing, key), 403, "AccessDenied")
    refused(lambda: read.init_multipart_upload(key), 403, "AccessDenied")
    refused(lambda: read.delete_object(existing), 403, "AccessDenied")
    upload_id = root_bucket(oss_server).init_multipart_upload(key).upload_id
    refused(lambda: read.upload_part(key, upload_id, 1, os.urandom(256 * 1024)), 403, "AccessDenied")
    # (marker "0": the empty marker oss2 sends by default is covered by test_list_parts_as_oss2_sends_it)
    assert root_bucket(oss_server).list_parts(key, upload_id, marker="0").parts == []
    root_bucket(oss_server).abort_multipart_upload(key, upload_id)
    assert_absent(oss_server, key)
    assert root_bucket(oss_server).get_object(existing).read() == b"readable"


def test_readwrite_role_uploads(oss_server, version, tmp_path):
    """The reference read-write policy (PutObject, ListParts, AbortMultipartUpload, …) covers
    what a mobile app's resumable upload sends: every multipart step is oss:PutObject."""
    rw = sts_bucket(oss_server, issue(oss_server, "--role", "readwrite"), version)
    key = f"{version}/rw/resumable.bin"
    data = os.urandom(3 * MiB + 17)
    source = tmp_path / "rw.bin"
    source.write_bytes(data)
    oss2.resumable_upload(rw, key, str(source), store=oss2.ResumableStore(root=str(tmp_path)),
                          multipart_threshold=MiB, part_size=MiB, num_threads=2)
    assert rw.get_object(key).read() == data
    assert rw.head_object(key).etag.endswith("-4")
    rw.delete_object(key)
    assert_absent(oss_server, key)


def test_bucket_outside_the_policy(oss_server, version):
    rw = sts_bucket(oss_server, issue(oss_server, "--role", "readwrite"), version)
    rw.put_object(f"{version}/refusals/rw-own.txt", b"mine")  # the token works on its own bucket

    root_other = root_bucket(oss_server, OTHER_BUCKET)
    secret_key = f"{version}/secret.txt"
    root_other.put_object(secret_key, b"root only")
    other = sts_bucket(oss_server, issue(oss_server, "--role", "readwrite"), version, OTHER_BUCKET)
    key = f"{version}/intruder.txt"
    refused(lambda: other.put_object(key, b"denied"), 403, "AccessDenied")
    refused(lambda: other.get_object(secret_key), 403, "AccessDenied")
    refused(lambda: other.list_objects(), 403, "AccessDenied")
    refused(lambda: other.delete_object(secret_key), 403, "AccessDenied")
    # Copy out of the foreign bucket into the allowed one is refused too.
    refused(lambda: rw.copy_object(OTHER_BUCKET, secret_key, f"{version}/refusals/exfiltrated.txt"), 403, "AccessDenied")
    assert_absent(oss_server, key, OTHER_BUCKET)
    assert_absent(oss_server, f"{version}/refusals/exfiltrated.txt")
    assert root_other.get_object(secret_key).read() == b"root only"


def test_expired_token(oss_server, version):
    expired = issue(oss_server, faketime="-1h")
    assert parse_expiration(expired["Expiration"]) < datetime.now(timezone.utc), \
        f"faketime did not move the clock of `tollgate token issue`: {expired['Expiration']}"
    key = f"{version}/refusals/expired.txt"
    refused(lambda: sts_bucket(oss_server, expired, version).put_object(key, b"late"), 403, "SecurityTokenExpired")
    refused(lambda: sts_bucket(oss_server, expired, version).get_object(f"{version}/anything"), 403, "SecurityTokenExpired")
    # A presigned URL made with the expired token (the URL itself is fresh).
    response = requests.put(sts_bucket(oss_server, expired, version).sign_url("PUT", key, 60), data=b"late")
    assert response.status_code == 403, response.text
    assert ET.fromstring(response.content).findtext("Code") == "SecurityTokenExpired"
    assert_absent(oss_server, key)


@pytest.mark.parametrize("segment", [1, 2, 3], ids=["key-id", "claims", "mac"])
def test_tampered_token(oss_server, creds, version, segment):
    parts = creds["SecurityToken"].split(".")
    assert len(parts) == 4 and parts[0] == "TG1"
    middle = len(parts[segment]) // 2
    char = parts[segment][middle]
    parts[segment] = parts[segment][:middle] + ("B" if char != "B" else "C") + parts[segment][middle + 1:]
    tampered = ".".join(parts)
    assert len(tampered) == len(creds["SecurityToken"]) and tampered != creds["SecurityToken"]
    key = f"{version}/refusals/tampered-{segment}.txt"
    refused(lambda: sts_bucket(oss_server, creds, version, token=tampered).put_object(key, b"forged"),
            403, "InvalidSecurityToken")
    assert_absent(oss_server, key)


def test_wrong_secret(oss_server, creds, version):
    wrong = creds["AccessKeySecret"][:-1] + ("x" if creds["AccessKeySecret"][-1] != "x" else "y")
    key = f"{version}/refusals/wrong-secret.txt"
    with captured_oss2_signing() as signing:
        error = refused(lambda: sts_bucket(oss_server, creds, version, secret=wrong).put_object(
            key, b"forged", headers={"Content-Type": "text/plain", "x-oss-meta-a": "b"}), 403, "SignatureDoesNotMatch")
    # The server's StringToSign is exactly what oss2 signed.
    assert signing["strings"], "oss2 logged no string to sign"
    assert error.details.get("StringToSign") == signing["strings"][-1], \
        (error.details.get("StringToSign"), signing["strings"][-1])
    authorization = signing["requests"][-1]["authorization"]
    if version == "v1":
        provided = authorization.split(":", 1)[1]
        assert error.details["StringToSign"].startswith("PUT\n")
        assert error.details["StringToSign"].endswith(f"/{oss_server.bucket}/{key}")
    elif version == "v2":
        provided = authorization.split("Signature:", 1)[1]
        assert authorization.startswith(f"OSS2 AccessKeyId:{creds['AccessKeyId']},")
        assert error.details["StringToSign"].startswith("PUT\n")
        assert error.details["StringToSign"].endswith("%2F" + oss_server.bucket + "%2F" + key.replace("/", "%2F"))
    else:
        provided = authorization.split("Signature=", 1)[1].split(",")[0].strip()
        assert error.details["StringToSign"].startswith("OSS4-HMAC-SHA256\n")
    assert error.details.get("SignatureProvided") == provided
    assert error.details.get("OSSAccessKeyId") == creds["AccessKeyId"]
    assert wrong not in error.body.decode() and creds["AccessKeySecret"] not in error.body.decode()
    assert_absent(oss_server, key)


def test_unknown_access_key(oss_server, version):
    fake = {"AccessKeyId": "NOSUCHKEYOSS", "AccessKeySecret": "x" * 32, "SecurityToken": ""}
    key = f"{version}/refusals/unknown-key.txt"
    if version == "v1":
        b = oss2.Bucket(oss2.Auth(fake["AccessKeyId"], fake["AccessKeySecret"]), oss_server.gateway_url, oss_server.bucket)
    elif version == "v2":
        b = oss2.Bucket(oss2.AuthV2(fake["AccessKeyId"], fake["AccessKeySecret"]), oss_server.gateway_url, oss_server.bucket)
    else:
        b = oss2.Bucket(oss2.AuthV4(fake["AccessKeyId"], fake["AccessKeySecret"]), oss_server.gateway_url,
                        oss_server.bucket, region=REGION)
    error = refused(lambda: b.put_object(key, b"who"), 403, "InvalidAccessKeyId")
    assert error.details.get("OSSAccessKeyId") == "NOSUCHKEYOSS"
    assert_absent(oss_server, key)


@pytest.mark.parametrize("offset,seconds", [("+1h", 3600), ("-20m", -1200)])
def test_skewed_clock(oss_server, creds, version, offset, seconds):
    key = f"{version}/refusals/skewed{offset}.txt"
    before = datetime.now(timezone.utc)
    out = run_skewed_client(oss_server, creds, version, key, offset)
    after = datetime.now(timezone.utc)
    assert abs(out["client_time"] - time.time() - seconds) < 60, "faketime did not move the client's clock"
    assert out["ok"] is False, out
    assert (out["status"], out["code"]) == (403, "RequestTimeTooSkewed"), out
    details = out["details"]
    assert details["MaxAllowedSkewMilliseconds"] == "900000"
    request_time, server_time = iso_prefix(details["RequestTime"]), iso_prefix(details["ServerTime"])
    slack = timedelta(seconds=5)
    assert before - slack <= server_time <= after + slack, details
    assert before + timedelta(seconds=seconds) - slack <= request_time <= after + timedelta(seconds=seconds) + slack, details
    # The Date header is the server's correct time, so the SDKs can correct their clocks.
    server_date = http_date_of(out["headers"])
    assert before - slack <= server_date <= after + slack, out["headers"]["date"]
    assert details["RequestId"] == out["headers"]["x-oss-request-id"]
    assert_absent(oss_server, key)


def test_skew_inside_the_window_is_accepted(oss_server, creds, version):
    """OSS allows 15 minutes of skew: a client 10 minutes off still works."""
    key = f"{version}/skew/ten-minutes.txt"
    assert run_skewed_client(oss_server, creds, version, key, "+10m")["ok"] is True
    assert root_bucket(oss_server).get_object(key).read() == b"skewed"


# MARK: Cross-dialect

def test_oss2_writes_boto3_reads(oss_server, bucket, creds, version):
    s3 = boto3_client(oss_server, creds)
    key = f"{version}/cross/from-oss ✓.bin"
    body = os.urandom(4096)
    put = bucket.put_object(key, body, headers={"x-oss-meta-a": "from oss", "x-oss-meta-Camera-Model": "Pixel 8",
                                                "Content-Type": "application/pdf"})
    got = s3.get_object(Bucket=oss_server.bucket, Key=key)
    assert got["Body"].read() == body
    assert got["Metadata"] == {"a": "from oss", "camera-model": "Pixel 8"}
    assert got["ContentType"] == "application/pdf"
    # The same ETag in each dialect's case: OSS's upper-case hex, S3's lower-case.
    assert got["ETag"].strip('"') == put.etag.lower() and put.etag == put.etag.upper()
    assert got["ResponseMetadata"]["HTTPHeaders"].get("x-amz-request-id")
    assert "x-oss-meta-a" not in got["ResponseMetadata"]["HTTPHeaders"]
    # A ranged read through S3 of an oss2 append object.
    appended = f"{version}/cross/appended.log"
    bucket.append_object(appended, 0, b"0123456789")
    assert s3.get_object(Bucket=oss_server.bucket, Key=appended, Range="bytes=2-4")["Body"].read() == b"234"


def test_boto3_writes_oss2_reads(oss_server, bucket, creds, version):
    s3 = boto3_client(oss_server, creds)
    key = f"{version}/cross/from-s3 ✓.bin"
    body = os.urandom(4096)
    put = s3.put_object(Bucket=oss_server.bucket, Key=key, Body=body, Metadata={"a": "from s3"},
                        ContentType="image/png")
    got = bucket.get_object(key)
    assert got.read() == body
    assert got.headers["x-oss-meta-a"] == "from s3"
    assert got.content_type == "image/png"
    assert got.etag == put["ETag"].strip('"').upper()
    assert "x-amz-meta-a" not in got.headers
    assert [o.key for o in bucket.list_objects(prefix=key).object_list] == [key]

    # A multipart object written by boto3 keeps its ETag through oss2.
    from boto3.s3.transfer import TransferConfig
    big = f"{version}/cross/multipart-from-s3.bin"
    data = os.urandom(12 * MiB)
    import io
    s3.upload_fileobj(io.BytesIO(data), oss_server.bucket, big,
                      Config=TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB))
    s3_head = s3.head_object(Bucket=oss_server.bucket, Key=big)
    oss_head = bucket.head_object(big)
    assert oss_head.etag == s3_head["ETag"].strip('"').upper()
    assert oss_head.object_type == "Multipart"
    assert oss_head.content_length == len(data)
    assert hashlib.md5(bucket.get_object(big).read()).digest() == hashlib.md5(data).digest()


def test_one_policy_for_both_dialects(oss_server, version):
    """The reference RAM policies (oss: actions, acs:oss resources) govern S3 requests the same
    way: the read role's token, used by boto3 and by oss2, is refused the same writes."""
    from botocore.exceptions import ClientError
    read_creds = issue(oss_server, "--role", "read")
    s3 = boto3_client(oss_server, read_creds)
    key = f"{version}/policy/s3-read-put.txt"
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=oss_server.bucket, Key=key, Body=b"denied")
    assert info.value.response["Error"]["Code"] == "AccessDenied"
    refused(lambda: sts_bucket(oss_server, read_creds, version).put_object(key, b"denied"), 403, "AccessDenied")
    assert_absent(oss_server, key)
    root_bucket(oss_server).put_object(key, b"readable")
    assert s3.get_object(Bucket=oss_server.bucket, Key=key)["Body"].read() == b"readable"
    assert sts_bucket(oss_server, read_creds, version).get_object(key).read() == b"readable"
    rw_s3 = boto3_client(oss_server, issue(oss_server, "--role", "readwrite"))
    with pytest.raises(ClientError) as info:
        rw_s3.put_object(Bucket=OTHER_BUCKET, Key=key, Body=b"denied")
    assert info.value.response["Error"]["Code"] == "AccessDenied"
    assert_absent(oss_server, key, OTHER_BUCKET)


# MARK: Addressing

@pytest.mark.parametrize("auth_version", VERSIONS)
def test_virtual_host_addressing(monkeypatch, auth_version):
    """Against a domain endpoint oss2 (like the mobile SDKs) addresses `bucket.<endpoint>`:
    with GatewayBaseDomain set the gateway takes the bucket from the Host, and both signature
    versions cover `/bucket/key`. The names resolve to loopback through a stub resolver in
    this process."""
    import socket
    server = Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET,
                     "GatewayBaseDomain": "oss.test"}).start()
    try:
        real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: real(
            "127.0.0.1" if host == "oss.test" or str(host).endswith(".oss.test") else host, *a, **k))
        creds = android_fetch(server.url)
        bucket = oss2.Bucket(sts_auth(creds, auth_version), f"http://oss.test:{server.gateway_port}", server.bucket, region=REGION)
        with captured_oss2_signing() as signing:
            bucket.put_object("vhost/a b ✓.txt", b"virtual", headers={"x-oss-meta-a": "v"})
            got = bucket.get_object("vhost/a b ✓.txt")
            assert got.read() == b"virtual" and got.headers["x-oss-meta-a"] == "v"
            assert [o.key for o in bucket.list_objects(prefix="vhost/").object_list] == ["vhost/a b ✓.txt"]
            bucket.append_object("vhost/log", 0, b"1")
            assert bucket.append_object("vhost/log", 1, b"2").next_position == 2
        virtual = f"http://{server.bucket}.oss.test:{server.gateway_port}/"
        assert signing["urls"] and all(url.startswith(virtual) for url in signing["urls"]), signing["urls"]
        url = bucket.sign_url("GET", "vhost/a b ✓.txt", 60)
        assert url.startswith(virtual)
        response = requests.get(url)
        assert response.status_code == 200 and response.content == b"virtual", response.text
        # Path style keeps working on the same server.
        assert sts_bucket(server, creds, auth_version).get_object("vhost/log").read() == b"12"
    finally:
        server.cleanup()


def answer_without_ids(response):
    """Status, body and headers, but for the date and the request id: what two answers to the same
    request share."""
    varying = {"date", "x-oss-request-id"}
    return (response.status_code, response.content,
            {k.lower(): v for k, v in response.headers.items() if k.lower() not in varying})


def test_a_small_objects_answer_is_the_same_from_memory(bucket, version):
    """The first whole GET reads the file; later ones are answered from memory on the connection's
    event loop. Both answers alike, header for header, but for the date and the request id."""
    key = f"{version}/fast/small.txt"
    bucket.put_object(key, b"0123456789", headers={"Content-Type": "text/plain", "x-oss-meta-owner": "me"})
    url = bucket.sign_url("GET", key, 60)
    ranged_from_file = requests.get(url, headers={"Range": "bytes=2-5"})
    from_file = requests.get(url)
    assert from_file.headers["x-oss-hash-crc64ecma"]
    assert answer_without_ids(requests.get(url)) == answer_without_ids(from_file)
    assert answer_without_ids(requests.get(url, headers={"Range": "bytes=2-5"})) == answer_without_ids(ranged_from_file)
    assert bucket.get_object(key).read() == b"0123456789"


def test_a_head_is_the_same_from_memory(bucket, version):
    """The first HEAD after a write reads the row from the index; later ones find it in memory and
    are answered on the connection's event loop. Both alike, but for the date and the request id."""
    key = f"{version}/fast/head.txt"
    bucket.put_object(key, b"0123456789", headers={"Content-Type": "text/plain", "x-oss-meta-owner": "me"})
    url = bucket.sign_url("HEAD", key, 60)
    from_index = requests.head(url)
    assert from_index.status_code == 200 and from_index.headers["x-oss-hash-crc64ecma"]
    assert from_index.headers["Content-Length"] == "10" and from_index.headers["x-oss-meta-owner"] == "me"
    assert answer_without_ids(requests.head(url)) == answer_without_ids(from_index)
    assert bucket.head_object(key).content_length == 10


# MARK: What the OSS SDKs expect of OSS (issue 39)

def v2_sdk(server, creds: dict = None) -> "oss_v2.Client":
    """Alibaba's current Python SDK (alibabacloud-oss-v2), path-style, with the root or the given
    temporary credentials (it signs V4)."""
    import alibabacloud_oss_v2 as oss_v2
    config = oss_v2.config.load_default()
    if creds is None:
        config.credentials_provider = oss_v2.credentials.StaticCredentialsProvider(ROOT_ACCESS_KEY_ID, ROOT_SECRET)
    else:
        config.credentials_provider = oss_v2.credentials.StaticCredentialsProvider(
            creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"])
    config.region = REGION
    config.endpoint = server.gateway_url
    config.use_path_style = True
    return oss_v2.Client(config)


def body_etag(result) -> str:
    """The ETag element of an answer's XML body (oss2 reads the header; OSS sends both)."""
    return ET.fromstring(result.resp.read()).findtext("ETag")


def test_etags_are_upper_case_in_oss_and_compared_without_case(oss_server, bucket, version):
    """OSS writes ETags in upper-case hex, in headers and XML alike; S3 in lower case. Clients
    send back what they were given, and either case matches."""
    def upper(etag):
        assert etag and etag == etag.upper() and any(c in "ABCDEF" for c in etag), etag
        return etag

    key = f"{version}/etag/object.txt"
    body = b"upper-case etag " * 10
    put = bucket.put_object(key, body)
    assert upper(put.etag) == md5_hex(body).upper()
    assert upper(bucket.get_object(key).etag) == put.etag
    assert upper(bucket.head_object(key).etag) == put.etag
    assert upper(bucket.get_object_meta(key).etag) == put.etag
    assert [upper(o.etag) for o in bucket.list_objects(prefix=key).object_list] == [put.etag]
    assert [upper(o.etag) for o in bucket.list_objects_v2(prefix=key).object_list] == [put.etag]
    assert boto3_client(oss_server).head_object(Bucket=oss_server.bucket, Key=key)["ETag"] == f'"{md5_hex(body)}"'

    copied = bucket.copy_object(oss_server.bucket, key, f"{version}/etag/copy.txt")
    assert upper(copied.etag) == put.etag
    assert body_etag(copied) == f'"{put.etag}"'
    appended = bucket.append_object(f"{version}/etag/append.log", 0, b"line\n")
    assert upper(appended.etag) == bucket.head_object(f"{version}/etag/append.log").etag

    # Conditions: the lower-case ETag matches the upper-case one.
    lower = f'"{md5_hex(body)}"'
    assert bucket.get_object(key, headers={"If-Match": lower}).read() == body
    refused(lambda: bucket.get_object(key, headers={"If-None-Match": lower}), 304, "")
    refused(lambda: bucket.put_object(key, b"x", headers={"If-Match": '"0123456789ABCDEF0123456789ABCDEF"'}),
            412, "PreconditionFailed")
    assert bucket.put_object(key, body, headers={"If-Match": lower}).etag == put.etag

    # Multipart: part ETags, the list of parts, the completed object; the part list may name the
    # parts in either case.
    mp = f"{version}/etag/multipart.bin"
    upload_id = bucket.init_multipart_upload(mp).upload_id
    parts = [os.urandom(100 * 1024), b"tail"]
    etags = [upper(bucket.upload_part(mp, upload_id, n + 1, data).etag) for n, data in enumerate(parts)]
    assert [upper(p.etag) for p in bucket.list_parts(mp, upload_id).parts] == etags
    done = bucket.complete_multipart_upload(mp, upload_id, [oss2.models.PartInfo(1, etags[0].lower()),
                                                            oss2.models.PartInfo(2, etags[1])])
    assert upper(done.etag).endswith("-2")
    assert body_etag(done) == f'"{done.etag}"'
    assert bucket.head_object(mp).etag == done.etag


def test_upload_part_copy_answers_its_etag(oss_server, bucket, version):
    """oss2 reads a copied part's ETag from the response header (OSS sends it there and in the
    body): the parts it copies then complete."""
    source = f"{version}/partcopy/source.bin"
    data = os.urandom(300 * 1024)
    bucket.put_object(source, data)
    target = f"{version}/partcopy/target.bin"
    upload_id = bucket.init_multipart_upload(target).upload_id
    ranges = [(0, 150 * 1024 - 1), (150 * 1024, len(data) - 1)]
    copied = [bucket.upload_part_copy(oss_server.bucket, source, r, target, upload_id, n + 1) for n, r in enumerate(ranges)]
    assert all(c.etag for c in copied), [dict(c.headers) for c in copied]
    assert [c.etag for c in copied] == [md5_hex(data[a:b + 1]).upper() for a, b in ranges]
    assert [body_etag(c) for c in copied] == [f'"{c.etag}"' for c in copied]
    bucket.complete_multipart_upload(target, upload_id, [oss2.models.PartInfo(n + 1, c.etag) for n, c in enumerate(copied)])
    assert bucket.get_object(target).read() == data


def test_v2_sdk_multipart_copy(oss_server, creds):
    """alibabacloud-oss-v2's Copier, multipart (UploadPartCopy per part, then Complete with the
    parts' ETags as the answers gave them, then its CRC-64 check against the source)."""
    import alibabacloud_oss_v2 as oss_v2
    client = v2_sdk(oss_server, creds)
    data = os.urandom(350 * 1024)
    client.put_object(oss_v2.models.PutObjectRequest(bucket=oss_server.bucket, key="v2sdk/copy/source.bin", body=data))
    copier = client.copier(part_size=100 * 1024, multipart_copy_threshold=100 * 1024, disable_shallow_copy=True)
    result = copier.copy(oss_v2.models.CopyObjectRequest(bucket=oss_server.bucket, key="v2sdk/copy/target.bin",
                                                         source_bucket=oss_server.bucket, source_key="v2sdk/copy/source.bin"))
    assert result.upload_id and result.etag.endswith('-4"'), (result.upload_id, result.etag)
    got = client.get_object(oss_v2.models.GetObjectRequest(bucket=oss_server.bucket, key="v2sdk/copy/target.bin"))
    assert got.body.read() == data


def test_object_exists_tells_a_missing_bucket(oss_server, version):
    """`object_exists` is GetObjectMeta sent as HEAD: without `x-oss-err` oss2 could not tell
    NoSuchBucket from NoSuchKey, and answered False for a bucket that is not there."""
    creds = issue(oss_server)
    missing = sts_bucket(oss_server, creds, version, "tollgate-never-created")
    with pytest.raises(oss2.exceptions.NoSuchBucket) as info:
        missing.object_exists("k")
    assert info.value.details.get("BucketName") == "tollgate-never-created"
    assert sts_bucket(oss_server, creds, version).object_exists(f"{version}/exists/never") is False


def test_v2_sdk_reads_the_code_of_a_head_error(oss_server, creds):
    import alibabacloud_oss_v2 as oss_v2
    client = v2_sdk(oss_server, creds)
    with pytest.raises(oss_v2.exceptions.OperationError) as info:
        client.head_object(oss_v2.models.HeadObjectRequest(bucket=oss_server.bucket, key="v2sdk/no/such/key"))
    error = info.value.unwrap()
    assert (error.status_code, error.code) == (404, "NoSuchKey"), error
    assert error.request_id == error.headers.get("x-oss-request-id")


def test_tags_of_later_appends_are_ignored(oss_server, bucket, version):
    """OSS takes an appendable object's tags from its first append only: a later append's tags are
    neither checked nor stored (nor need PutObjectTagging)."""
    key = f"{version}/append-tags/log"
    bucket.append_object(key, 0, b"one\n", headers={"x-oss-tagging": "stage=first"})
    bucket.append_object(key, 4, b"two\n", headers={"x-oss-tagging": "stage=second&bad=100%25"})
    bucket.append_object(key, 8, b"three\n", headers={"x-oss-tagging": "&".join(f"k{n}=v" for n in range(20))})
    assert bucket.get_object(key).read() == b"one\ntwo\nthree\n"
    assert [(t, v) for t, v in bucket.get_object_tagging(key).tag_set.tagging_rule.items()] == [("stage", "first")]
    # The first append's tags are checked, and need PutObjectTagging, which the readwrite role lacks.
    refused(lambda: bucket.append_object(f"{version}/append-tags/bad", 0, b"x", headers={"x-oss-tagging": "a=b%25"}),
            400, "InvalidTag")
    writer = sts_bucket(oss_server, issue(oss_server, "--role", "readwrite"), version)
    refused(lambda: writer.append_object(f"{version}/append-tags/denied", 0, b"x", headers={"x-oss-tagging": "a=b"}),
            403, "AccessDenied")
    writer.append_object(f"{version}/append-tags/writer", 0, b"x")
    assert writer.append_object(f"{version}/append-tags/writer", 1, b"y", headers={"x-oss-tagging": "a=b"}).next_position == 2


@pytest.mark.parametrize("tag", ["a=100%25", "percent%25=v", "a=x%26y", "at%40=v", "a=b!", "a=%28c%29"])
def test_tags_with_characters_oss_refuses(oss_server, bucket, version, tag):
    """OSS's tag keys and values hold letters, digits, spaces and `+ - = . _ : /` only."""
    key = f"{version}/tag-chars/object-{hashlib.md5(tag.encode()).hexdigest()}"
    refused(lambda: bucket.put_object(key, b"x", headers={"x-oss-tagging": tag}), 400, "InvalidTag")
    assert_absent(oss_server, key)
    bucket.put_object(key, b"x")
    name, _, value = tag.partition("=")
    from urllib.parse import unquote
    rule = oss2.models.TaggingRule()
    rule.add(unquote(name), unquote(value))
    refused(lambda: bucket.put_object_tagging(key, oss2.models.Tagging(rule)), 400, "InvalidTag")
    assert bucket.get_object_tagging(key).tag_set.tagging_rule == {}


def test_tags_with_characters_oss_takes(bucket, version):
    key = f"{version}/tag-chars/fine"
    bucket.put_object(key, b"x", headers={"x-oss-tagging": "Project%20Name=a+b-c.d_e:f/g%3Dh&%E9%A1%B9%E7%9B%AE=%E5%80%BC1"})
    assert bucket.get_object_tagging(key).tag_set.tagging_rule == {"Project Name": "a b-c.d_e:f/g=h", "项目": "值1"}


def test_complete_all(oss_server, bucket, version):
    """`x-oss-complete-all: yes` without a body completes with every uploaded part, in part-number
    order; with a body it is OSS's InvalidArgument, and the upload stays."""
    key = f"{version}/complete-all/object.bin"
    upload_id = bucket.init_multipart_upload(key, headers={"Content-Type": "video/mp4"}).upload_id
    parts = {2: os.urandom(100 * 1024), 1: os.urandom(100 * 1024), 5: b"last"}
    etags = {n: bucket.upload_part(key, upload_id, n, data).etag for n, data in parts.items()}
    error = refused(lambda: bucket.complete_multipart_upload(key, upload_id, [oss2.models.PartInfo(1, etags[1])],
                                                             headers={"x-oss-complete-all": "yes"}), 400, "InvalidArgument")
    assert error.details.get("ArgumentName") == "x-oss-complete-all", error.details
    assert_absent(oss_server, key)
    done = bucket.complete_multipart_upload(key, upload_id, None, headers={"x-oss-complete-all": "yes"})
    assert done.status == 200 and done.etag.endswith("-3")
    got = bucket.get_object(key)
    assert got.read() == parts[1] + parts[2] + parts[5]
    assert got.content_type == "video/mp4"
    # Nothing to complete: OSS's error for no part.
    empty = f"{version}/complete-all/empty.bin"
    empty_id = bucket.init_multipart_upload(empty).upload_id
    refused(lambda: bucket.complete_multipart_upload(empty, empty_id, None, headers={"x-oss-complete-all": "yes"}),
            400, "InvalidArgument")


def test_v2_sdk_complete_all(oss_server, creds):
    import alibabacloud_oss_v2 as oss_v2
    client = v2_sdk(oss_server, creds)
    key = "v2sdk/complete-all.bin"
    init = client.initiate_multipart_upload(oss_v2.models.InitiateMultipartUploadRequest(bucket=oss_server.bucket, key=key))
    data = [os.urandom(100 * 1024), b"end"]
    for n, chunk in enumerate(data):
        client.upload_part(oss_v2.models.UploadPartRequest(bucket=oss_server.bucket, key=key, upload_id=init.upload_id,
                                                           part_number=n + 1, body=chunk))
    client.complete_multipart_upload(oss_v2.models.CompleteMultipartUploadRequest(
        bucket=oss_server.bucket, key=key, upload_id=init.upload_id, complete_all="yes"))
    got = client.get_object(oss_v2.models.GetObjectRequest(bucket=oss_server.bucket, key=key))
    assert got.body.read() == b"".join(data)


CONTROL_KEYS = ["ctl/a\x01b", "ctl/tab\there", "ctl/line\nbreak", "ctl/cr\rhere", "ctl/amp & <lt> \"q\"", "ctl/\x1fend ✓"]


def test_batch_delete_url_encodes_keys(oss_server, bucket, version):
    """oss2 and the OSS SDKs send DeleteMultipleObjects with `encoding-type=url` and decode the
    keys of the answer: keys XML cannot carry (control characters) come back whole."""
    keys = [f"{version}/{k}" for k in CONTROL_KEYS]
    for key in keys:
        bucket.put_object(key, b"x")
    result = bucket.batch_delete_objects(keys)
    assert sorted(result.deleted_keys) == sorted(keys)
    assert [o.key for o in bucket.list_objects(prefix=f"{version}/ctl/").object_list] == []


def test_v2_sdk_delete_multiple_objects_decodes_keys(oss_server, creds):
    import alibabacloud_oss_v2 as oss_v2
    client = v2_sdk(oss_server, creds)
    keys = [f"v2sdk/{k}" for k in CONTROL_KEYS]
    for key in keys:
        client.put_object(oss_v2.models.PutObjectRequest(bucket=oss_server.bucket, key=key, body=b"x"))
    result = client.delete_multiple_objects(oss_v2.models.DeleteMultipleObjectsRequest(
        bucket=oss_server.bucket, objects=[oss_v2.models.DeleteObject(key=k) for k in keys]))
    assert sorted(d.key for d in result.deleted_objects) == sorted(keys)


def test_bucket_info_and_stat_as_oss_answers_them(oss_server):
    root = root_bucket(oss_server)
    info = root.get_bucket_info()
    assert info.comment == ""
    root.put_object("stat/one", b"12345")
    stat = root.get_bucket_stat()
    assert stat.standard_storage >= 5 and stat.standard_object_count >= 1
    for storage_class in ("infrequent_access", "archive", "cold_archive", "deep_cold_archive"):
        for counter in ("storage", "real_storage", "object_count"):
            assert getattr(stat, f"{storage_class}_{counter}") == 0, (storage_class, counter)
    assert stat.multipart_part_count is not None and stat.delete_marker_count == 0


def test_v2_sdk_bucket_stat(oss_server):
    import alibabacloud_oss_v2 as oss_v2
    stat = v2_sdk(oss_server).get_bucket_stat(oss_v2.models.GetBucketStatRequest(bucket=oss_server.bucket))
    assert (stat.infrequent_access_storage, stat.archive_real_storage, stat.cold_archive_object_count,
            stat.deep_cold_archive_storage) == (0, 0, 0, 0)


def test_cors_as_oss_answers_it(oss_server):
    """ResponseVary is always stated in OSS (false unless set); a negative MaxAgeSeconds is OSS's
    InvalidArgument, and still S3's MalformedXML."""
    root = root_bucket(oss_server)
    rule = oss2.models.CorsRule(allowed_origins=["https://app.example"], allowed_methods=["GET"], max_age_seconds=-1)
    error = refused(lambda: root.put_bucket_cors(oss2.models.BucketCors([rule])), 400, "InvalidArgument")
    assert error.details.get("ArgumentName") == "MaxAgeSeconds", error.details
    from botocore.exceptions import ClientError
    with pytest.raises(ClientError) as info:
        boto3_client(oss_server).put_bucket_cors(Bucket=oss_server.bucket, CORSConfiguration={"CORSRules": [
            {"AllowedOrigins": ["https://app.example"], "AllowedMethods": ["GET"], "MaxAgeSeconds": -1}]})
    assert info.value.response["Error"]["Code"] == "MalformedXML"
    try:
        rule.max_age_seconds = 60
        root.put_bucket_cors(oss2.models.BucketCors([rule]))
        cors = root.get_bucket_cors()
        assert cors.response_vary is False and cors.rules[0].max_age_seconds == 60
        root.put_bucket_cors(oss2.models.BucketCors([rule], response_vary=True))
        assert root.get_bucket_cors().response_vary is True
    finally:
        root.delete_bucket_cors()


# MARK: Signature V2 (OSS2)

def test_signature_v2_with_every_oss2_signer(oss_server, creds):
    """`OSS2 AccessKeyId:…,AdditionalHeaders:…,Signature:…` from oss2's AuthV2 (root credentials),
    StsAuth with auth_version v2 and ProviderAuthV2 (temporary ones): objects, listings,
    multipart, buckets."""
    sts = oss2.Bucket(oss2.StsAuth(creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"],
                                   auth_version=oss2.AUTH_VERSION_2), oss_server.gateway_url, oss_server.bucket)
    root = oss2.Bucket(oss2.AuthV2(ROOT_ACCESS_KEY_ID, ROOT_SECRET), oss_server.gateway_url, oss_server.bucket)
    with captured_oss2_signing() as signing:
        sts.put_object("sigv2/a b+c?d=e&f.txt", b"signed with OSS2", headers={"x-oss-meta-a": "1"})
        assert root.get_object("sigv2/a b+c?d=e&f.txt", byte_range=(0, 5)).read() == b"signed"
        assert [o.key for o in sts.list_objects(prefix="sigv2/", delimiter="/", max_keys=10).object_list] == ["sigv2/a b+c?d=e&f.txt"]
        assert [o.key for o in oss2.ObjectIteratorV2(root, prefix="sigv2/", max_keys=1)] == ["sigv2/a b+c?d=e&f.txt"]
        upload_id = sts.init_multipart_upload("sigv2/mp").upload_id
        etag = sts.upload_part("sigv2/mp", upload_id, 1, b"only part").etag
        assert [p.etag for p in sts.list_parts("sigv2/mp", upload_id).parts] == [etag]
        sts.complete_multipart_upload("sigv2/mp", upload_id, [oss2.models.PartInfo(1, etag)])
        assert root.get_object("sigv2/mp").read() == b"only part"
        names = [b.name for b in oss2.Service(oss2.AuthV2(ROOT_ACCESS_KEY_ID, ROOT_SECRET), oss_server.gateway_url).list_buckets().buckets]
        assert oss_server.bucket in names
        sts.delete_object("sigv2/a b+c?d=e&f.txt")
    authorizations = [r["authorization"] for r in signing["requests"]]
    assert all(a.startswith("OSS2 AccessKeyId:") for a in authorizations), authorizations
    # oss2 signs the Range header as an additional header.
    assert any("AdditionalHeaders:range" in a for a in authorizations), authorizations
    assert all(r.get("x-oss-security-token") for r, a in zip(signing["requests"], authorizations)
               if a.startswith(f"OSS2 AccessKeyId:{creds['AccessKeyId']},"))


def test_signature_v2_signs_every_query_parameter(oss_server, creds):
    """A V2 presigned URL covers its whole query: a parameter added to it, one that selects
    another operation or one that does not, breaks the signature (V1 signs sub-resources only)."""
    bucket = sts_bucket(oss_server, creds, "v2")
    key = "sigv2/presigned.txt"
    bucket.put_object(key, b"presigned")
    url = bucket.sign_url("GET", key, 60, params={"response-content-type": "text/plain"})
    assert "x-oss-signature-version=OSS2" in url and "security-token=" in url
    response = requests.get(url)
    assert response.status_code == 200 and response.content == b"presigned" and response.headers["Content-Type"] == "text/plain"
    for extra in ("objectMeta", "acl", "prefix=x", "response-content-type=text/html", "versionId=null"):
        changed = requests.get(url + "&" + extra)
        assert changed.status_code == 403, (extra, changed.text)
        assert ET.fromstring(changed.content).findtext("Code") == "SignatureDoesNotMatch", extra
        assert changed.headers["x-oss-request-id"]
    # Header-signed requests sign their query too: a query parameter oss2 did not send is refused.
    with captured_oss2_signing() as signing:
        bucket.get_object(key)
    headers = {k: v for k, v in signing["requests"][-1].items() if v is not None}
    changed = requests.get(signing["urls"][-1] + "?x-oss-traffic-limit=819200", headers=headers)
    assert changed.status_code == 403 and ET.fromstring(changed.content).findtext("Code") == "SignatureDoesNotMatch"


def test_signature_v2_errors_speak_oss(oss_server, creds):
    """Malformed or refused V2 requests are answered as OSS XML with OSS's codes."""
    url = f"{oss_server.gateway_url}/{oss_server.bucket}/sigv2/x"
    date = format_datetime(datetime.now(timezone.utc), usegmt=True)
    for authorization, status, code in [
        ("OSS2 AccessKeyId:TGROOTOSS", 400, "InvalidArgument"),
        ("OSS2 AccessKeyId:TGROOTOSS,Signature:abc,Extra:1", 400, "InvalidArgument"),
        ("OSS2 AccessKeyId:TGROOTOSS,Signature:bm90IGl0", 403, "SignatureDoesNotMatch"),
        ("OSS2 AccessKeyId:NOSUCHKEY,Signature:bm90IGl0", 403, "InvalidAccessKeyId"),
        (f"OSS2 AccessKeyId:{creds['AccessKeyId']},Signature:bm90IGl0", 403, "InvalidSecurityToken"),
        ("OSS3 AccessKeyId:TGROOTOSS,Signature:bm90IGl0", 400, "InvalidArgument"),
    ]:
        response = requests.get(url, headers={"Authorization": authorization, "Date": date})
        assert response.status_code == status, (authorization, response.text)
        error = ET.fromstring(response.content)
        assert error.findtext("Code") == code, (authorization, response.text)
        assert error.findtext("RequestId") == response.headers["x-oss-request-id"]
        assert "x-amz-request-id" not in response.headers and error.find("Resource") is None
        assert "AWS4" not in error.findtext("Message"), response.text
