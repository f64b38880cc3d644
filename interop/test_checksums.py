"""Issue 15 points 8 and 10: stored checksums, with the clients that send and check them.

S3: boto3 sends a CRC-32 (trailer) with every upload by default, other algorithms when asked,
per part in multipart uploads, and `x-amz-checksum-mode: ENABLED` on reads, after which it
validates the body against what the gateway returns. OSS: oss2 and alibabacloud-oss-v2 compare
their own CRC-64 with `x-oss-hash-crc64ecma` on uploads, appends, parts, completed uploads and
whole-object reads; when the header is missing the check is silently skipped, so every test here
asserts the header is there and equal to the CRC-64 computed locally.
"""
import base64
import io
import os
import zlib

import alibabacloud_oss_v2 as oss_v2
import oss2
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from oss_helpers import REGION
from s3_helpers import MiB, error_of, issued_credentials, s3_client

# Runs on the local store and again on the S3 backend over RGW (conftest.BACKENDS).
ON_RGW_TOO = True

BUCKET = "tollgate"


@pytest.fixture(scope="module")
def s3(gw):
    return s3_client(gw, issued_credentials(gw, "--role", "readwrite"))


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def crc32(data: bytes) -> bytes:
    return zlib.crc32(data).to_bytes(4, "big")


def crc64(data: bytes) -> int:
    """CRC-64/ECMA as the OSS SDKs compute it (oss2's own implementation)."""
    c = oss2.utils.Crc64(0)
    c.update(data)
    return c.crc


# MARK: S3: PutObject, GetObject, HeadObject

