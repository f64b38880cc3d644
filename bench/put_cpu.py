"""Server CPU per 1 MiB PUT, for each client a user runs: what the gateway spends on the bytes
(hashes, checksums, copies) beside the HTTP and the store's write, which are the same for all.

    python3 bench/put_cpu.py PID ENDPOINT KEY_ID SECRET REQUESTS

Clients (each PUTs REQUESTS bodies of 1 MiB, after 5 unmeasured ones, to 50 keys in turn):
  presigned   a SigV4-presigned PUT sent with requests: no checksum, UNSIGNED-PAYLOAD (bench/gateway.sh's)
  boto3       s3.put_object as boto3 sends it over http: a signed SHA-256 of the payload and a CRC-32 header
  boto3-md5   the same with Content-MD5, as the Java v1 and JavaScript v2 SDKs and rclone send it
  boto3-https s3.put_object as boto3 sends it over https: aws-chunked, UNSIGNED-PAYLOAD, a CRC-32
              trailer (signed for https, carried over http by a before-send hook, as in interop/)
  oss2        bucket.put_object (OSS V1 signature); the gateway computes the CRC-64 OSS returns
CLIENTS="boto3 oss2" in the environment picks some. Prints one line per client: name and server CPU µs per PUT (user + system of PID, from /proc).
"""
import base64
import hashlib
import os
import sys

import boto3
import botocore.awsrequest
import oss2
import requests
from botocore.config import Config

BUCKET = "bench"


def cpu_micros(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1_000_000 // os.sysconf("SC_CLK_TCK")


class Raw:
    """The raw stream botocore reads a response body from."""

    def __init__(self, content):
        self.content = content

    def stream(self, **kwargs):
        yield self.content

    def read(self, *args, **kwargs):
        content, self.content = self.content, b""
        return content


def main(pid, endpoint, key_id, secret, requests_per_client):
    pid, count = int(pid), int(requests_per_client)
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key_id, aws_secret_access_key=secret,
                      region_name="us-east-1", config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 0}))
    https = boto3.client("s3", endpoint_url=endpoint.replace("http://", "https://", 1), aws_access_key_id=key_id,
                         aws_secret_access_key=secret, region_name="us-east-1",
                         config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 0}))
    session = requests.Session()

    def over_http(request, **kwargs):
        body = request.body.read() if hasattr(request.body, "read") else bytes(request.body or b"")
        headers = {k: v for k, v in request.headers.items() if k.lower() != "transfer-encoding"}
        response = session.request(request.method, request.url.replace("https://", "http://", 1), headers=headers, data=body)
        return botocore.awsrequest.AWSResponse(response.url, response.status_code, response.headers, Raw(response.content))

    https.meta.events.register("before-send.s3", over_http)
    oss = oss2.Bucket(oss2.Auth(key_id, secret), endpoint, BUCKET)
    oss.enable_crc = False  # the client's own check of the answer, not the server's work
    body = os.urandom(1024 * 1024)
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    urls = [s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": f"put-cpu/{i}"}, ExpiresIn=3600)
            for i in range(50)]

    def presigned(i):
        response = session.put(urls[i % 50], data=body)
        if response.status_code != 200:
            sys.exit(f"presigned PUT: {response.status_code} {response.text}")

    clients = {
        "presigned": presigned,
        "boto3": lambda i: s3.put_object(Bucket=BUCKET, Key=f"put-cpu/{i % 50}", Body=body),
        "boto3-md5": lambda i: s3.put_object(Bucket=BUCKET, Key=f"put-cpu/{i % 50}", Body=body, ContentMD5=md5),
        "boto3-https": lambda i: https.put_object(Bucket=BUCKET, Key=f"put-cpu/{i % 50}", Body=body),
        "oss2": lambda i: oss.put_object(f"put-cpu/{i % 50}", body),
    }
    chosen = os.environ.get("CLIENTS", "").split() or list(clients)
    for name in chosen:
        put = clients[name]
        for i in range(5):
            put(i)
        before = cpu_micros(pid)
        for i in range(count):
            put(i)
        print(name, (cpu_micros(pid) - before) / count, flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
