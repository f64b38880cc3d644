"""S3 Signature Version 2, as real clients send it: boto3's `generate_presigned_url` (SigV2 by
default for a us-east-1 endpoint), boto3 with `signature_version="s3"` (the header form), and
s3fs's `sign()`; with the security token, under the same policies as SigV4."""
import time
import urllib.parse

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET
from s3_helpers import ROOT_ACCESS_KEY_ID, error_of, issued_credentials

# Runs on the local store and again on the S3 backend over RGW (conftest.BACKENDS).
ON_RGW_TOO = True

BUCKET = "tollgate"


def client(server, credentials=None, **config):
    key, secret, token = (ROOT_ACCESS_KEY_ID, ROOT_SECRET, None) if credentials is None else \
        (credentials["AccessKeyId"], credentials["AccessKeySecret"], credentials["SecurityToken"])
    return boto3.client("s3", endpoint_url=server.gateway_url, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, aws_session_token=token,
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **config))


def xml_code(text: str) -> str:
    return text.split("<Code>", 1)[1].split("</Code>", 1)[0]


def test_default_presigned_urls_are_sigv2_and_work(gw):
    writer = client(gw, issued_credentials(gw, "--role", "readwrite"))
    put_url = writer.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "v2/put me.txt"}, ExpiresIn=300)
    assert "Signature=" in put_url and "AWSAccessKeyId=STS." in put_url and "x-amz-security-token=" in put_url
    assert "X-Amz-Signature" not in put_url
    assert requests.put(put_url, data=b"sigv2 body", timeout=30).status_code == 200
    get_url = writer.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "v2/put me.txt"}, ExpiresIn=300)
    response = requests.get(get_url, timeout=30)
    assert response.status_code == 200 and response.content == b"sigv2 body"
    # Another key, another method, another token: the signature no longer matches.
    tampered = get_url.replace("put%20me.txt", "other.txt")
    response = requests.get(tampered, timeout=30)
    assert response.status_code == 403 and xml_code(response.text) == "SignatureDoesNotMatch"
    assert requests.delete(get_url, timeout=30).status_code == 403
    parts = urllib.parse.urlsplit(get_url)
    query = urllib.parse.parse_qs(parts.query)
    query["x-amz-security-token"] = [issued_credentials(gw, "--role", "readwrite")["SecurityToken"]]
    swapped = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query, doseq=True)))
    assert requests.get(swapped, timeout=30).status_code in (400, 403)
    # A header the URL did not sign cannot ride along.
    response = requests.get(get_url, headers={"x-amz-copy-source": "tollgate/secret"}, timeout=30)
    assert response.status_code == 403 and xml_code(response.text) == "SignatureDoesNotMatch"


@pytest.mark.parametrize("operation, params, added", [
    ("get_object", {"Key": "v2/meta.txt"}, "objectMeta"),
    ("list_objects", {}, "stat"),
    ("list_objects", {}, "bucketInfo"),
])
def test_an_unsigned_subresource_cannot_change_the_operation(gw, operation, params, added):
    """SigV2 signs only botocore's sub-resources: any other query parameter could be added to a
    presigned URL by anyone. One that selects another operation is refused; the URL as signed
    still works."""
    client(gw).put_object(Bucket=BUCKET, Key="v2/meta.txt", Body=b"meta")
    reader = client(gw, issued_credentials(gw, "--role", "read"))
    url = reader.generate_presigned_url(operation, Params={"Bucket": BUCKET, **params}, ExpiresIn=300)
    assert "Signature=" in url and "X-Amz-Signature" not in url
    assert requests.get(url, timeout=30).status_code == 200
    response = requests.get(url + "&" + added, timeout=30)
    assert response.status_code == 403 and xml_code(response.text) == "AccessDenied", response.text
    assert added in response.text
    # list-type picks the listing's format only: unsigned, as botocore sends it, it is accepted.
    if operation == "list_objects":
        listed = requests.get(url + "&list-type=2", timeout=30)
        assert listed.status_code == 200 and "<KeyCount>" in listed.text


def test_expired_sigv2_url_is_refused(gw):
    url = client(gw).generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "v2/x"}, ExpiresIn=1)
    time.sleep(2.5)
    response = requests.get(url, timeout=30)
    assert response.status_code == 403 and xml_code(response.text) == "AccessDenied"


def test_sigv2_header_signing_with_token_and_policy(gw):
    writer = client(gw, issued_credentials(gw, "--role", "readwrite"), signature_version="s3")
    writer.put_object(Bucket=BUCKET, Key="v2/header.txt", Body=b"header-signed", Metadata={"who": "v2"})
    got = writer.get_object(Bucket=BUCKET, Key="v2/header.txt")
    assert got["Body"].read() == b"header-signed" and got["Metadata"] == {"who": "v2"}
    assert [o["Key"] for o in writer.list_objects_v2(Bucket=BUCKET, Prefix="v2/header")["Contents"]] == ["v2/header.txt"]
    writer.delete_object(Bucket=BUCKET, Key="v2/header.txt")
    reader = client(gw, issued_credentials(gw, "--role", "read"), signature_version="s3")
    with pytest.raises(ClientError) as denied:
        reader.put_object(Bucket=BUCKET, Key="v2/denied.txt", Body=b"no")
    assert error_of(denied) == ("AccessDenied", 403)
    wrong = client(gw, dict(issued_credentials(gw, "--role", "readwrite"), AccessKeySecret="wrong"), signature_version="s3")
    with pytest.raises(ClientError) as mismatch:
        wrong.get_object(Bucket=BUCKET, Key="v2/x")
    assert error_of(mismatch) == ("SignatureDoesNotMatch", 403)


def test_sigv2_content_md5_is_verified(gw):
    import base64
    import hashlib
    root = client(gw, signature_version="s3")
    wrong = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
    with pytest.raises(ClientError) as bad:
        root.put_object(Bucket=BUCKET, Key="v2/md5.txt", Body=b"the body", ContentMD5=wrong)
    assert error_of(bad) == ("BadDigest", 400)
    with pytest.raises(ClientError):
        root.head_object(Bucket=BUCKET, Key="v2/md5.txt")


def test_s3fs_sign(gw):
    import s3fs
    credentials = issued_credentials(gw, "--role", "readwrite")
    fs = s3fs.S3FileSystem(key=credentials["AccessKeyId"], secret=credentials["AccessKeySecret"], token=credentials["SecurityToken"],
                           client_kwargs={"endpoint_url": gw.gateway_url, "region_name": "us-east-1"})
    fs.pipe(f"{BUCKET}/v2/s3fs.txt", b"from s3fs")
    url = fs.sign(f"{BUCKET}/v2/s3fs.txt", expiration=300)
    response = requests.get(url, timeout=30)
    assert response.status_code == 200 and response.content == b"from s3fs"
