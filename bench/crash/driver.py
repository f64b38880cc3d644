#!/usr/bin/env python3
"""Crash-test driver for the Tollgate object gateway (S3 API, boto3).

Subcommands (all read the endpoint, credentials and bucket from the environment, see
crash_test.sh):

  prepare <workdir>   generate the deterministic test bodies (A/B versions of a single-part
                      object and of a multipart object) and write their hashes to
                      <workdir>/expected.json
  setup               create the bucket if needed
  put <workdir> <v>   upload version <v> (A or B) of both objects, in the foreground
  complete <workdir> <v> <pid> <delay-us>
                      upload the parts of version <v> of the multipart object, then send
                      CompleteMultipartUpload and kill -9 the server (<pid>) <delay-us>
                      microseconds after sending it: before, during or after the completion
  verify <workdir>    after a crash and restart: each object must read back as exactly
                      version A or version B (size, SHA-256, and for the single-part object
                      the ETag == MD5); abort multipart uploads the killed client left behind

Exit status 0 on success, 1 on a verification failure (a message on stderr), 2 on usage or
connection errors.
"""
import hashlib
import json
import os
import signal
import sys
import threading

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

MiB = 1024 * 1024
SINGLE_KEY = "crash/single-object.bin"
MULTIPART_KEY = "crash/multipart-object.bin"
# Default sizes; override with CRASH_SINGLE_MIB / CRASH_MULTIPART_MIB.
SINGLE_MIB = int(os.environ.get("CRASH_SINGLE_MIB", "48"))
MULTIPART_MIB = int(os.environ.get("CRASH_MULTIPART_MIB", "40"))
PART_MIB = 8


def client():
    endpoint = os.environ.get("ENDPOINT", "http://127.0.0.1:9000")
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
        aws_session_token=os.environ.get("AWS_SESSION_TOKEN") or None,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=5,
            read_timeout=60,
        ),
    )


def bucket():
    return os.environ.get("BUCKET", "crash-test")


def generate(path, mib, seed):
    """Deterministic pseudo-random bytes: SHA-256 in counter mode over the seed."""
    sha = hashlib.sha256()
    md5 = hashlib.md5()
    with open(path, "wb") as f:
        block = b""
        counter = 0
        for _ in range(mib):
            chunk = bytearray()
            while len(chunk) < MiB:
                block = hashlib.sha256(f"{seed}:{counter}".encode()).digest()
                counter += 1
                chunk += block * 32  # 1 KiB per digest keeps generation fast
            chunk = bytes(chunk[:MiB])
            f.write(chunk)
            sha.update(chunk)
            md5.update(chunk)
    return {"size": mib * MiB, "sha256": sha.hexdigest(), "md5": md5.hexdigest()}


def body_path(workdir, name, version):
    return os.path.join(workdir, f"{name}-{version}.bin")