def test_boto3_default_crc32_is_stored_and_returned_when_asked(s3):
    data = os.urandom(300_000)
    put = s3.put_object(Bucket=BUCKET, Key="sums/default", Body=data)
    # boto3's default: a CRC-32, sent as a trailer of an aws-chunked body, echoed by the PUT.
    assert put["ChecksumCRC32"] == b64(crc32(data))
    assert put["ChecksumType"] == "FULL_OBJECT"
    got = s3.get_object(Bucket=BUCKET, Key="sums/default", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == b64(crc32(data)) and got["ChecksumType"] == "FULL_OBJECT"
    assert got["Body"].read() == data  # botocore validates the body against it as it reads
    head = s3.head_object(Bucket=BUCKET, Key="sums/default", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == b64(crc32(data))
    # Not asked for: not sent. A range: not sent (it describes the whole object).
    assert "ChecksumCRC32" not in s3.head_object(Bucket=BUCKET, Key="sums/default")
    ranged = s3.get_object(Bucket=BUCKET, Key="sums/default", Range="bytes=0-9", ChecksumMode="ENABLED")
    assert "ChecksumCRC32" not in ranged and ranged["Body"].read() == data[:10]


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"])
def test_every_algorithm_boto3_sends(s3, algorithm):
    if algorithm in ("CRC32C", "CRC64NVME"):
        # botocore computes these with the AWS CRT only; .ci/run runs this file again in an
        # environment that has it (awscrt also replaces botocore's signer, which other files'
        # tests hook, so it is not installed beside them).
        pytest.importorskip("awscrt")
    data = os.urandom(70_000)
    put = s3.put_object(Bucket=BUCKET, Key=f"sums/{algorithm}", Body=data, ChecksumAlgorithm=algorithm)
    sent = put[f"Checksum{algorithm}"]
    got = s3.get_object(Bucket=BUCKET, Key=f"sums/{algorithm}", ChecksumMode="ENABLED")
    assert got[f"Checksum{algorithm}"] == sent
    assert got["Body"].read() == data
    if algorithm in ("SHA1", "SHA256"):
        import hashlib
        assert sent == b64(hashlib.new(algorithm.lower(), data).digest())


def test_a_wrong_checksum_stores_nothing(s3):
    s3.put_object(Bucket=BUCKET, Key="sums/kept", Body=b"original")
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=BUCKET, Key="sums/kept", Body=b"replacement", ChecksumCRC32=b64(crc32(b"something else")))
    assert error_of(refused) == ("BadDigest", 400)
    assert s3.get_object(Bucket=BUCKET, Key="sums/kept")["Body"].read() == b"original"


def test_copy_keeps_the_checksum(s3):
    data = os.urandom(10_000)
    s3.put_object(Bucket=BUCKET, Key="sums/source", Body=data, ChecksumAlgorithm="SHA256")
    copied = s3.copy_object(Bucket=BUCKET, Key="sums/copy", CopySource={"Bucket": BUCKET, "Key": "sums/source"})
    sha = s3.head_object(Bucket=BUCKET, Key="sums/source", ChecksumMode="ENABLED")["ChecksumSHA256"]
    assert copied["CopyObjectResult"]["ChecksumSHA256"] == sha
    assert s3.head_object(Bucket=BUCKET, Key="sums/copy", ChecksumMode="ENABLED")["ChecksumSHA256"] == sha


# MARK: S3: multipart

def test_composite_multipart_checksum(s3):
    parts_data = [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(123_456)]
    created = s3.create_multipart_upload(Bucket=BUCKET, Key="sums/composite", ChecksumAlgorithm="CRC32")
    assert created["ChecksumAlgorithm"] == "CRC32"
    upload_id = created["UploadId"]
    parts = []
    for number, piece in enumerate(parts_data, start=1):
        part = s3.upload_part(Bucket=BUCKET, Key="sums/composite", UploadId=upload_id, PartNumber=number, Body=piece,
                              ChecksumAlgorithm="CRC32")
        assert part["ChecksumCRC32"] == b64(crc32(piece))
        parts.append({"PartNumber": number, "ETag": part["ETag"], "ChecksumCRC32": part["ChecksumCRC32"]})
    listed = s3.list_parts(Bucket=BUCKET, Key="sums/composite", UploadId=upload_id)
    assert listed["ChecksumAlgorithm"] == "CRC32"
    assert [p["ChecksumCRC32"] for p in listed["Parts"]] == [p["ChecksumCRC32"] for p in parts]
    # A part listed with a checksum that is not its own is refused, and the upload stays.
    wrong = [dict(p) for p in parts]
    wrong[1]["ChecksumCRC32"] = b64(crc32(b"not this part"))
    with pytest.raises(ClientError) as refused:
        s3.complete_multipart_upload(Bucket=BUCKET, Key="sums/composite", UploadId=upload_id, MultipartUpload={"Parts": wrong})
    assert error_of(refused) == ("InvalidPart", 400)
    done = s3.complete_multipart_upload(Bucket=BUCKET, Key="sums/composite", UploadId=upload_id, MultipartUpload={"Parts": parts})
    composite = b64(crc32(b"".join(crc32(p) for p in parts_data))) + "-3"
    assert done["ChecksumCRC32"] == composite and done["ChecksumType"] == "COMPOSITE"
    head = s3.head_object(Bucket=BUCKET, Key="sums/composite", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == composite and head["ChecksumType"] == "COMPOSITE"
    # botocore skips validating a composite checksum, and the bytes are whole.
    assert s3.get_object(Bucket=BUCKET, Key="sums/composite", ChecksumMode="ENABLED")["Body"].read() == b"".join(parts_data)


def test_full_object_multipart_checksum_from_s3transfer(s3):
    """s3transfer given the whole file's CRC-32 creates a FULL_OBJECT upload, sends each part's
    CRC-32 and states the whole one on completion; the gateway combines the parts' CRCs."""
    data = os.urandom(11 * MiB + 17)
    whole = b64(crc32(data))
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=2)
    s3.upload_fileobj(io.BytesIO(data), BUCKET, "sums/full", ExtraArgs={"ChecksumCRC32": whole}, Config=config)
    head = s3.head_object(Bucket=BUCKET, Key="sums/full", ChecksumMode="ENABLED")
    assert head["ETag"].endswith('-3"')
    assert head["ChecksumCRC32"] == whole and head["ChecksumType"] == "FULL_OBJECT"
    assert s3.get_object(Bucket=BUCKET, Key="sums/full", ChecksumMode="ENABLED")["Body"].read() == data


def test_full_object_multipart_refuses_a_wrong_whole_checksum(s3):
    pieces = [os.urandom(5 * MiB), os.urandom(1000)]
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key="sums/full-wrong", ChecksumAlgorithm="CRC32",
                                           ChecksumType="FULL_OBJECT")["UploadId"]
    parts = []
    for number, piece in enumerate(pieces, start=1):
        part = s3.upload_part(Bucket=BUCKET, Key="sums/full-wrong", UploadId=upload_id, PartNumber=number, Body=piece,
                              ChecksumAlgorithm="CRC32")
        parts.append({"PartNumber": number, "ETag": part["ETag"], "ChecksumCRC32": part["ChecksumCRC32"]})
    with pytest.raises(ClientError) as refused:
        s3.complete_multipart_upload(Bucket=BUCKET, Key="sums/full-wrong", UploadId=upload_id, MultipartUpload={"Parts": parts},
                                     ChecksumCRC32=b64(crc32(b"wrong")), ChecksumType="FULL_OBJECT")
    assert error_of(refused) == ("BadDigest", 400)
    done = s3.complete_multipart_upload(Bucket=BUCKET, Key="sums/full-wrong", UploadId=upload_id, MultipartUpload={"Parts": parts},
                                        ChecksumCRC32=b64(crc32(b"".join(pieces))), ChecksumType="FULL_OBJECT")
    assert done["ChecksumCRC32"] == b64(crc32(b"".join(pieces))) and done["ChecksumType"] == "FULL_OBJECT"


