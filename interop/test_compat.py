"""Issue 15 compatibility points, each with the client that sends the request: HeadBucket under
RAM policies (boto3, pyarrow, `policy simulate`), OSS GetBucketInfo (oss2, alibabacloud-oss-v2),
and create-only writes: OSS `x-oss-forbid-overwrite` (oss2, alibabacloud-oss-v2) and S3
`If-None-Match: *` (boto3, OpenDAL)."""
import os
import subprocess

import alibabacloud_oss_v2 as oss_v2
import oss2
import pytest
from botocore.exceptions import ClientError

from conftest import ROOT, ROOT_SECRET, binary
from oss_helpers import REGION, issue, refused, sts_bucket
from s3_helpers import ROOT_ACCESS_KEY_ID, error_of, issued_credentials, s3_client

# Runs on the local store and again on the S3 backend over RGW (conftest.BACKENDS).
ON_RGW_TOO = True

BUCKET = "tollgate"


def root_bucket(server, name: str = BUCKET) -> oss2.Bucket:
    return oss2.Bucket(oss2.Auth(ROOT_ACCESS_KEY_ID, ROOT_SECRET), server.gateway_url, name, connect_timeout=30)


def v2_client(server) -> "oss_v2.Client":
    config = oss_v2.config.load_default()
    config.credentials_provider = oss_v2.credentials.StaticCredentialsProvider(ROOT_ACCESS_KEY_ID, ROOT_SECRET)
    config.region = REGION
    config.endpoint = server.gateway_url
    config.use_path_style = True
    return oss_v2.Client(config)


# MARK: HeadBucket is s3:ListBucket, whose RAM name is oss:ListObjects