def prepare(workdir):
    os.makedirs(workdir, exist_ok=True)
    expected = {}
    for version in ("A", "B"):
        expected[f"single-{version}"] = generate(body_path(workdir, "single", version), SINGLE_MIB, f"single-{version}")
        expected[f"multipart-{version}"] = generate(body_path(workdir, "multipart", version), MULTIPART_MIB, f"multipart-{version}")
    with open(os.path.join(workdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)


def setup():
    s3 = client()
    try:
        s3.head_bucket(Bucket=bucket())
    except ClientError:
        s3.create_bucket(Bucket=bucket())


def put(workdir, version):
    s3 = client()
    # Single PUT of the whole body.
    with open(body_path(workdir, "single", version), "rb") as f:
        s3.put_object(Bucket=bucket(), Key=SINGLE_KEY, Body=f, ContentType="application/octet-stream",
                      Metadata={"crash-version": version})
    # Multipart: initiate, parts, complete.
    transfer = TransferConfig(multipart_threshold=PART_MIB * MiB, multipart_chunksize=PART_MIB * MiB, max_concurrency=2)
    s3.upload_file(body_path(workdir, "multipart", version), bucket(), MULTIPART_KEY, Config=transfer,
                   ExtraArgs={"Metadata": {"crash-version": version}})


def complete(workdir, version, pid, delay_us):
    s3 = client()
    upload_id = s3.create_multipart_upload(Bucket=bucket(), Key=MULTIPART_KEY,
                                           Metadata={"crash-version": version})["UploadId"]
    parts = []
    with open(body_path(workdir, "multipart", version), "rb") as f:
        number = 1
        while chunk := f.read(PART_MIB * MiB):
            etag = s3.upload_part(Bucket=bucket(), Key=MULTIPART_KEY, UploadId=upload_id, PartNumber=number, Body=chunk)["ETag"]
            parts.append({"PartNumber": number, "ETag": etag})
            number += 1
    killer = threading.Timer(delay_us / 1e6, os.kill, (pid, signal.SIGKILL))
    killer.start()
    try:
        s3.complete_multipart_upload(Bucket=bucket(), Key=MULTIPART_KEY, UploadId=upload_id, MultipartUpload={"Parts": parts})
        print(f"completed before the kill ({delay_us} us)")
    except Exception as error:  # the connection dies with the server
        print(f"the kill ({delay_us} us) ended the completion request: {type(error).__name__}")
    killer.join()


def stream_hash(s3, key):
    response = s3.get_object(Bucket=bucket(), Key=key)
    sha = hashlib.sha256()
    md5 = hashlib.md5()
    size = 0
    for chunk in response["Body"].iter_chunks(chunk_size=MiB):
        sha.update(chunk)
        md5.update(chunk)
        size += len(chunk)
    return response, {"size": size, "sha256": sha.hexdigest(), "md5": md5.hexdigest()}


def fail(message):
    print(f"VERIFY FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def verify(workdir):
    with open(os.path.join(workdir, "expected.json")) as f:
        expected = json.load(f)
    s3 = client()
    for name, key in (("single", SINGLE_KEY), ("multipart", MULTIPART_KEY)):
        try:
            response, got = stream_hash(s3, key)
        except ClientError as error:
            # Version A was committed before every crash, so the object must exist.
            fail(f"{key}: {error.response['Error'].get('Code')}")
        versions = [v for v in ("A", "B") if expected[f"{name}-{v}"]["sha256"] == got["sha256"]]
        if not versions:
            fail(f"{key}: content matches neither version (size {got['size']}, sha256 {got['sha256']})")
        version = versions[0]
        want = expected[f"{name}-{version}"]
        if response["ContentLength"] != want["size"] or got["size"] != want["size"]:
            fail(f"{key}: Content-Length {response['ContentLength']} / body {got['size']} != {want['size']}")
        meta = response.get("Metadata", {}).get("crash-version")
        if meta != version:
            fail(f"{key}: metadata says version {meta!r} but the bytes are version {version} (a mix)")
        etag = response["ETag"].strip('"')
        if name == "single" and etag != want["md5"]:
            fail(f"{key}: ETag {etag} != MD5 {want['md5']}")
        if name == "multipart" and not etag.endswith(f"-{-(-want['size'] // (PART_MIB * MiB))}"):
            fail(f"{key}: multipart ETag {etag} has the wrong part count")
        head = s3.head_object(Bucket=bucket(), Key=key)
        if head["ContentLength"] != want["size"] or head["ETag"] != response["ETag"]:
            fail(f"{key}: HEAD disagrees with GET")
        print(f"{key}: version {version} intact ({want['size']} bytes)")
    # The killed client may have left multipart uploads in progress; they must be listable and
    # abortable, and aborting them must work.
    uploads = s3.list_multipart_uploads(Bucket=bucket()).get("Uploads", [])
    for upload in uploads:
        s3.abort_multipart_upload(Bucket=bucket(), Key=upload["Key"], UploadId=upload["UploadId"])
    if s3.list_multipart_uploads(Bucket=bucket()).get("Uploads"):
        fail("multipart uploads still listed after abort")
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket(), Prefix="crash/").get("Contents", [])}
    if listed != {SINGLE_KEY, MULTIPART_KEY}:
        fail(f"listing shows {sorted(listed)}")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    command, args = argv[1], argv[2:]
    try:
        if command == "prepare" and len(args) == 1:
            prepare(args[0])
        elif command == "setup" and not args:
            setup()
        elif command == "put" and len(args) == 2 and args[1] in ("A", "B"):
            put(args[0], args[1])
        elif command == "complete" and len(args) == 4 and args[1] in ("A", "B"):
            complete(args[0], args[1], int(args[2]), int(args[3]))
        elif command == "verify" and len(args) == 1:
            verify(args[0])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except ClientError as error:
        print(f"S3 error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