def test_a_part_of_another_algorithm_is_refused(s3):
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key="sums/mixed", ChecksumAlgorithm="CRC32")["UploadId"]
    with pytest.raises(ClientError) as refused:
        s3.upload_part(Bucket=BUCKET, Key="sums/mixed", UploadId=upload_id, PartNumber=1, Body=b"x", ChecksumAlgorithm="SHA256")
    assert error_of(refused) == ("InvalidRequest", 400)
    with pytest.raises(ClientError) as bad_type:
        s3.create_multipart_upload(Bucket=BUCKET, Key="sums/mixed", ChecksumAlgorithm="SHA256", ChecksumType="FULL_OBJECT")
    assert error_of(bad_type) == ("InvalidRequest", 400)
    s3.abort_multipart_upload(Bucket=BUCKET, Key="sums/mixed", UploadId=upload_id)


# MARK: OSS: x-oss-hash-crc64ecma

@pytest.fixture(scope="module")
def bucket(gw):
    creds = issued_credentials(gw, "--role", "readwrite")
    return oss2.Bucket(oss2.StsAuth(creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"]),
                       gw.gateway_url, BUCKET, region=REGION, connect_timeout=30)


def test_oss2_put_get_and_head_carry_the_crc64(bucket):
    data = os.urandom(200_000)
    put = bucket.put_object("crc/put", data)  # oss2 compares its CRC-64 with the header when present
    assert put.crc == crc64(data)
    got = bucket.get_object("crc/put")
    assert got.read() == data
    assert got.server_crc == got.client_crc == crc64(data)
    assert bucket.head_object("crc/put").server_crc == crc64(data)
    # A range is not the whole object: no CRC-64 of the object on it.
    assert bucket.get_object("crc/put", byte_range=(0, 9)).server_crc is None


def test_oss2_append_combines_the_crc64(bucket):
    first, second = os.urandom(1000), os.urandom(5000)
    one = bucket.append_object("crc/append", 0, first, init_crc=0)
    assert one.crc == crc64(first)
    two = bucket.append_object("crc/append", one.next_position, second, init_crc=one.crc)
    assert two.crc == crc64(first + second) and two.next_position == 6000
    assert bucket.head_object("crc/append").server_crc == crc64(first + second)


def test_oss2_multipart_crc64_is_combined_from_the_parts(bucket, tmp_path):
    data = os.urandom(350 * 1024 + 7)
    path = tmp_path / "upload.bin"
    path.write_bytes(data)
    # resumable_upload checks each part's CRC-64 and, at the end, the object's against its own
    # combination of the parts'.
    oss2.resumable_upload(bucket, "crc/multipart", str(path), multipart_threshold=100 * 1024, part_size=100 * 1024,
                          store=oss2.ResumableStore(root=str(tmp_path)))
    head = bucket.head_object("crc/multipart")
    assert head.object_type == "Multipart"
    assert head.server_crc == crc64(data)


def test_oss2_copy_keeps_the_crc64(bucket):
    data = os.urandom(4096)
    bucket.put_object("crc/source", data)
    bucket.copy_object(BUCKET, "crc/source", "crc/copy")
    assert bucket.head_object("crc/copy").server_crc == crc64(data)


def test_objects_written_through_s3_have_no_crc64_for_oss(s3, bucket):
    """The CRC-64 is computed for OSS writes only (it costs a pass over every byte); an object
    written through S3 is read through OSS without the header, and the SDK skips its check."""
    s3.put_object(Bucket=BUCKET, Key="crc/from-s3", Body=b"s3 bytes")
    got = bucket.get_object("crc/from-s3")
    assert got.read() == b"s3 bytes" and got.server_crc is None


def v2_client(gw):
    creds = issued_credentials(gw, "--role", "readwrite")
    config = oss_v2.config.load_default()
    config.credentials_provider = oss_v2.credentials.StaticCredentialsProvider(
        creds["AccessKeyId"], creds["AccessKeySecret"], creds["SecurityToken"])
    config.region = REGION
    config.endpoint = gw.gateway_url
    config.use_path_style = True
    return oss_v2.Client(config)


def test_v2_sdk_checks_the_crc64_of_uploads_and_downloads(gw, tmp_path):
    client = v2_client(gw)
    data = os.urandom(300_000)
    put = client.put_object(oss_v2.models.PutObjectRequest(bucket=BUCKET, key="crc/v2", body=data))
    assert put.hash_crc64 == str(crc64(data))
    target = tmp_path / "down.bin"
    client.get_object_to_file(oss_v2.models.GetObjectRequest(bucket=BUCKET, key="crc/v2"), str(target))
    assert target.read_bytes() == data
    appended = client.append_object(oss_v2.models.AppendObjectRequest(bucket=BUCKET, key="crc/v2-append", position=0, body=data[:1000]))
    assert appended.hash_crc64 == str(crc64(data[:1000]))
    # The uploader sends parts and checks the completed object's CRC-64 against its own.
    source = tmp_path / "up.bin"
    source.write_bytes(data * 2)
    uploader = client.uploader(part_size=100 * 1024)
    result = uploader.upload_file(oss_v2.models.PutObjectRequest(bucket=BUCKET, key="crc/v2-multipart"), str(source))
    assert result.hash_crc64 == str(crc64(data * 2))