def test_head_bucket_under_the_read_write_role(gw):
    readwrite = s3_client(gw, issued_credentials(gw, "--role", "readwrite"))
    assert readwrite.head_bucket(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"] == 200
    reader = s3_client(gw, issued_credentials(gw, "--role", "read"))
    assert reader.head_bucket(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"] == 200
    # The isolated role may list its own prefix only; HEAD names no prefix.
    alice = s3_client(gw, issued_credentials(gw, "--user", "alice", "--role", "isolated"))
    with pytest.raises(ClientError) as denied:
        alice.head_bucket(Bucket=BUCKET)
    assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_pyarrow_probes_the_bucket_under_the_read_write_role(gw):
    from pyarrow import fs
    credentials = issued_credentials(gw, "--role", "readwrite")
    s3 = fs.S3FileSystem(access_key=credentials["AccessKeyId"], secret_key=credentials["AccessKeySecret"],
                         session_token=credentials["SecurityToken"], endpoint_override=gw.gateway_url,
                         scheme="http", region="us-east-1", allow_bucket_creation=False)
    assert s3.get_file_info(BUCKET).type == fs.FileType.Directory
    s3.create_dir(f"{BUCKET}/arrow")
    with s3.open_output_stream(f"{BUCKET}/arrow/data.bin") as out:
        out.write(b"columns")
    with s3.open_input_stream(f"{BUCKET}/arrow/data.bin") as stream:
        assert stream.read() == b"columns"


def test_policy_simulate_agrees(gw):
    result = subprocess.run([binary(), "policy", "simulate", "--config", "config.json", "--policy",
                             "policy/bucket_read_write_policy.txt", "--action", "s3:ListBucket",
                             "--resource", "arn:aws:s3:::tollgate"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    lines = result.stdout.splitlines()
    assert any(l.strip().startswith("headBucket (oss:ListObjects, s3:ListBucket): Allow") for l in lines), result.stdout
    assert any(l.strip().startswith("getBucketInfo (oss:GetBucketInfo, s3:ListBucket): Deny") for l in lines), result.stdout


# MARK: OSS GetBucketInfo

def test_oss2_get_bucket_info(gw):
    info = root_bucket(gw).get_bucket_info()
    assert info.name == BUCKET
    assert info.location.startswith("oss-")
    assert info.storage_class == "Standard"
    assert info.acl.grant == "private"
    assert info.owner.id
    assert info.creation_date
    assert info.data_redundancy_type == "LRS"
    refused(lambda: root_bucket(gw, "no-such-bucket").get_bucket_info(), 404, "NoSuchBucket")


def test_v2_sdk_get_bucket_info(gw):
    result = v2_client(gw).get_bucket_info(oss_v2.models.GetBucketInfoRequest(bucket=BUCKET))
    assert result.bucket_info.name == BUCKET
    assert result.bucket_info.storage_class == "Standard"
    assert result.bucket_info.acl == "private"


def test_bucket_stat_and_object_meta(gw):
    s3 = root_s3(gw)
    s3.create_bucket(Bucket="stat-bucket")
    bucket = root_bucket(gw, "stat-bucket")
    bucket.put_object("a", b"12345")
    bucket.put_object("b", b"123")
    upload = bucket.init_multipart_upload("c").upload_id
    bucket.upload_part("c", upload, 1, b"part")
    stat = bucket.get_bucket_stat()
    assert (stat.storage_size_in_bytes, stat.object_count, stat.multi_part_upload_count) == (8, 2, 1)
    assert stat.standard_object_count == 2 and stat.multipart_part_count == 1 and stat.last_modified_time > 0
    v2 = v2_client(gw).get_bucket_stat(oss_v2.models.GetBucketStatRequest(bucket="stat-bucket"))
    assert (v2.storage, v2.object_count, v2.multi_part_upload_count) == (8, 2, 1)
    meta = bucket.get_object_meta("a")
    assert meta.content_length == 5 and meta.etag and meta.last_modified > 0
    v2meta = v2_client(gw).get_object_meta(oss_v2.models.GetObjectMetaRequest(bucket="stat-bucket", key="a"))
    assert v2meta.content_length == 5 and v2meta.etag
    bucket.abort_multipart_upload("c", upload)
    refused(lambda: root_bucket(gw, "no-such-bucket").get_bucket_stat(), 404, "NoSuchBucket")


def test_get_bucket_info_needs_its_own_action(gw):
    # The read-write role grants oss:ListObjects, not oss:GetBucketInfo.
    writer = sts_bucket(gw, issue(gw, "--role", "readwrite"), "v1")
    refused(lambda: writer.get_bucket_info(), 403, "AccessDenied")


# MARK: x-oss-forbid-overwrite

FORBID = {"x-oss-forbid-overwrite": "true"}


def test_oss2_forbid_overwrite_keeps_the_object(gw):
    bucket = root_bucket(gw)
    bucket.put_object("create-only/a.txt", b"first", headers=FORBID)
    refused(lambda: bucket.put_object("create-only/a.txt", b"second", headers=FORBID), 409, "FileAlreadyExists")
    assert bucket.get_object("create-only/a.txt").read() == b"first"
    # false, or no header: overwrite as usual.
    bucket.put_object("create-only/a.txt", b"third", headers={"x-oss-forbid-overwrite": "false"})
    assert bucket.get_object("create-only/a.txt").read() == b"third"

    bucket.put_object("create-only/source.txt", b"source")
    refused(lambda: bucket.copy_object(BUCKET, "create-only/source.txt", "create-only/a.txt", headers=FORBID),
            409, "FileAlreadyExists")
    bucket.copy_object(BUCKET, "create-only/source.txt", "create-only/copy.txt", headers=FORBID)
    assert bucket.get_object("create-only/a.txt").read() == b"third"

    refused(lambda: bucket.init_multipart_upload("create-only/a.txt", headers=FORBID), 409, "FileAlreadyExists")
    # Checked again, atomically, at completion: the key appeared while the upload ran.
    upload_id = bucket.init_multipart_upload("create-only/late.txt", headers=FORBID).upload_id
    part = bucket.upload_part("create-only/late.txt", upload_id, 1, b"multipart")
    bucket.put_object("create-only/late.txt", b"raced")
    parts = [oss2.models.PartInfo(1, part.etag)]
    refused(lambda: bucket.complete_multipart_upload("create-only/late.txt", upload_id, parts, headers=FORBID),
            409, "FileAlreadyExists")
    assert bucket.get_object("create-only/late.txt").read() == b"raced"
    bucket.abort_multipart_upload("create-only/late.txt", upload_id)


def test_v2_sdk_forbid_overwrite(gw):
    client = v2_client(gw)
    client.put_object(oss_v2.models.PutObjectRequest(bucket=BUCKET, key="create-only/v2.txt", body=b"one",
                                                     forbid_overwrite=True))
    with pytest.raises(oss_v2.exceptions.OperationError) as info:
        client.put_object(oss_v2.models.PutObjectRequest(bucket=BUCKET, key="create-only/v2.txt", body=b"two",
                                                         forbid_overwrite=True))
    error = info.value.unwrap()
    assert error.status_code == 409 and error.code == "FileAlreadyExists"
    got = client.get_object(oss_v2.models.GetObjectRequest(bucket=BUCKET, key="create-only/v2.txt"))
    assert got.body.read() == b"one"


def test_opendal_if_not_exists_over_s3(gw):
    # OpenDAL's OSS service addresses buckets by virtual host only (bucket.127.0.0.1 is no
    # address); its S3 service sends the same create-only write as If-None-Match: *.
    import opendal
    op = opendal.Operator("s3", bucket=BUCKET, endpoint=gw.gateway_url, access_key_id=ROOT_ACCESS_KEY_ID,
                          secret_access_key=ROOT_SECRET, region="us-east-1")
    op.write("create-only/dal.txt", b"one", if_not_exists=True)
    with pytest.raises(opendal.exceptions.ConditionNotMatch):
        op.write("create-only/dal.txt", b"two", if_not_exists=True)
    assert bytes(op.read("create-only/dal.txt")) == b"one"


def test_s3_if_none_match_star_still_refuses_with_412(gw):
    s3 = s3_client(gw, access_key_id=ROOT_ACCESS_KEY_ID, secret=ROOT_SECRET)
    s3.put_object(Bucket=BUCKET, Key="create-only/s3.txt", Body=b"one", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=BUCKET, Key="create-only/s3.txt", Body=b"two", IfNoneMatch="*")
    assert error_of(info) == ("PreconditionFailed", 412)
    # The OSS header means nothing to S3 clients' requests.
    s3.put_object(Bucket=BUCKET, Key="create-only/s3.txt", Body=b"three")
    assert s3.get_object(Bucket=BUCKET, Key="create-only/s3.txt")["Body"].read() == b"three"


# MARK: The unversioned store, as versioning-aware tools see it

def root_s3(server):
    return s3_client(server, access_key_id=ROOT_ACCESS_KEY_ID, secret=ROOT_SECRET)


def test_cleanup_path_of_generic_tools(gw):
    """List versions, delete them by version id, delete the bucket: what test teardown code and
    cleanup tools do, with an unfinished multipart upload left in the bucket."""
    s3 = root_s3(gw)
    s3.create_bucket(Bucket="cleanup")
    keys = [f"dir/{i}.txt" for i in range(5)] + ["top.txt", "z/deep/k"]
    for key in keys:
        s3.put_object(Bucket="cleanup", Key=key, Body=key.encode())
    s3.create_multipart_upload(Bucket="cleanup", Key="unfinished.bin")
    versions = []
    pages = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket="cleanup", PaginationConfig={"PageSize": 3}):
        pages += 1
        assert page.get("DeleteMarkers", []) == []
        for version in page.get("Versions", []):
            assert version["VersionId"] == "null" and version["IsLatest"] is True
            versions.append({"Key": version["Key"], "VersionId": version["VersionId"]})
    assert pages == 3
    assert sorted(v["Key"] for v in versions) == sorted(keys)
    deleted = s3.delete_objects(Bucket="cleanup", Delete={"Objects": versions}, BypassGovernanceRetention=True)
    assert sorted((d["Key"], d["VersionId"]) for d in deleted["Deleted"]) == sorted((k, "null") for k in keys)
    assert "Errors" not in deleted
    s3.delete_bucket(Bucket="cleanup")
    with pytest.raises(ClientError) as gone:
        s3.head_bucket(Bucket="cleanup")
    assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_s3fs_removes_a_bucket_recursively(gw):
    import s3fs
    s3 = root_s3(gw)
    s3.create_bucket(Bucket="s3fs-cleanup")
    for i in range(3):
        s3.put_object(Bucket="s3fs-cleanup", Key=f"a/{i}", Body=b"x")
    s3.create_multipart_upload(Bucket="s3fs-cleanup", Key="a/unfinished")
    fs = s3fs.S3FileSystem(key=ROOT_ACCESS_KEY_ID, secret=ROOT_SECRET, client_kwargs={"endpoint_url": gw.gateway_url, "region_name": "us-east-1"})
    fs.rm("s3fs-cleanup", recursive=True)
    assert "s3fs-cleanup" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_list_object_versions_paging_and_prefixes(gw):
    s3 = root_s3(gw)
    for key in ("ver/a", "ver/b", "ver/sub/c", "ver/sub/d", "ver/e"):
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"v")
    first = s3.list_object_versions(Bucket=BUCKET, Prefix="ver/", Delimiter="/", MaxKeys=2)
    assert [v["Key"] for v in first["Versions"]] == ["ver/a", "ver/b"]
    assert first["IsTruncated"] is True
    assert first["NextKeyMarker"] == "ver/b" and first["NextVersionIdMarker"] == "null"
    rest = s3.list_object_versions(Bucket=BUCKET, Prefix="ver/", Delimiter="/", KeyMarker="ver/b", VersionIdMarker="null")
    assert [v["Key"] for v in rest["Versions"]] == ["ver/e"]
    assert [p["Prefix"] for p in rest["CommonPrefixes"]] == ["ver/sub/"]
    assert rest["IsTruncated"] is False
    with pytest.raises(ClientError) as bad:
        s3.list_object_versions(Bucket=BUCKET, KeyMarker="ver/a", VersionIdMarker="3HL4kqtJlcpXroDTDmJ")
    assert error_of(bad) == ("InvalidArgument", 400)


def test_quiet_delete_lists_only_errors(gw):
    s3 = root_s3(gw)
    s3.put_object(Bucket=BUCKET, Key="quiet/a", Body=b"a")
    result = s3.delete_objects(Bucket=BUCKET, Delete={"Quiet": True, "Objects": [
        {"Key": "quiet/a", "VersionId": "null"}, {"Key": "quiet/b", "VersionId": "3HL4kqtJlcpXroDTDmJ"}]})
    assert "Deleted" not in result
    assert [(e["Key"], e["Code"]) for e in result["Errors"]] == [("quiet/b", "NoSuchVersion")]
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="quiet/")


def test_bucket_settings_reads(gw):
    s3 = root_s3(gw)
    s3.put_object(Bucket=BUCKET, Key="acl/object", Body=b"x")
    assert "Status" not in s3.get_bucket_versioning(Bucket=BUCKET)
    for acl in (s3.get_bucket_acl(Bucket=BUCKET), s3.get_object_acl(Bucket=BUCKET, Key="acl/object")):
        assert acl["Owner"]["ID"]
        assert [(g["Grantee"]["ID"], g["Grantee"]["Type"], g["Permission"]) for g in acl["Grants"]] == \
            [(acl["Owner"]["ID"], "CanonicalUser", "FULL_CONTROL")]
    not_configured = {
        "get_bucket_lifecycle_configuration": "NoSuchLifecycleConfiguration",
        "get_bucket_policy": "NoSuchBucketPolicy",
        "get_bucket_encryption": "ServerSideEncryptionConfigurationNotFoundError",
        "get_bucket_cors": "NoSuchCORSConfiguration",
        "get_bucket_tagging": "NoSuchTagSet",
        "get_bucket_website": "NoSuchWebsiteConfiguration",
    }
    for method, code in not_configured.items():
        with pytest.raises(ClientError) as info:
            getattr(s3, method)(Bucket=BUCKET)
        assert error_of(info) == (code, 404), method
    with pytest.raises(ClientError) as missing:
        s3.get_bucket_versioning(Bucket="no-such-bucket")
    assert error_of(missing) == ("NoSuchBucket", 404)
    # Writes stay unsupported, and say so.
    with pytest.raises(ClientError) as write:
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    assert error_of(write) == ("NotImplemented", 501)


def test_bucket_settings_need_their_actions(gw):
    # The read-write role grants object actions and oss:ListObjects only.
    s3 = s3_client(gw, issued_credentials(gw, "--role", "readwrite"))
    for call in (lambda: s3.get_bucket_acl(Bucket=BUCKET), lambda: s3.get_bucket_versioning(Bucket=BUCKET),
                 lambda: s3.list_object_versions(Bucket=BUCKET)):
        with pytest.raises(ClientError) as info:
            call()
        assert error_of(info) == ("AccessDenied", 403)


def test_oss2_reads_acl_and_versions(gw):
    bucket = root_bucket(gw)
    bucket.put_object("oss-acl/object", b"x")
    assert bucket.get_bucket_acl().acl == "private"
    assert bucket.get_object_acl("oss-acl/object").acl == "default"
    versions = bucket.list_object_versions(prefix="oss-acl/")
    assert [(v.key, v.versionid, v.is_latest) for v in versions.versions] == [("oss-acl/object", "null", True)]


def test_create_bucket_again_and_bucket_names(gw):
    s3 = root_s3(gw)
    s3.create_bucket(Bucket="again")
    assert s3.create_bucket(Bucket="again")["ResponseMetadata"]["HTTPStatusCode"] == 200
    for name in ("ab", "a" * 64, "Upper-Case", "under_score", "two..dots", "dot.-dash", "192.168.1.1", "-leading"):
        with pytest.raises(ClientError) as info:
            s3.create_bucket(Bucket=name)
        assert error_of(info) == ("InvalidBucketName", 400), name
    s3.delete_bucket(Bucket="again")


# MARK: encoding-type=url on every listing

def signed_get(server, path: str, query: str) -> "requests.Response":
    """A GET signed by botocore's own SigV4 signer with the root credentials (for listings whose
    boto3 call has no EncodingType parameter)."""
    import requests
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    request = AWSRequest(method="GET", url=f"{server.gateway_url}{path}?{query}")
    S3SigV4Auth(Credentials(ROOT_ACCESS_KEY_ID, ROOT_SECRET), "s3", "us-east-1").add_auth(request)
    return requests.get(request.url, headers=dict(request.headers), timeout=30)


def test_encoding_type_url_on_every_listing(gw):
    s3 = root_s3(gw)
    odd = ["enc/\nnewline", "enc/a b+c", "enc/\x01control", "enc/\u00fc"]
    for key in odd:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    # boto3 asks v1, v2 and versions listings for encoding-type=url itself, and decodes them.
    assert sorted(o["Key"] for o in s3.list_objects(Bucket=BUCKET, Prefix="enc/")["Contents"]) == sorted(odd)
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="enc/")["Contents"]) == sorted(odd)
    assert sorted(v["Key"] for v in s3.list_object_versions(Bucket=BUCKET, Prefix="enc/")["Versions"]) == sorted(odd)
    # A prefix of "\n" round-trips.
    s3.put_object(Bucket=BUCKET, Key="\nline", Body=b"x")
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="\n")
    assert listed["Prefix"] == "\n" and [o["Key"] for o in listed["Contents"]] == ["\nline"]
    versions = s3.list_object_versions(Bucket=BUCKET, Prefix="\n")
    assert versions["Prefix"] == "\n" and [v["Key"] for v in versions["Versions"]] == ["\nline"]
    # Uploads and parts: boto3 does not decode these, so the encoded form is what arrives.
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key="enc/\nupload")["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key="enc/\nupload", UploadId=upload, PartNumber=1, Body=b"part")
    uploads = s3.list_multipart_uploads(Bucket=BUCKET, Prefix="enc/", EncodingType="url")
    assert uploads["EncodingType"] == "url"
    assert [u["Key"] for u in uploads["Uploads"]] == ["enc/%0Aupload"]
    parts = signed_get(gw, f"/{BUCKET}/enc/%0Aupload", f"encoding-type=url&uploadId={upload}")
    assert parts.status_code == 200, parts.text
    assert "<Key>enc/%0Aupload</Key>" in parts.text and "<EncodingType>url</EncodingType>" in parts.text
    bad = signed_get(gw, f"/{BUCKET}", "encoding-type=base64&versions=")
    assert bad.status_code == 400 and "<Code>InvalidArgument</Code>" in bad.text
    s3.abort_multipart_upload(Bucket=BUCKET, Key="enc/\nupload", UploadId=upload)


def test_complete_multipart_upload_is_idempotent(gw):
    s3 = root_s3(gw)
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key="retry/object")["UploadId"]
    part = s3.upload_part(Bucket=BUCKET, Key="retry/object", UploadId=upload, PartNumber=1, Body=b"only part")
    parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    first = s3.complete_multipart_upload(Bucket=BUCKET, Key="retry/object", UploadId=upload, MultipartUpload=parts)
    # The answer was lost; the SDK retries the same request.
    again = s3.complete_multipart_upload(Bucket=BUCKET, Key="retry/object", UploadId=upload, MultipartUpload=parts)
    assert again["ETag"] == first["ETag"] and again["Key"] == "retry/object"
    assert s3.get_object(Bucket=BUCKET, Key="retry/object")["Body"].read() == b"only part"
    with pytest.raises(ClientError) as other:
        s3.complete_multipart_upload(Bucket=BUCKET, Key="retry/object", UploadId=upload,
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"' + "0" * 32 + '"'}]})
    assert error_of(other) == ("NoSuchUpload", 404)


# MARK: Object tagging

def test_object_tagging_with_boto3(gw):
    s3 = root_s3(gw)
    s3.put_object(Bucket=BUCKET, Key="tags/a", Body=b"x", Tagging="project=blue&owner=ann%20lee")
    assert s3.get_object_tagging(Bucket=BUCKET, Key="tags/a")["TagSet"] == [
        {"Key": "owner", "Value": "ann lee"}, {"Key": "project", "Value": "blue"}]
    head = s3.head_object(Bucket=BUCKET, Key="tags/a")
    got = s3.get_object(Bucket=BUCKET, Key="tags/a")
    assert got["TagCount"] == 2 and head["ETag"] == got["ETag"]
    s3.put_object_tagging(Bucket=BUCKET, Key="tags/a", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    assert s3.get_object_tagging(Bucket=BUCKET, Key="tags/a")["TagSet"] == [{"Key": "k", "Value": "v"}]
    assert s3.head_object(Bucket=BUCKET, Key="tags/a")["ETag"] == head["ETag"]
    # Copies keep the source's tags unless told to replace them.
    s3.copy_object(Bucket=BUCKET, Key="tags/copy", CopySource={"Bucket": BUCKET, "Key": "tags/a"})
    assert s3.get_object_tagging(Bucket=BUCKET, Key="tags/copy")["TagSet"] == [{"Key": "k", "Value": "v"}]
    s3.copy_object(Bucket=BUCKET, Key="tags/copy", CopySource={"Bucket": BUCKET, "Key": "tags/a"},
                   MetadataDirective="REPLACE", ContentType="text/plain")
    assert s3.get_object_tagging(Bucket=BUCKET, Key="tags/copy")["TagSet"] == [{"Key": "k", "Value": "v"}]
    s3.copy_object(Bucket=BUCKET, Key="tags/copy", CopySource={"Bucket": BUCKET, "Key": "tags/a"},
                   TaggingDirective="REPLACE", Tagging="new=1")
    assert s3.get_object_tagging(Bucket=BUCKET, Key="tags/copy")["TagSet"] == [{"Key": "new", "Value": "1"}]
    # Multipart uploads take their tags at initiation.
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key="tags/mp", Tagging="m=1")["UploadId"]
    part = s3.upload_part(Bucket=BUCKET, Key="tags/mp", UploadId=upload, PartNumber=1, Body=b"p")
    s3.complete_multipart_upload(Bucket=BUCKET, Key="tags/mp", UploadId=upload,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert s3.get_object_tagging(Bucket=BUCKET, Key="tags/mp")["TagSet"] == [{"Key": "m", "Value": "1"}]
    s3.delete_object_tagging(Bucket=BUCKET, Key="tags/a")
    assert s3.get_object_tagging(Bucket=BUCKET, Key="tags/a")["TagSet"] == []
    assert "TagCount" not in s3.get_object(Bucket=BUCKET, Key="tags/a")
    # S3's limits, refused before anything is stored.
    for tagging in ("&".join(f"k{i}=v" for i in range(11)), "a=1&a=2", "=empty", "k=" + "v" * 257):
        with pytest.raises(ClientError) as bad:
            s3.put_object(Bucket=BUCKET, Key="tags/refused", Body=b"x", Tagging=tagging)
        assert error_of(bad) == ("InvalidTag", 400), tagging
    with pytest.raises(ClientError) as absent:
        s3.head_object(Bucket=BUCKET, Key="tags/refused")
    with pytest.raises(ClientError) as missing:
        s3.get_object_tagging(Bucket=BUCKET, Key="tags/none")
    assert error_of(missing) == ("NoSuchKey", 404)


def test_object_tagging_needs_its_actions(gw):
    reader = s3_client(gw, issued_credentials(gw, "--role", "readwrite"))
    root_s3(gw).put_object(Bucket=BUCKET, Key="tags/policy", Body=b"x")
    with pytest.raises(ClientError) as denied:
        reader.put_object_tagging(Bucket=BUCKET, Key="tags/policy", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    assert error_of(denied) == ("AccessDenied", 403)
    # Tags given with a write need the same action: a role that may put but not tag cannot
    # tag by putting, copying or starting an upload, and nothing is stored.
    for call in (lambda: reader.put_object(Bucket=BUCKET, Key="tags/by-put", Body=b"x", Tagging="k=v"),
                 lambda: reader.copy_object(Bucket=BUCKET, Key="tags/by-put", CopySource={"Bucket": BUCKET, "Key": "tags/policy"},
                                            TaggingDirective="REPLACE", Tagging="k=v"),
                 lambda: reader.create_multipart_upload(Bucket=BUCKET, Key="tags/by-put", Tagging="k=v")):
        with pytest.raises(ClientError) as tagged:
            call()
        assert error_of(tagged) == ("AccessDenied", 403)
    with pytest.raises(ClientError):
        root_s3(gw).head_object(Bucket=BUCKET, Key="tags/by-put")
    assert not root_s3(gw).list_multipart_uploads(Bucket=BUCKET, Prefix="tags/by-put").get("Uploads")
    # The same write without tags is the role's to make.
    reader.put_object(Bucket=BUCKET, Key="tags/by-put", Body=b"x")


def test_object_tagging_with_oss2(gw):
    bucket = root_bucket(gw)
    bucket.put_object("tags/oss", b"x", headers={"x-oss-tagging": "a=1&b=2"})
    assert bucket.get_object_tagging("tags/oss").tag_set.tagging_rule == {"a": "1", "b": "2"}
    rule = oss2.models.TaggingRule()
    rule.add("c", "3")
    bucket.put_object_tagging("tags/oss", oss2.models.Tagging(rule))
    assert bucket.get_object_tagging("tags/oss").tag_set.tagging_rule == {"c": "3"}
    bucket.delete_object_tagging("tags/oss")
    assert bucket.get_object_tagging("tags/oss").tag_set.tagging_rule == {}
