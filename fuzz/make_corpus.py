#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target under fuzz/corpus/NAME/ from vectors the unit tests
already use: SDK-signed requests (Tests/TollgateSignatureTests/GeneratedVectors.swift), the shipped
policy files, tokens signed the way TollgateToken signs them. Deterministic; run it again after
changing the vectors:  python3 fuzz/make_corpus.py
With --chunked-bases it prints the requests FuzzChunked embeds, in FuzzSupport's text form."""
import base64, hashlib, hmac, json, os, re, shutil, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
VECTORS = os.path.join(ROOT, "Tests", "TollgateSignatureTests", "GeneratedVectors.swift")

def vectors():
    text = open(VECTORS).read()
    out = {}
    for block in re.split(r"\n    (?=(?:S3|OSS)Vector\()", text)[1:]:
        kind = block.split("(", 1)[0]
        field = lambda name: (re.search(rf'\b{name}: (nil|"[^"]*")', block) or [None, "nil"])[1]
        value = lambda name: None if field(name) == "nil" else field(name)[1:-1]
        headers = re.findall(r'\("([^"]*)", "([^"]*)"\)', block.split("headers: [", 1)[1].split("],", 1)[0])
        out[value("name")] = dict(kind=kind, method=value("method"), path=value("path"), query=value("query"),
                                  headers=headers, bucket=value("bucket"), key=value("key"),
                                  body=value("body"), decoded=value("decoded"))
    return out

def request_text(v):
    target = v["path"] + ("?" + v["query"] if v["query"] else "")
    return "\n".join([f'{v["method"]} {target}'] + [f"{n}: {val}" for n, val in v["headers"]]) + "\n"

def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

def slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")

# The base requests of FuzzChunked, in the order of its selector byte.
CHUNKED_BASES = ["signed chunked small", "signed chunked trailer crc32", "signed chunked trailer sha256",
                 "boto3 put_object https trailer 0", "boto3 put_object https sha256 trailer", "signed chunked empty"]

# Must match fuzz/FuzzToken/FuzzToken.swift.
TOKEN_ROOT = b"fuzz-root-secret-0123456789abcdefghijklmn"
TOKEN_NOW = 1_773_500_966

def token(claims: bytes, root=TOKEN_ROOT):
    h = lambda key, msg: hmac.new(key, msg, hashlib.sha256).digest()
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")
    kid = h(root, b"tollgate/key-id/v1")[:8].hex().encode()
    signed = b"TG1." + kid + b"." + b64(claims)
    return signed + b"." + b64(h(h(root, b"tollgate/token-mac/v1"), signed))

# Must match fuzz/FuzzHTTP1/FuzzHTTP1.swift: its root credentials, bucket and clock.
HTTP1_ACCESS_KEY = "FUZZROOTACCESSKEY"
HTTP1_SECRET = "fuzz-root-secret-0123456789abcdefghijklmn"

def http1_seeds():
    """Streams of pipelined requests, presigned by botocore with FuzzHTTP1's root credentials at
    its clock (so the gateway accepts them), beside the malformed, closing and tunnelling kinds."""
    import datetime
    import boto3, botocore.auth
    from botocore.config import Config
    botocore.auth.get_current_datetime = lambda: datetime.datetime.fromtimestamp(TOKEN_NOW, datetime.timezone.utc).replace(tzinfo=None)
    client = boto3.client("s3", endpoint_url="http://127.0.0.1:9000", region_name="us-east-1",
                          aws_access_key_id=HTTP1_ACCESS_KEY, aws_secret_access_key=HTTP1_SECRET,
                          config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    def url(operation, **params):
        return client.generate_presigned_url(operation, Params={"Bucket": "fuzz", **params}, ExpiresIn=3600)[len("http://127.0.0.1:9000"):]
    def request(method, target, headers=(), body=b"", version="1.1"):
        lines = [f"{method} {target} HTTP/{version}", "Host: 127.0.0.1:9000", *[f"{n}: {v}" for n, v in headers]]
        if body:
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    get, missing = request("GET", url("get_object", Key="small.txt")), request("GET", url("get_object", Key="missing.txt"))
    head = request("HEAD", url("head_object", Key="small.txt"))
    put = request("PUT", url("put_object", Key="new.txt"), body=b"a new body")
    expect = request("PUT", url("put_object", Key="expect.txt"), [("Expect", "100-continue")], b"expected")
    meta = request("GET", url("get_object", Key="small.txt") + "&objectMeta")
    listing = request("GET", url("list_objects_v2", Prefix="s"))
    seeds = {
        "get-head-missing": get + head + missing + get,
        "missing-then-malformed": missing + b"GARBAGE / HTTP/9.9\r\n\x01\r\n\r\n",
        "put-expect-pipelined": put + expect + get,
        "objectmeta-then-get": meta + get,
        "http10-then-get": request("GET", url("get_object", Key="small.txt"), version="1.0") + get,
        "close-then-put": request("GET", url("get_object", Key="small.txt"), [("Connection", "close")]) + put,
        "connect-then-get": b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n" + get,
        "get-announcing-a-body": request("GET", url("get_object", Key="small.txt"), [("Content-Length", "9")]) + get,
        "list-chunked-put": listing + request("PUT", url("put_object", Key="chunked.txt"), [("Transfer-Encoding", "chunked")])
                            + b"5\r\nhello\r\n0\r\n\r\n" + missing,
        "anonymous-and-forged": request("GET", "/fuzz/small.txt") + request("GET", url("get_object", Key="small.txt")[:-1] + "0") + head,
    }
    for name, data in seeds.items():
        write("FuzzHTTP1", name, data)

def main():
    vs = vectors()
    if "--chunked-bases" in sys.argv:
        for name in CHUNKED_BASES:
            print(f"// {name}\n" + request_text(vs[name]))
        return
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    for name in ["boto3 get_object http 0", "boto3 put_object http 4", "boto3 presigned get 0",
                 "boto3 presigned get 7 days", "boto3 presigned get session token", "boto3 put_object session token",
                 "boto3 put_object https trailer 0", "boto3 delete_objects content-md5", "boto3 copy_object",
                 "boto3 list_objects_v2 query", "boto3 get_object range + response overrides", "signed chunked trailer crc32"]:
        write("FuzzSigV4", slug(name), request_text(vs[name]))
    for name in ["oss2 v1 get_object 0", "oss2 v1 put_object 2", "oss2 v1 presigned get 0", "oss2 v1 sts presigned get",
                 "oss2 v1 get with process and response header", "oss2 v1 list_buckets", "oss2 v4 get_object 3",
                 "oss2 v4 put_object 0", "oss2 v4 presigned get 1", "oss2 v4 sts put_object", "oss2 v4 list_objects",
                 "oss2 v4 other region", "oss2 v2 put_object 4", "oss2 v2 sts ranged get",
                 "oss2 v2 presigned put additional headers", "oss2 v2 sts presigned get", "oss2 v2 list_buckets"]:
        v = vs[name]
        resource = "" if v["bucket"] is None else v["bucket"] + ("" if v["key"] is None else "/" + v["key"])
        write("FuzzOSS", slug(name), resource + "\n" + request_text(v))
    for selector, name in enumerate(CHUNKED_BASES):
        v = vs[name]
        body = base64.b64decode(v["body"])
        length = len(base64.b64decode(v["decoded"]))
        for seed in (0, 7):
            write("FuzzChunked", f"{slug(name)}-{seed}", bytes([selector, seed, length >> 8, length & 0xFF]) + body)
    for f in sorted(os.listdir(os.path.join(ROOT, "policy"))):
        write("FuzzPolicy", f, open(os.path.join(ROOT, "policy", f), "rb").read())
    write("FuzzPolicy", "iam_conditions.json", json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "Own", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": "arn:aws:s3:::photos/${aws:username}/*",
         "Condition": {"IpAddress": {"aws:SourceIp": ["192.0.2.0/24", "2001:db8::/32"]},
                       "DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"},
                       "Bool": {"aws:SecureTransport": "false"}}},
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::photos",
         "Condition": {"StringLike": {"s3:prefix": ["${aws:username}/*", ""]}, "NumericLessThanEquals": {"s3:max-keys": "1000"}}},
        {"Effect": "Deny", "NotAction": "s3:Get*", "NotResource": "arn:aws:s3:::photos/public/?*",
         "Condition": {"ForAnyValue:StringEquals": {"jwt:sub": ["mallory"]}, "Null": {"aws:Referer": "false"},
                       "StringNotLikeIfExists": {"aws:UserAgent": "*curl*"}}}]}, indent=2))
    write("FuzzPolicy", "ram_deny.json", json.dumps({"Version": "1", "Statement": [
        {"Effect": "Deny", "Action": ["oss:Delete*"], "Resource": ["acs:oss:*:*:$BUCKET_NAME/*"]},
        {"Effect": "Allow", "Action": "oss:*", "Resource": ["acs:oss:*:*:$BUCKET_NAME", "acs:oss:*:*:$BUCKET_NAME/*"],
         "Condition": {"StringEquals": {"acs:SourceIp": "192.0.2.7"}, "NumericGreaterThan": {"acs:CurrentTime": "0"}}}]}))
    claims = lambda **extra: json.dumps({"v": 1, "ak": "STS.ABCDEFGHIJKLMNOPQRSTUVWX", "iat": TOKEN_NOW - 60,
                                         "exp": TOKEN_NOW + 900, "role": "default", "sn": "app", **extra},
                                        separators=(",", ":")).encode()
    write("FuzzToken", "token-default", token(claims()))
    write("FuzzToken", "token-subject-policy", token(claims(sub="alice", sp='{"Version":"1","Statement":[]}', ctx={"sub": "alice", "aud": "app"})))
    write("FuzzToken", "token-expired", token(claims(exp=TOKEN_NOW - 1)))
    write("FuzzToken", "token-foreign-key", token(claims(), root=b"another-root-secret-0123456789abcdefgh"))
    write("FuzzToken", "claims-signed-by-harness", claims(sub="bob"))
    write("FuzzToken", "claims-extreme-times", json.dumps({"v": 1, "ak": "STS.X", "iat": -9223372036854775808,
                                                           "exp": 9223372036854775807, "role": "r", "sn": ""}).encode())
    write("FuzzToken", "issue-round-trip", "!alice\ndefault\nsession \"one\"\n{\"Version\":\"1\"}\naud=app\\tx\n900\n")
    # Request bodies as boto3 and oss2 send them, and the shapes Tests/TollgateXMLTests reads.
    write("FuzzXML", "delete-boto3.xml", '<?xml version="1.0" encoding="UTF-8"?>\n<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
          '<Object><Key>a.txt</Key></Object><Object><Key>dir/b &amp; c.txt</Key><VersionId>null</VersionId></Object>'
          '<Quiet>true</Quiet></Delete>')
    write("FuzzXML", "delete-oss2.xml", '<?xml version="1.0" encoding="UTF-8"?><Delete><Quiet>false</Quiet>'
          '<Object><Key>&#x6570;&#25454;/&lt;x&gt;</Key></Object></Delete>')
    write("FuzzXML", "complete-boto3.xml", '<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
          '<Part><ETag>"9b2cf535f27731c974343645a3985328"</ETag><PartNumber>1</PartNumber></Part>'
          '<Part><ETag>"6f5902ac237024bdd0c176cb93063dc4"</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32><PartNumber> 2 </PartNumber></Part>'
          '</CompleteMultipartUpload>')
    write("FuzzXML", "complete-comments-cdata.xml", '<?xml version="1.0"?><!-- c --><s3:CompleteMultipartUpload xmlns:s3="urn:x" a=\'1\'>'
          '<?pi x?><Part><PartNumber>10000</PartNumber><ETag><![CDATA["e<&>"]]></ETag></Part></s3:CompleteMultipartUpload>\n')
    write("FuzzXML", "truncated.xml", "<Delete><Object><Key>k</Key></Object>")
    write("FuzzXML", "doctype.xml", '<!DOCTYPE d [<!ENTITY a "aaaa">]><Delete><Object><Key>&a;</Key></Object></Delete>')
    http1_seeds()
    for target in sorted(os.listdir(CORPUS)):
        print(f"{target}: {len(os.listdir(os.path.join(CORPUS, target)))} seeds")

main()
