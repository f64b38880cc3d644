"""The mobile Storage API (issue 42): Oracle Mobile Cloud's Storage API on the token listener, under
/mobile/platform/storage/collections, with a change feed for offline-first clients.

Everything here is real: the `tollgate` binary with a scratch config, login tokens minted with
PyJWT and verified against a JWKS served on loopback, plain `requests` for the Storage API,
boto3 and oss2 (signing with credentials the token endpoint vends) for the same objects on the
gateway. The seed's REST examples are sent as literal HTTP; the seed's magazine ("articles":
Ben, Art, Dee, Eva, Raj) is a permission table.
"""
import email.utils
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jwt
import oss2
import pytest
import requests

import mobile_sync_example
from conftest import ROOT_SECRET, Server
from test_identity import KeyServer as JWKSServer, SigningKey
from s3_helpers import ROOT_ACCESS_KEY_ID, ClientError, error_of, root_client, s3_client

BUCKET = "tollgate"
AUDIENCE = "magazine-app"
API = "/mobile/platform/storage/collections"
MiB = 1024 * 1024

# MARK: Identity: a loopback JWKS, ES256 login tokens, role rules

class KeyServer(JWKSServer):
    """test_identity's JWKS endpoint on loopback, with one ES256 key that signs every login token here."""

    def __init__(self):
        super().__init__()
        self.key = SigningKey("ES256", "magazine-1")
        self.publish(self.key)
        self.tokens = {}

    def token(self, subject: str, *, lifetime=3600, **claims) -> str:
        """A login token for `subject` with the roles the magazine gives them (cached)."""
        key = (subject, lifetime, json.dumps(claims, sort_keys=True))
        if key not in self.tokens or lifetime < 60:
            now = int(time.time())
            payload = {"iss": self.issuer, "aud": AUDIENCE, "sub": subject, "iat": now, "exp": now + lifetime,
                       "roles": USER_ROLES.get(subject, []), **claims}
            self.tokens[key] = jwt.encode(payload, self.key.private, algorithm="ES256", headers={"kid": "magazine-1"})
        return self.tokens[key]


# Who is who in the seed's magazine (and a few more for the other tests). A subject's `roles`
# claim is mapped to a Tollgate role by the RoleRules (Equals: "InactiveAuthor" contains "Author").
USER_ROLES = {
    "ben": ["Author"], "art": ["Author"], "dee": ["InactiveAuthor"], "eva": ["Editor"], "raj": ["Publisher"],
    "bonapart": ["Author"], "alice": ["Author"], "bob": ["Author"], "walt": ["FeedWriter"],
    "zed": [],  # no rule matches: the DefaultRole, Guest, which no collection names
}
ROLE_RULES = [{"Claim": "roles", "Match": "Equals", "Value": role, "Role": role}
              for role in ("Author", "InactiveAuthor", "Editor", "Publisher", "FeedWriter")]

# The role policies govern the gateway (S3/OSS). The collections' permissions are granted to the
# same roles in config.json's Collections.
FEED_WRITER_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                                   "s3:ListMultipartUploadParts"],
     "Resource": [f"arn:aws:s3:::{BUCKET}/feed/*", f"arn:aws:s3:::{BUCKET}/etags/*"]},
    {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}",
     "Condition": {"StringLike": {"s3:prefix": "feed/*"}}},
]}
ROLES = {role: "policy/user_isolated_policy.txt" for role in ("Author", "InactiveAuthor", "Editor", "Publisher", "Guest")}
ROLES["FeedWriter"] = "policy/feed_writer.json"

COLLECTIONS = {
    # The seed's shared magazine: Art and Ben (Author) read and write, Dee (InactiveAuthor) reads.
    "articles": {"Type": "shared", "Description": "Magazine articles", "ReadOnly": ["InactiveAuthor"],
                 "ReadWrite": ["Author"]},
    # The seed's user-isolated magazine (a distinct collection: names are case-sensitive). Eva
    # (Editor) reads and writes every space, Raj (Publisher) reads every space. Anonymous is
    # ignored on an isolated collection.
    "Articles": {"Type": "isolated", "Description": "Articles, one space per author", "ReadOnly": ["InactiveAuthor"],
                 "ReadWrite": ["Author"], "ReadOnlyAllUsers": ["Publisher"], "ReadWriteAllUsers": ["Editor"],
                 "Anonymous": True},
    # The shared magazine with anonymous access: anyone reads and writes, whatever their role.
    "openarticles": {"Type": "shared", "Description": "Open to all", "ReadOnly": ["InactiveAuthor"],
                     "ReadWrite": ["Author"], "Anonymous": True},
    # The seed's REST examples.
    "images": {"Type": "shared", "Description": "Images", "ReadOnly": ["InactiveAuthor"], "ReadWrite": ["Author"],
               "TimeToLiveSeconds": 3600},
    "profiles": {"Type": "shared", "ReadWrite": ["Author"], "NoStore": True},
    "cached": {"Type": "shared", "ReadWrite": ["Author"]},  # the default time to live
    "pages": {"Type": "shared", "ReadWrite": ["Author"]},
    "sorted": {"Type": "shared", "ReadWrite": ["Author"]},
    "search": {"Type": "shared", "ReadWrite": ["Author"]},
    "race": {"Type": "shared", "ReadWrite": ["Author"]},
    "etags": {"Type": "shared", "ReadWrite": ["Author"]},
    "notes": {"Type": "shared", "ReadWrite": ["Author"]},
    "clinotes": {"Type": "shared", "ReadWrite": ["Author"]},
    "feed": {"Type": "shared", "Prefix": "feed/", "ReadOnly": ["InactiveAuthor"], "ReadWrite": ["Author", "FeedWriter"]},
    "inbox": {"Type": "isolated", "ReadWrite": ["Author"], "ReadWriteAllUsers": ["Editor"]},
    "untouched": {"Type": "shared", "ReadWrite": ["Author"]},  # no change before the test takes a cursor
    "drafts": {"Type": "isolated", "ReadWrite": ["Author"]},
}


def magazine_server(keys: KeyServer, collections: dict = COLLECTIONS) -> Server:
    server = Server({
        "AccessKeySecret": ROOT_SECRET, "AccessKeyID": ROOT_ACCESS_KEY_ID,
        "Roles": ROLES,
        "Authentication": {
            "Providers": [{"Name": "magazine", "Issuer": keys.issuer, "JWKSURL": keys.issuer + "/jwks.json",
                           "Audiences": [AUDIENCE], "Algorithms": ["ES256"]}],
            "RoleRules": ROLE_RULES, "DefaultRole": "Guest",
        },
        "RateLimits": {"PerAddressPerMinute": 0, "PerSubjectPerMinute": 0},
        "Collections": collections,
    })
    (server.dir / "policy" / "feed_writer.json").write_text(json.dumps(FEED_WRITER_POLICY))
    return server


@pytest.fixture(scope="module")
def keys():
    server = KeyServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def tg(keys):
    server = magazine_server(keys).start()
    yield server
    server.cleanup()


# MARK: HTTP helpers

class Client:
    """The Storage API as one user sees it (None: anonymous), over plain `requests`."""

    def __init__(self, server: Server, keys: KeyServer, user: str | None, *, bearer: str | None = None,
                 backend_id: bool = False):
        self.server, self.keys, self.user = server, keys, user
        self.bearer = bearer
        self.http = requests.Session()
        self.http.headers["Accept-Encoding"] = "identity"
        if backend_id:  # accepted and ignored
            self.http.headers["Oracle-Mobile-Backend-ID"] = "0cea04ee-9e26-4de3-ad6b-00a66c8d3b96"

    @property
    def base(self) -> str:
        return self.server.url + API

    def request(self, method: str, path: str = "", *, headers=None, timeout=30, **kwargs) -> requests.Response:
        headers = dict(headers or {})
        token = self.bearer or (self.keys.token(self.user) if self.user else None)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        url = path if path.startswith("http") else self.base + path
        return self.http.request(method, url, headers=headers, timeout=timeout, **kwargs)

    def get(self, path="", **kw):
        return self.request("GET", path, **kw)

    def put(self, collection, object_id, data=b"", *, content_type=None, user=None, headers=None, **kw):
        headers = dict(headers or {})
        if content_type:
            headers["Content-Type"] = content_type
        params = {"user": user} if user else None
        return self.request("PUT", f"/{collection}/objects/{object_id}", data=data, headers=headers, params=params, **kw)

    def obj(self, method, collection, object_id, *, user=None, headers=None, **kw):
        params = {"user": user} if user else None
        return self.request(method, f"/{collection}/objects/{object_id}", headers=headers, params=params, **kw)

    def listing(self, collection, **params):
        return self.request("GET", f"/{collection}/objects", params=params)

    def changes(self, collection, *, timeout=None, **params):
        wait = float(params.get("wait", 0))
        return self.request("GET", f"/{collection}/changes", params=params, timeout=timeout or wait + 30)


def norm_etag(etag: str) -> str:
    return etag.strip().removeprefix("W/").strip('"').lower()


def link(body: dict, rel: str):
    return next((entry["href"] for entry in body.get("links", []) if entry.get("rel") == rel), None)


def follow(response: requests.Response, href: str) -> str:
    """An href of a `links` entry, absolute or relative, as a URL."""
    return urllib.parse.urljoin(response.url, href)


def iso(value: str) -> datetime:
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    assert parsed.tzinfo is not None and parsed.utcoffset() == timedelta(0), value
    return parsed


def assert_error(response: requests.Response, status: int, code: str | None = None):
    """The Storage API's JSON error shape."""
    assert response.status_code == status, (response.request.method, response.url, response.status_code, response.text)
    if response.request.method == "HEAD":
        return
    assert response.headers.get("Content-Type", "").split(";")[0].strip() == "application/json", response.headers
    body = response.json()
    assert body["status"] == status, body
    for field in ("type", "title", "detail", "o:errorCode"):
        assert isinstance(body.get(field), str) and body[field], (field, body)
    assert body["o:errorCode"].startswith("MOBILE-"), body
    if code:
        assert body["o:errorCode"] == code, body


def http_date(when: datetime) -> str:
    return email.utils.format_datetime(when.astimezone(timezone.utc), usegmt=True)


def byteranges(response: requests.Response) -> list:
    """The parts of a multipart/byteranges body: (Content-Range, Content-Type, bytes)."""
    content_type = response.headers["Content-Type"]
    assert content_type.split(";")[0].strip() == "multipart/byteranges", content_type
    boundary = re.search(r'boundary="?([^";]+)"?', content_type).group(1).encode()
    body, parts, position = response.content, [], 0
    delimiter = b"--" + boundary
    for _ in range(100):
        start = body.index(delimiter, position) + len(delimiter)
        if body[start:start + 2] == b"--":
            return parts
        head_end = body.index(b"\r\n\r\n", start)
        headers = {}
        for line in body[start:head_end].decode("latin-1").split("\r\n"):
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        first, last = map(int, re.match(r"bytes (\d+)-(\d+)/\d+", headers["content-range"]).groups())
        data = body[head_end + 4:head_end + 4 + last - first + 1]
        parts.append((headers["content-range"], headers.get("content-type"), data))
        position = head_end + 4 + len(data)
    raise AssertionError("no closing delimiter in the multipart body")


def who(tg, keys, user, **kw) -> Client:
    return Client(tg, keys, user, **kw)


def vended(tg, keys, user) -> dict:
    """Credentials from the token endpoint (GET / with the user's login token)."""
    response = requests.get(tg.url + "/", headers={"Authorization": f"Bearer {keys.token(user)}"}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def oss_bucket(tg, credentials) -> oss2.Bucket:
    auth = oss2.StsAuth(credentials["AccessKeyId"], credentials["AccessKeySecret"], credentials["SecurityToken"])
    return oss2.Bucket(auth, tg.gateway_url, BUCKET, is_path_style=True)


# MARK: Collections

def test_get_a_single_collection(tg, keys):
    ben = who(tg, keys, "ben", backend_id=True)
    response = ben.get("/images")  # GET {baseUri}/mobile/platform/storage/collections/images
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].split(";")[0] == "application/json"
    body = response.json()
    assert (body["id"], body["description"], body["userIsolated"]) == ("images", "Images", False)
    assert {"canonical", "self"} <= {entry["rel"] for entry in body["links"]}, body
    assert urllib.parse.urlsplit(follow(response, link(body, "self"))).path == API + "/images"
    isolated = ben.get("/Articles").json()
    assert (isolated["id"], isolated["userIsolated"], isolated["description"]) == ("Articles", True, "Articles, one space per author")
    assert_error(ben.get("/nosuchcollection"), 404)
    assert_error(ben.get("/ARTICLES"), 404)  # names are case-sensitive
    # No permission: anonymous 401 with a Bearer challenge, a user without a role on it 403.
    anonymous = who(tg, keys, None).get("/images")
    assert_error(anonymous, 401)
    assert anonymous.headers["WWW-Authenticate"] == 'Bearer realm="tollgate"'
    assert_error(who(tg, keys, "zed").get("/images"), 403)
    assert_error(who(tg, keys, "eva").get("/profiles"), 403)


def test_get_all_collections(tg, keys):
    def ids(user):
        response = who(tg, keys, user).get("")  # GET {baseUri}/mobile/platform/storage/collections
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["count"] == len(body["items"]) and body["hasMore"] is False, body
        for item in body["items"]:
            assert set(item) >= {"id", "description", "userIsolated", "links"}, item
            assert {"canonical", "self"} <= {entry["rel"] for entry in item["links"]}, item
            assert item["userIsolated"] == (COLLECTIONS[item["id"]]["Type"] == "isolated"), item
        return {item["id"] for item in body["items"]}

    readable_by_authors = {name for name, c in COLLECTIONS.items()
                           if "Author" in c.get("ReadWrite", []) + c.get("ReadOnly", []) or c.get("Anonymous") and c["Type"] == "shared"}
    assert ids("ben") == readable_by_authors
    assert ids("dee") == {"articles", "Articles", "openarticles", "images", "feed"}
    assert ids("raj") == {"Articles", "openarticles"}
    # Anonymous: the shared collections open to anonymous callers only (the isolated one with
    # "Anonymous": true is not).
    assert ids(None) == {"openarticles"}
    assert ids("zed") == {"openarticles"}


# MARK: The seed's REST section, as literal HTTP

def test_store_an_object_with_put_and_update_it(tg, keys):
    ben, art = who(tg, keys, "ben", backend_id=True), who(tg, keys, "art")
    png = bytes(range(256)) * 8
    created = ben.put("images", "part1524", png, content_type="image/png")  # PUT …/images/objects/part1524
    assert created.status_code == 201, created.text
    assert created.headers["ETag"].startswith('"') and created.headers["ETag"].endswith('"')
    location = follow(created, created.headers["Location"])
    assert urllib.parse.urlsplit(location).path == API + "/images/objects/part1524"
    meta = created.json()
    assert meta["id"] == "part1524" and meta["name"] == "part1524"  # the display name defaults to the id
    assert meta["contentLength"] == len(png) and meta["contentType"] == "image/png"
    assert norm_etag(meta["eTag"]) == norm_etag(created.headers["ETag"])
    assert meta["createdBy"] == meta["modifiedBy"] == "ben"
    assert {"canonical", "self"} <= {entry["rel"] for entry in meta["links"]}
    created_on = iso(meta["createdOn"])
    assert abs(created_on - datetime.now(timezone.utc)) < timedelta(minutes=2)

    fetched = ben.get(location)
    assert fetched.status_code == 200 and fetched.content == png
    assert fetched.headers["Content-Type"] == "image/png"

    time.sleep(1.1)
    replaced = art.put("images", "part1524", b"new content", content_type="text/plain",
                       headers={"Oracle-Mobile-Name": "Part 1524"})
    assert replaced.status_code == 200, replaced.text
    meta2 = replaced.json()
    assert norm_etag(replaced.headers["ETag"]) != norm_etag(created.headers["ETag"])  # the ETag changes
    assert (meta2["createdBy"], meta2["modifiedBy"], meta2["name"]) == ("ben", "art", "Part 1524")
    assert iso(meta2["createdOn"]) == created_on and iso(meta2["modifiedOn"]) > created_on
    got = ben.obj("GET", "images", "part1524")
    assert (got.content, got.headers["Content-Type"]) == (b"new content", "text/plain")
    assert got.headers["Oracle-Mobile-Name"] == "Part 1524"
    assert (got.headers["Oracle-Mobile-Created-By"], got.headers["Oracle-Mobile-Modified-By"]) == ("ben", "art")

    # Without Content-Type: application/octet-stream. Exact bytes, no transformation.
    raw = ben.put("images", "raw", b"\x00\x01binary\xff", headers={"Content-Encoding": "base64"})
    assert raw.status_code == 201, raw.text
    got = ben.obj("GET", "images", "raw")
    assert got.content == b"\x00\x01binary\xff"
    assert got.headers["Content-Type"] == "application/octet-stream"
    # The object is an ordinary one in the store (shared: <Prefix><id>).
    body = root_client(tg).get_object(Bucket=BUCKET, Key="images/part1524")["Body"].read()
    assert body == b"new content"


def test_create_only_if_none_match_star(tg, keys):
    ben = who(tg, keys, "ben")
    # PUT …/images/objects/part1542, If-None-Match: *
    first = ben.put("images", "part1542", b"first", content_type="text/plain", headers={"If-None-Match": "*"})
    assert first.status_code == 201, first.text
    second = ben.put("images", "part1542", b"second", content_type="text/plain", headers={"If-None-Match": "*"})
    assert_error(second, 412)
    assert ben.obj("GET", "images", "part1542").content == b"first"
    # Put If Absent: PUT …/profiles/objects/uprofile, If-None-Match: *
    profile = ben.put("profiles", "uprofile", b"myProfile.txt's bytes", content_type="text/plain",
                      headers={"If-None-Match": "*"})
    assert profile.status_code == 201, profile.text
    assert_error(ben.put("profiles", "uprofile", b"again", headers={"If-None-Match": "*"}), 412)


def test_post_generates_the_id(tg, keys):
    ben = who(tg, keys, "ben")
    text = b"Hello World from Oracle Autonomous Mobile Cloud Enterprise Cordova SDK"
    response = ben.request("POST", "/images/objects", data=text,
                           headers={"Content-Type": "text/plain", "Oracle-Mobile-Name": "XYZ.pdf"})
    assert response.status_code == 201, response.text
    body = response.json()
    object_id = body["id"]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", object_id), object_id
    assert body["name"] == "XYZ.pdf" and body["createdBy"] == "ben"
    location = follow(response, response.headers["Location"])
    assert urllib.parse.urlsplit(location).path == f"{API}/images/objects/{object_id}"
    got = ben.get(location)
    assert got.status_code == 200 and got.content == text
    assert got.headers["Oracle-Mobile-Name"] == "XYZ.pdf" and got.headers["Content-Type"] == "text/plain"
    second = ben.request("POST", "/images/objects", data=b"another")
    assert second.status_code == 201 and second.json()["id"] != object_id


def test_get_and_head_return_the_exact_bytes_and_metadata(tg, keys):
    ben = who(tg, keys, "ben")
    data = b"%PDF-1.7 " + bytes(range(256)) * 40
    put = ben.put("images", "doc.pdf", data, content_type="application/pdf", headers={"Oracle-Mobile-Name": "Report"})
    assert put.status_code in (200, 201), put.text
    got = ben.obj("GET", "images", "doc.pdf")
    assert got.status_code == 200 and got.content == data
    head = ben.obj("HEAD", "images", "doc.pdf")
    assert head.status_code == 200 and head.content == b""
    for response in (got, head):
        h = response.headers
        assert h["Content-Type"] == "application/pdf"
        assert int(h["Content-Length"]) == len(data)
        assert norm_etag(h["ETag"]) == norm_etag(put.headers["ETag"])
        assert h["Accept-Ranges"] == "bytes"
        assert h["Oracle-Mobile-Name"] == "Report"
        assert h["Oracle-Mobile-Created-By"] == h["Oracle-Mobile-Modified-By"] == "ben"
        iso(h["Oracle-Mobile-Created-On"]), iso(h["Oracle-Mobile-Modified-On"])
        assert urllib.parse.urlsplit(follow(response, h["Oracle-Mobile-Canonical-Link"])).path == API + "/images/objects/doc.pdf"
        last_modified = email.utils.parsedate_to_datetime(h["Last-Modified"])
        assert abs(last_modified - iso(h["Oracle-Mobile-Modified-On"])) < timedelta(seconds=1.5)
    assert_error(ben.obj("GET", "images", "nosuchobject"), 404)
    assert ben.obj("HEAD", "images", "nosuchobject").status_code == 404
    # Dee (Read-Only) reads, too.
    assert who(tg, keys, "dee").obj("GET", "images", "doc.pdf").content == data


def test_get_if_newer(tg, keys):
    ben = who(tg, keys, "ben")
    put = ben.put("images", "part1543", b"v1", content_type="text/plain")
    assert put.status_code in (200, 201), put.text
    etag = put.headers["ETag"]
    last_modified = ben.obj("HEAD", "images", "part1543").headers["Last-Modified"]
    assert ben.obj("GET", "images", "part1543", headers={"If-None-Match": etag}).status_code == 304
    assert ben.obj("GET", "images", "part1543", headers={"If-None-Match": "*"}).status_code == 304
    assert ben.obj("GET", "images", "part1543", headers={"If-None-Match": f'"0000", {etag}'}).status_code == 304
    assert ben.obj("HEAD", "images", "part1543", headers={"If-None-Match": etag}).status_code == 304
    # The seed's literal example: If-None-Match: "2" (not the current ETag) fetches.
    fetched = ben.obj("GET", "images", "part1543", headers={"If-None-Match": '"2"'})
    assert fetched.status_code == 200 and fetched.content == b"v1"
    assert ben.obj("GET", "images", "part1543", headers={"If-Modified-Since": last_modified}).status_code == 304
    later = http_date(datetime.now(timezone.utc) + timedelta(minutes=5))
    assert ben.obj("GET", "images", "part1543", headers={"If-Modified-Since": later}).status_code == 304
    old = ben.obj("GET", "images", "part1543", headers={"If-Modified-Since": "Mon, 30 Jun 2014 19:43:31 GMT"})
    assert old.status_code == 200 and old.content == b"v1"
    # If-None-Match takes precedence over If-Modified-Since (RFC 9110 13.2.2).
    assert ben.obj("GET", "images", "part1543", headers={"If-None-Match": '"2"', "If-Modified-Since": later}).status_code == 200


def test_optimistic_locking(tg, keys):
    ben, art = who(tg, keys, "ben"), who(tg, keys, "art")
    first = ben.put("images", "part1600", b"version 1", content_type="text/plain")
    assert first.status_code in (200, 201), first.text
    etag1 = first.headers["ETag"]
    # If-Match with the ETag we read: replaced.
    second = art.put("images", "part1600", b"version 2", content_type="text/plain", headers={"If-Match": etag1})
    assert second.status_code == 200, second.text
    etag2 = second.headers["ETag"]
    # A stale If-Match: 412, nothing changes.
    assert_error(ben.put("images", "part1600", b"lost", content_type="text/plain", headers={"If-Match": etag1}), 412)
    assert ben.obj("GET", "images", "part1600").content == b"version 2"
    # If-None-Match with an ETag, HTTP's meaning: refused when it IS the current one.
    assert_error(ben.put("images", "part1600", b"x", headers={"If-None-Match": etag2}), 412)
    ok = ben.put("images", "part1600", b"version 3", content_type="text/plain", headers={"If-None-Match": '"2"'})
    assert ok.status_code == 200, ok.text
    # If-Unmodified-Since: the seed's date (2014) is before the object's last change: 412.
    assert_error(ben.put("images", "part1600", b"x", headers={"If-Unmodified-Since": "Mon, 30 Jun 2014 19:43:31 GMT"}), 412)
    current = ben.obj("HEAD", "images", "part1600")
    fresh = ben.put("images", "part1600", b"version 4", content_type="text/plain",
                    headers={"If-Unmodified-Since": current.headers["Last-Modified"]})
    assert fresh.status_code == 200, fresh.text
    # If-Match of a missing object: 412 (there is no current representation).
    assert_error(ben.put("images", "no-such-part", b"x", headers={"If-Match": etag1}), 412)
    assert ben.obj("GET", "images", "no-such-part").status_code == 404
    # GET with If-Match / If-Unmodified-Since failing: 412 too.
    assert_error(ben.obj("GET", "images", "part1600", headers={"If-Match": etag1}), 412)
    assert_error(ben.obj("GET", "images", "part1600", headers={"If-Unmodified-Since": "Mon, 30 Jun 2014 19:43:31 GMT"}), 412)
    assert ben.obj("GET", "images", "part1600", headers={"If-Match": fresh.headers["ETag"]}).content == b"version 4"


def test_delete(tg, keys):
    ben = who(tg, keys, "ben")
    put = ben.put("images", "part1524-del", b"to go", content_type="text/plain")
    assert put.status_code == 201, put.text
    # Safe deletes first: a stale If-Match or an old If-Unmodified-Since is refused.
    assert_error(ben.obj("DELETE", "images", "part1524-del", headers={"If-Match": '"2"'}), 412)
    assert_error(ben.obj("DELETE", "images", "part1524-del",
                         headers={"If-Unmodified-Since": "Mon, 30 Jun 2014 19:43:31 GMT"}), 412)
    assert ben.obj("GET", "images", "part1524-del").content == b"to go"
    deleted = ben.obj("DELETE", "images", "part1524-del", headers={"If-Match": put.headers["ETag"]})
    assert deleted.status_code == 204 and deleted.content == b""
    assert_error(ben.obj("GET", "images", "part1524-del"), 404)
    assert_error(ben.obj("DELETE", "images", "part1524-del"), 404)
    # Unconditional: DELETE …/images/objects/part1524
    assert ben.put("images", "part1524-plain", b"x").status_code == 201
    assert ben.obj("DELETE", "images", "part1524-plain").status_code == 204
    assert_error(ben.obj("DELETE", "images", "part1524-plain"), 404)
    with pytest.raises(ClientError) as excinfo:
        root_client(tg).head_object(Bucket=BUCKET, Key="images/part1524-plain")
    assert error_of(excinfo)[1] == 404


def test_read_part_of_an_object(tg, keys):
    ben = who(tg, keys, "ben")
    data = bytes((i * 7 + 3) % 251 for i in range(1000))
    assert ben.put("profiles", "ranged", data, content_type="text/x-profile").status_code in (200, 201)

    def ranged(spec):
        return ben.obj("GET", "profiles", "ranged", headers={"Range": spec})

    for spec, first, last in (("bytes=0-99", 0, 99), ("bytes=100-199", 100, 199), ("bytes=-100", 900, 999),
                              ("bytes=990-", 990, 999), ("bytes=950-5000", 950, 999)):
        response = ranged(spec)
        assert response.status_code == 206, (spec, response.status_code, response.text[:200])
        assert response.headers["Content-Range"] == f"bytes {first}-{last}/1000", spec
        assert response.content == data[first:last + 1], spec
        assert int(response.headers["Content-Length"]) == last - first + 1
    # First 100 and last 100 bytes: bytes=0-99,-100 → 206 multipart/byteranges
    both = ranged("bytes=0-99,-100")
    assert both.status_code == 206, both.text[:200]
    assert byteranges(both) == [("bytes 0-99/1000", "text/x-profile", data[:100]),
                                ("bytes 900-999/1000", "text/x-profile", data[900:])]
    three = byteranges(ranged("bytes=0-0,10-19,-1"))
    assert [part[2] for part in three] == [data[0:1], data[10:20], data[999:]]
    unsatisfiable = ranged("bytes=5000-")
    assert_error(unsatisfiable, 416)
    assert unsatisfiable.headers.get("Content-Range", "bytes */1000") == "bytes */1000"
    # The literal seed request (…/profiles/objects/uprofile, Range: bytes=0-99,-100) on a short profile.
    profile = b"P" * 60 + b"Q" * 90 + b"R" * 100
    ben.put("profiles", "uprofile", profile, content_type="text/plain")
    parts = byteranges(ben.obj("GET", "profiles", "uprofile", headers={"Range": "bytes=0-99,-100"}))
    assert [(p[0], p[2]) for p in parts] == [("bytes 0-99/250", profile[:100]), ("bytes 150-249/250", profile[150:])]


def test_accept_must_match_the_stored_type(tg, keys):
    ben = who(tg, keys, "ben")
    assert ben.put("images", "photo", b"\x89PNG....", content_type="image/png").status_code in (200, 201)
    for accept in ("image/png", "image/*", "*/*", "text/html, image/png;q=0.5", "image/PNG", "text/plain;q=0.9, */*;q=0.1"):
        response = ben.obj("GET", "images", "photo", headers={"Accept": accept})
        assert response.status_code == 200 and response.content == b"\x89PNG....", (accept, response.status_code)
    for accept in ("text/plain", "application/json, text/*", "image/jpeg", "image/png;q=0", "image/png;q=0, */*",
                   "image/*;q=0, text/plain"):
        assert_error(ben.obj("GET", "images", "photo", headers={"Accept": accept}), 406)


def test_listing_pages_with_limit_offset_and_links(tg, keys):
    ben = who(tg, keys, "ben")
    ids = [f"obj-{i:03d}" for i in range(260)]
    for object_id in ids:
        assert ben.put("pages", object_id, object_id.encode(), content_type="text/plain").status_code == 201
    whole = ben.listing("pages")
    assert whole.status_code == 200, whole.text
    body = whole.json()
    assert (body["limit"], body["offset"], body["count"], body["hasMore"]) == (100, 0, 100, True)
    assert [item["id"] for item in body["items"]] == ids[:100]  # default order: id ascending
    item = body["items"][0]
    assert set(item) >= {"id", "name", "contentLength", "contentType", "eTag", "createdBy", "createdOn",
                         "modifiedBy", "modifiedOn", "links"}, item
    assert (item["contentLength"], item["contentType"], item["createdBy"]) == (7, "text/plain", "ben")
    assert {"canonical", "self"} <= {entry["rel"] for entry in item["links"]}
    assert {"canonical", "self", "next"} <= {entry["rel"] for entry in body["links"]}
    assert link(body, "prev") is None
    next_url = follow(whole, link(body, "next"))
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(next_url).query)
    assert query.get("offset") == ["100"] and "cursor" in query, next_url

    # The seed's example: GET …/objects?offset=200&limit=50
    page = ben.listing("pages", offset=200, limit=50)
    body = page.json()
    assert [item["id"] for item in body["items"]] == ids[200:250]
    assert (body["offset"], body["limit"], body["count"], body["hasMore"]) == (200, 50, 50, True)
    following = ben.get(follow(page, link(body, "next"))).json()
    assert [item["id"] for item in following["items"]] == ids[250:]
    assert following["hasMore"] is False and link(following, "next") is None
    previous = ben.get(follow(page, link(body, "prev"))).json()
    assert [item["id"] for item in previous["items"]] == ids[150:200]

    # Walk by next links from the start: every object once, in order.
    seen, response = [], ben.listing("pages", limit=30)
    for _ in range(20):
        body = response.json()
        seen += [item["id"] for item in body["items"]]
        if not body["hasMore"]:
            break
        response = ben.get(follow(response, link(body, "next")))
    assert seen == ids

    total = ben.listing("pages", totalResults="true", limit=10).json()
    assert total["totalResults"] == 260 and total["count"] == 10
    assert len(ben.listing("pages", limit=1000).json()["items"]) == 260
    assert ben.listing("pages", offset=300).json()["items"] == []
    for bad in ({"limit": 0}, {"limit": 1001}, {"limit": "many"}):
        assert_error(ben.listing("pages", **bad), 400)


def test_order_by_each_field(tg, keys):
    ben, art, bonapart = (who(tg, keys, u) for u in ("ben", "art", "bonapart"))
    steps = [  # (writer, id, display name, size); one second apart so that times differ at any precision
        (art, "s-a", "alpha", 10), (ben, "s-d", "delta", 30), (bonapart, "s-c", "charlie", 40),
        (ben, "s-b", "bravo", 20), (art, "s-d", "delta", 35),  # art replaces ben's delta last
    ]
    for writer, object_id, name, size in steps:
        response = writer.put("sorted", object_id, b"x" * size, content_type="text/plain",
                              headers={"Oracle-Mobile-Name": name})
        assert response.status_code in (200, 201), response.text
        time.sleep(1.05)
    expected = {
        "name": ["s-a", "s-b", "s-c", "s-d"],
        "contentLength": ["s-a", "s-b", "s-d", "s-c"],
        "createdOn": ["s-a", "s-d", "s-c", "s-b"],
        "modifiedOn": ["s-a", "s-c", "s-b", "s-d"],
    }
    by_person = {"createdBy": {"s-a": "art", "s-d": "ben", "s-c": "bonapart", "s-b": "ben"},
                 "modifiedBy": {"s-a": "art", "s-d": "art", "s-c": "bonapart", "s-b": "ben"}}
    default = [item["id"] for item in ben.listing("sorted").json()["items"]]
    assert default == ["s-a", "s-b", "s-c", "s-d"]
    for field in ("name", "modifiedBy", "modifiedOn", "createdBy", "createdOn", "contentLength"):
        for direction in ("", ":asc", ":desc"):
            response = ben.listing("sorted", orderBy=field + direction)
            assert response.status_code == 200, (field, direction, response.text)
            order = [item["id"] for item in response.json()["items"]]
            if field in expected:
                want = expected[field][::-1] if direction == ":desc" else expected[field]
                assert order == want, (field, direction, order)
            else:
                people = [by_person[field][object_id] for object_id in order]
                assert people == sorted(people, reverse=direction == ":desc"), (field, direction, order, people)
                assert sorted(order) == sorted(by_person[field])


def test_query_is_a_case_sensitive_partial_match(tg, keys):
    ben, art, bonapart = (who(tg, keys, u) for u in ("ben", "art", "bonapart"))
    for writer, object_id, name in ((ben, "part1524", None), (art, "o1", "Particle"), (bonapart, "o2", "two"),
                                    (ben, "o3", "three"), (art, "o4", "departure"), (art, "PART9", None)):
        headers = {"Oracle-Mobile-Name": name} if name else None
        assert writer.put("search", object_id, b"data", headers=headers).status_code == 201
    assert bonapart.put("search", "o3", b"edited by bonapart").status_code == 200
    # GET …/objects?q=part: the id part1524, the name departure, bonapart who created o2 and modified o3.
    response = ben.listing("search", q="part")
    assert response.status_code == 200, response.text
    assert {item["id"] for item in response.json()["items"]} == {"part1524", "o2", "o3", "o4"}
    assert {item["id"] for item in ben.listing("search", q="Part").json()["items"]} == {"o1"}
    assert {item["id"] for item in ben.listing("search", q="ben").json()["items"]} == {"part1524", "o3"}
    assert ben.listing("search", q="nothing-like-this").json()["items"] == []


def test_offline_caching_headers(tg, keys):
    ben = who(tg, keys, "ben")
    for collection in ("images", "cached", "profiles"):
        assert ben.put(collection, "cacheme", b"cache me", content_type="text/plain").status_code in (200, 201)
    for collection, ttl in (("images", 3600), ("cached", 86400)):
        before = datetime.now(timezone.utc).replace(microsecond=0)
        for method in ("GET", "HEAD"):
            response = ben.obj(method, collection, "cacheme", headers={"Oracle-Mobile-Sync-Agent": "true"})
            assert response.status_code == 200
            expires = response.headers["Oracle-Mobile-Sync-Expires"]
            assert re.fullmatch(r"[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT", expires), expires
            when = email.utils.parsedate_to_datetime(expires)
            assert before + timedelta(seconds=ttl - 5) <= when <= before + timedelta(seconds=ttl + 5), (collection, expires)
            assert "Oracle-Mobile-Sync-No-Store" not in response.headers
    for method in ("GET", "HEAD"):
        response = ben.obj(method, "profiles", "cacheme", headers={"Oracle-Mobile-Sync-Agent": "true"})
        assert response.status_code == 200
        assert response.headers["Oracle-Mobile-Sync-No-Store"] == "true"
        assert "Oracle-Mobile-Sync-Expires" not in response.headers


def test_bearer_tokens_that_do_not_count(tg, keys):
    ben = who(tg, keys, "ben")
    assert ben.put("images", "guarded", b"x").status_code in (200, 201)
    expired = keys.token("ben", lifetime=-3600)
    for bearer in ("not-a-jwt", expired, vended(tg, keys, "ben")["SecurityToken"],
                   jwt.encode({"iss": keys.issuer, "aud": AUDIENCE, "sub": "ben", "exp": int(time.time()) + 600},
                              "a-shared-secret-that-nobody-configured-0123456789", algorithm="HS256")):
        for method, path in (("GET", "/images/objects/guarded"), ("GET", "/images"), ("PUT", "/images/objects/x")):
            assert_error(Client(tg, keys, None, bearer=bearer).request(method, path, data=b"x"), 401)
        # Also on a collection open to anonymous callers: a bad token is refused, not downgraded.
        assert_error(Client(tg, keys, None, bearer=bearer).obj("GET", "openarticles", "anything"), 401)


def test_collections_reload_without_a_restart(keys):
    """Collections are hot-reloaded like the rest of config.json: added, changed (a role loses
    its permission) and removed on a running server, the objects staying in the store."""
    server = magazine_server(keys, {"articles": COLLECTIONS["articles"]}).start()
    try:
        ben, dee = who(server, keys, "ben"), who(server, keys, "dee")
        assert_error(ben.get("/reviews"), 404)

        def reconfigure(collections: dict, until, what: str):
            config = json.loads(server.config_path.read_text())
            config["Collections"] = collections
            temporary = server.config_path.with_suffix(".tmp")
            temporary.write_text(json.dumps(config, indent=2))
            temporary.replace(server.config_path)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if until():
                    return
                time.sleep(0.2)
            raise AssertionError(f"not reloaded within 15 s: {what}\n{server.output()[-2000:]}")

        reviews = {"Type": "shared", "Description": "Reviews", "ReadWrite": ["Author"], "ReadOnly": ["InactiveAuthor"]}
        reconfigure({"articles": COLLECTIONS["articles"], "reviews": reviews},
                    lambda: ben.get("/reviews").status_code == 200, "a new collection")
        assert ben.put("reviews", "first", b"a review", content_type="text/plain").status_code == 201
        assert dee.obj("GET", "reviews", "first").content == b"a review"
        reconfigure({"articles": COLLECTIONS["articles"], "reviews": {**reviews, "ReadOnly": []}},
                    lambda: dee.obj("GET", "reviews", "first").status_code == 403, "Dee's permission withdrawn")
        reconfigure({"articles": COLLECTIONS["articles"]}, lambda: ben.get("/reviews").status_code == 404,
                    "the collection removed")
        assert_error(ben.obj("GET", "reviews", "first"), 404)
        assert root_client(server).get_object(Bucket=BUCKET, Key="reviews/first")["Body"].read() == b"a review"
    finally:
        server.cleanup()


# MARK: The magazine: permission tables

def run_table(tg, keys, collection: str, rows: list) -> list:
    """Runs (user, method, id, user=, body, expected status) rows in order; returns the mismatches."""
    failures = []
    for user, method, object_id, space, expected in rows:
        client = who(tg, keys, user)
        params = {"user": space} if space else None
        if method == "LIST":
            response = client.request("GET", f"/{collection}/objects", params=params)
        elif method == "CHANGES":
            response = client.request("GET", f"/{collection}/changes", params=params)
        elif method == "POST":
            response = client.request("POST", f"/{collection}/objects", params=params, data=b"posted")
        elif method == "PUT":
            response = client.request("PUT", f"/{collection}/objects/{object_id}", params=params,
                                      data=f"{object_id} by {user}".encode(), headers={"Content-Type": "text/plain"})
        else:
            response = client.request(method, f"/{collection}/objects/{object_id}", params=params)
        if response.status_code != expected:
            failures.append(f"{user or 'anonymous'} {method} {collection}/{object_id or ''}"
                            f"{'?user=' + space if space else ''}: expected {expected}, got {response.status_code} {response.text[:120]}")
        elif expected >= 400 and method != "HEAD":
            try:
                assert_error(response, expected)
            except AssertionError as error:
                failures.append(f"{user} {method} {collection}/{object_id}: error shape: {error}")
        if expected == 401:
            if response.headers.get("WWW-Authenticate") != 'Bearer realm="tollgate"':
                failures.append(f"{user} {method} {collection}/{object_id}: WWW-Authenticate {response.headers.get('WWW-Authenticate')!r}")
    return failures


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def listing_ids(tg, keys, caller, collection, **params) -> set:
    """The ids a listing shows (with their user for user=*), leaving out generated (POST) ids."""
    response = who(tg, keys, caller).listing(collection, limit=1000, **params)
    assert response.status_code == 200, response.text
    items = [item for item in response.json()["items"] if not UUID.fullmatch(item["id"])]
    return {(item.get("user"), item["id"]) if params.get("user") == "*" else item["id"] for item in items}


def text_of(tg, keys, user, collection, object_id, space=None) -> bytes:
    response = who(tg, keys, user).obj("GET", collection, object_id, user=space)
    assert response.status_code == 200, response.text
    return response.content


def test_shared_collection_articles(tg, keys):
    """Ben wrote bugs and bats, Art cows and dogs; dogs is shared and both edit it; Art and Ben
    modify any article; Dee reads everything and changes nothing."""
    setup = [("ben", "PUT", "bugs", None, 201), ("ben", "PUT", "bats", None, 201), ("art", "PUT", "cows", None, 201),
             ("art", "PUT", "dogs", None, 201), ("ben", "PUT", "dogs", None, 200)]
    assert run_table(tg, keys, "articles", setup) == []
    table = [
        ("ben", "GET", "cows", None, 200), ("art", "GET", "bugs", None, 200), ("art", "GET", "dogs", None, 200),
        ("art", "PUT", "bugs", None, 200), ("ben", "PUT", "cows", None, 200), ("art", "HEAD", "bats", None, 200),
        ("ben", "LIST", None, None, 200), ("ben", "CHANGES", None, None, 200),
        ("dee", "GET", "dogs", None, 200), ("dee", "GET", "bugs", None, 200), ("dee", "GET", "cows", None, 200),
        ("dee", "HEAD", "bats", None, 200), ("dee", "LIST", None, None, 200), ("dee", "CHANGES", None, None, 200),
        ("dee", "PUT", "dogs", None, 403), ("dee", "PUT", "mice", None, 403), ("dee", "POST", None, None, 403),
        ("dee", "DELETE", "bats", None, 403),
        # Editor and Publisher have no permission on the shared collection, nor has a role-less user.
        ("eva", "GET", "dogs", None, 403), ("raj", "LIST", None, None, 403), ("zed", "GET", "dogs", None, 403),
        ("zed", "PUT", "dogs", None, 403), ("zed", "CHANGES", None, None, 403),
        # Anonymous: not on this collection.
        (None, "GET", "dogs", None, 401), (None, "PUT", "dogs", None, 401), (None, "LIST", None, None, 401),
        (None, "DELETE", "dogs", None, 401), (None, "CHANGES", None, None, 401),
        ("ben", "DELETE", "bats", None, 204), ("art", "GET", "bats", None, 404), ("art", "DELETE", "bats", None, 404),
    ]
    assert run_table(tg, keys, "articles", table) == []
    assert listing_ids(tg, keys, "dee", "articles") == {"bugs", "cows", "dogs"}
    dogs = who(tg, keys, "dee").obj("HEAD", "articles", "dogs").headers
    assert (dogs["Oracle-Mobile-Created-By"], dogs["Oracle-Mobile-Modified-By"]) == ("art", "ben")
    assert text_of(tg, keys, "dee", "articles", "bugs") == b"bugs by art"
    # The same objects in the store, shared: articles/<id>.
    s3 = root_client(tg)
    assert s3.get_object(Bucket=BUCKET, Key="articles/dogs")["Body"].read() == b"dogs by ben"
    assert {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="articles/")["Contents"]} == \
        {"articles/bugs", "articles/cows", "articles/dogs"}


def test_isolated_collection_articles(tg, keys):
    """Ben and Art each have their own space; Dee reads only hers; Eva (Read-Write All Users)
    edits anyone's with ?user=; Raj (Read-Only All Users) reads anyone's; same ids in different
    spaces do not collide; anonymous callers are refused although the collection says Anonymous."""
    setup = [("ben", "PUT", "bugs", None, 201), ("ben", "PUT", "bats", None, 201), ("art", "PUT", "cows", None, 201),
             ("art", "PUT", "dogs", None, 201),
             ("eva", "PUT", "dogs", "dee", 201)]  # the editor returns Dee's article to her space
    assert run_table(tg, keys, "Articles", setup) == []
    table = [
        ("ben", "GET", "bugs", None, 200), ("ben", "GET", "bugs", "ben", 200), ("ben", "PUT", "bugs", None, 200),
        ("ben", "GET", "cows", None, 404), ("ben", "GET", "cows", "art", 403), ("ben", "PUT", "cows", "art", 403),
        ("ben", "DELETE", "dogs", "art", 403), ("ben", "LIST", None, "art", 403), ("ben", "LIST", None, "*", 403),
        ("ben", "CHANGES", None, "art", 403),
        ("ben", "PUT", "dogs", None, 201),  # Ben's own dogs: no conflict with Art's or Dee's
        ("ben", "POST", None, None, 201),
        ("art", "GET", "dogs", None, 200), ("art", "GET", "bugs", None, 404), ("art", "DELETE", "bats", "ben", 403),
        ("dee", "GET", "dogs", None, 200), ("dee", "LIST", None, None, 200), ("dee", "GET", "dogs", "art", 403),
        ("dee", "PUT", "cats", None, 403), ("dee", "PUT", "dogs", None, 403), ("dee", "POST", None, None, 403),
        ("dee", "DELETE", "dogs", None, 403),
        ("eva", "GET", "cows", "art", 200), ("eva", "PUT", "cows", "art", 200), ("eva", "GET", "bugs", "ben", 200),
        ("eva", "LIST", None, "*", 200), ("eva", "LIST", None, "ben", 200), ("eva", "CHANGES", None, "*", 200),
        ("eva", "DELETE", "bats", "ben", 204), ("eva", "POST", None, "art", 201),
        ("raj", "GET", "bugs", "ben", 200), ("raj", "GET", "dogs", "dee", 200), ("raj", "HEAD", "cows", "art", 200),
        ("raj", "LIST", None, "*", 200), ("raj", "LIST", None, "art", 200), ("raj", "CHANGES", None, "ben", 200),
        ("raj", "PUT", "bugs", "ben", 403), ("raj", "DELETE", "bugs", "ben", 403), ("raj", "POST", None, "ben", 403),
        ("zed", "GET", "bugs", "ben", 403), ("zed", "LIST", None, None, 403),
        (None, "GET", "bugs", "ben", 401), (None, "GET", "bugs", None, 401), (None, "LIST", None, None, 401),
        (None, "PUT", "anon", None, 401), (None, "POST", None, None, 401), (None, "CHANGES", None, None, 401),
    ]
    assert run_table(tg, keys, "Articles", table) == []
    assert_error(who(tg, keys, None).get("/Articles"), 401)
    # Each author sees their own space only.
    assert listing_ids(tg, keys, "ben", "Articles") == {"bugs", "dogs"}
    assert listing_ids(tg, keys, "art", "Articles") == {"cows", "dogs"}
    assert listing_ids(tg, keys, "dee", "Articles") == {"dogs"}
    # The same id, three spaces, three objects.
    assert text_of(tg, keys, "art", "Articles", "dogs") == b"dogs by art"
    assert text_of(tg, keys, "dee", "Articles", "dogs") == b"dogs by eva"
    assert text_of(tg, keys, "ben", "Articles", "dogs") == b"dogs by ben"
    # Eva's edit went back into Art's space: Art reads it, and it says who did what.
    assert text_of(tg, keys, "art", "Articles", "cows") == b"cows by eva"
    cows = who(tg, keys, "art").obj("HEAD", "Articles", "cows").headers
    assert (cows["Oracle-Mobile-Created-By"], cows["Oracle-Mobile-Modified-By"]) == ("art", "eva")
    # ?user=* lists every space, each item saying whose it is.
    everyone = listing_ids(tg, keys, "raj", "Articles", user="*")
    assert everyone == {("ben", "bugs"), ("ben", "dogs"), ("art", "cows"),
                                                                   ("art", "dogs"), ("dee", "dogs")}
    assert listing_ids(tg, keys, "raj", "Articles", user="art") == {"cows", "dogs"}
    # The store: <Prefix><user>/<id>.
    s3 = root_client(tg)
    keys_in_store = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="Articles/")["Contents"]}
    assert {"Articles/ben/bugs", "Articles/ben/dogs", "Articles/art/cows", "Articles/art/dogs", "Articles/dee/dogs"} <= keys_in_store
    assert "Articles/ben/bats" not in keys_in_store
    assert s3.get_object(Bucket=BUCKET, Key="Articles/dee/dogs")["Body"].read() == b"dogs by eva"


def test_anonymous_shared_collection(tg, keys):
    """With anonymous access, anyone who reaches the backend submits, changes and reads, whatever
    their role: it overrides the role permissions (Dee may write here)."""
    assert run_table(tg, keys, "openarticles", [("ben", "PUT", "bugs", None, 201)]) == []
    table = [
        (None, "GET", "bugs", None, 200), (None, "HEAD", "bugs", None, 200), (None, "LIST", None, None, 200),
        (None, "PUT", "anon", None, 201), (None, "PUT", "bugs", None, 200), (None, "POST", None, None, 201),
        (None, "CHANGES", None, None, 200), (None, "DELETE", "anon", None, 204),
        ("dee", "PUT", "dee-wrote", None, 201), ("dee", "DELETE", "dee-wrote", None, 204),
        ("zed", "PUT", "zed-wrote", None, 201), ("eva", "GET", "zed-wrote", None, 200),
        ("raj", "PUT", "zed-wrote", None, 200), ("art", "DELETE", "zed-wrote", None, 204),
    ]
    assert run_table(tg, keys, "openarticles", table) == []
    anonymous = who(tg, keys, None).get("/openarticles")
    assert anonymous.status_code == 200 and anonymous.json()["userIsolated"] is False
    assert text_of(tg, keys, None, "openarticles", "bugs") == b"bugs by None"
    # Authenticated writers are still named.
    head = who(tg, keys, "ben").obj("HEAD", "openarticles", "bugs").headers
    assert head["Oracle-Mobile-Created-By"] == "ben"


# MARK: Optimistic locking race

def test_two_clients_replace_from_the_same_etag_exactly_one_wins(tg, keys):
    ben, art = who(tg, keys, "ben"), who(tg, keys, "art")
    for round_number in range(20):
        base = ben.put("race", "contested", f"base {round_number}".encode(), content_type="text/plain")
        assert base.status_code in (200, 201), base.text
        etag = base.headers["ETag"]
        barrier = threading.Barrier(2, timeout=30)
        results = {}

        def replace(client, name):
            body = f"{name} round {round_number}".encode()
            barrier.wait()
            response = client.put("race", "contested", body, content_type="text/plain", headers={"If-Match": etag})
            results[name] = (response.status_code, response.headers.get("ETag"), body)

        threads = [threading.Thread(target=replace, args=(c, n)) for c, n in ((ben, "ben"), (art, "art"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(status for status, _, _ in results.values()) == [200, 412], (round_number, results)
        winner = next(r for r in results.values() if r[0] == 200)
        stored = ben.obj("GET", "race", "contested")
        assert stored.content == winner[2], (round_number, stored.content, results)
        assert norm_etag(stored.headers["ETag"]) == norm_etag(winner[1])

    # Creating from nothing (If-None-Match: *) races the same way.
    for round_number in range(10):
        object_id = f"fresh-{round_number}"
        barrier = threading.Barrier(2, timeout=30)
        results = {}

        def create(client, name):
            barrier.wait()
            response = client.put("race", object_id, name.encode(), headers={"If-None-Match": "*"})
            results[name] = response.status_code

        threads = [threading.Thread(target=create, args=(c, n)) for c, n in ((ben, "ben"), (art, "art"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(results.values()) == [201, 412], results
        winner = next(name for name, status in results.items() if status == 201)
        assert ben.obj("GET", "race", object_id).content == winner.encode()


# MARK: ETags across the three dialects

def test_etags_work_across_s3_oss_and_the_storage_api(tg, keys):
    ben = who(tg, keys, "ben")
    s3 = root_client(tg)
    # Storage API → S3: the same ETag; boto3's IfMatch with it.
    put = ben.put("etags", "from-api", b"written by the storage API", content_type="text/plain")
    assert put.status_code == 201, put.text
    api_etag = put.headers["ETag"]
    head = s3.head_object(Bucket=BUCKET, Key="etags/from-api")
    assert norm_etag(head["ETag"]) == norm_etag(api_etag)
    assert head["ETag"] == api_etag  # "the same string S3 returns"
    assert s3.get_object(Bucket=BUCKET, Key="etags/from-api", IfMatch=api_etag)["Body"].read() == b"written by the storage API"
    with pytest.raises(ClientError) as excinfo:
        s3.get_object(Bucket=BUCKET, Key="etags/from-api", IfNoneMatch=api_etag)
    assert error_of(excinfo)[1] == 304

    # S3 → Storage API.
    s3_put = s3.put_object(Bucket=BUCKET, Key="etags/from-s3", Body=b"written with boto3", ContentType="text/plain")
    s3_etag = s3.head_object(Bucket=BUCKET, Key="etags/from-s3")["ETag"]
    assert s3_etag == s3_put["ETag"]
    got = ben.obj("GET", "etags", "from-s3", headers={"If-Match": s3_etag})
    assert got.status_code == 200 and got.content == b"written with boto3"
    assert norm_etag(got.headers["ETag"]) == norm_etag(s3_etag)
    assert ben.obj("GET", "etags", "from-s3", headers={"If-None-Match": s3_etag}).status_code == 304
    replaced = ben.put("etags", "from-s3", b"replaced via API", content_type="text/plain", headers={"If-Match": s3_etag})
    assert replaced.status_code == 200, replaced.text
    assert_error(ben.put("etags", "from-s3", b"stale", headers={"If-Match": s3_etag}), 412)
    # …and the Storage API's new ETag back in boto3: a stale one refused, the new one accepted.
    with pytest.raises(ClientError) as excinfo:
        s3.get_object(Bucket=BUCKET, Key="etags/from-s3", IfMatch=s3_etag)
    assert error_of(excinfo)[1] == 412
    assert s3.get_object(Bucket=BUCKET, Key="etags/from-s3", IfMatch=replaced.headers["ETag"])["Body"].read() == b"replaced via API"
    copy = s3.copy_object(Bucket=BUCKET, Key="etags/copied", CopySource={"Bucket": BUCKET, "Key": "etags/from-s3"},
                          CopySourceIfMatch=replaced.headers["ETag"])
    assert norm_etag(copy["CopyObjectResult"]["ETag"]) == norm_etag(replaced.headers["ETag"])

    # OSS (upper-case ETags) → Storage API, and the Storage API's ETag as an oss2 condition.
    bucket = oss_bucket(tg, vended(tg, keys, "walt"))
    result = bucket.put_object("etags/from-oss", b"written with oss2", headers={"Content-Type": "text/plain"})
    oss_etag = bucket.head_object("etags/from-oss").etag
    assert oss_etag == oss_etag.upper() and norm_etag(oss_etag) == norm_etag(result.etag)
    for value in (f'"{oss_etag}"', f'"{oss_etag.lower()}"'):
        got = ben.obj("GET", "etags", "from-oss", headers={"If-Match": value})
        assert got.status_code == 200 and got.content == b"written with oss2", value
    assert ben.obj("GET", "etags", "from-oss", headers={"If-None-Match": f'"{oss_etag}"'}).status_code == 304
    replaced = ben.put("etags", "from-oss", b"replaced again", content_type="text/plain", headers={"If-Match": f'"{oss_etag}"'})
    assert replaced.status_code == 200, replaced.text
    assert bucket.get_object("etags/from-oss", headers={"If-Match": replaced.headers["ETag"]}).read() == b"replaced again"
    with pytest.raises(oss2.exceptions.PreconditionFailed):
        bucket.get_object("etags/from-oss", headers={"If-Match": f'"{oss_etag}"'})


# MARK: Change feed

def changes_until(client: Client, collection: str, cursor: str, count: int, *, deadline: float, wait=10, **params):
    """Long-polls from `cursor` until `count` items came or the deadline passed: (items, cursor)."""
    items = []
    while len(items) < count and time.monotonic() < deadline:
        remaining = max(0, min(wait, int(deadline - time.monotonic())))
        response = client.changes(collection, since=cursor, wait=remaining, **params)
        assert response.status_code == 200, response.text
        body = response.json()
        items += body["items"]
        cursor = body["cursor"]
    return items, cursor


def current_cursor(client: Client, collection: str, **params) -> str:
    response = client.changes(collection, **params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["items"] == [] and isinstance(body["cursor"], str) and body["cursor"], body
    return body["cursor"]


class FeedReader(threading.Thread):
    """Follows a collection's feed with long polls from `cursor`, across connection failures (a
    server killed and restarted), until `stop` or its deadline."""

    def __init__(self, client: Client, collection: str, cursor: str, deadline: float):
        super().__init__(daemon=True)
        self.client, self.collection, self.cursor, self.deadline = client, collection, cursor, deadline
        self.items, self.errors, self.failed_polls = [], [], 0
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def run(self):
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            try:
                response = self.client.changes(self.collection, since=self.cursor, wait=5, timeout=20)
            except requests.RequestException:
                self.failed_polls += 1
                time.sleep(0.2)
                continue
            if response.status_code != 200:
                self.errors.append((response.status_code, response.text))
                time.sleep(0.2)
                continue
            body = response.json()
            with self.lock:
                self.items += body["items"]
                self.cursor = body["cursor"]

    def wait_for(self, count: int, timeout: float = 60) -> list:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.items) >= count:
                    break
            time.sleep(0.05)
        with self.lock:
            return list(self.items)


def check_feed(items: list, expected: list):
    """`expected`: (id, op, eTag or None) in commit order; a frozenset of such entries stands for
    changes of one request (multi-delete) whose mutual order is free."""
    flat, position = [], 0
    for entry in expected:
        group = sorted(entry) if isinstance(entry, frozenset) else [entry]
        got = items[position:position + len(group)]
        got_keys = sorted((item["id"], item["op"]) for item in got)
        assert got_keys == sorted((i, op) for i, op, _ in group), (position, got, group, items)
        for object_id, op, etag in group:
            item = next(i for i in got if (i["id"], i["op"]) == (object_id, op))
            iso(item["modifiedOn"])
            if op == "put":
                assert etag is None or norm_etag(item["eTag"]) == norm_etag(etag), (item, etag)
                assert isinstance(item["contentLength"], int)
            else:
                assert "eTag" not in item or item["eTag"] in (None, ""), item
        position += len(group)
        flat += group
    assert len(items) == position, ("more changes than committed", items[position:])


def test_long_poll_waits_then_answers_as_soon_as_a_change_commits(tg, keys):
    ben, dee = who(tg, keys, "ben"), who(tg, keys, "dee")
    assert ben.put("feed", "before-the-cursor", b"0").status_code in (200, 201)
    cursor = current_cursor(dee, "feed")
    started = time.monotonic()
    quiet = dee.changes("feed", since=cursor, wait=2)
    elapsed = time.monotonic() - started
    assert quiet.status_code == 200, quiet.text
    assert quiet.json()["items"] == [] and quiet.json()["cursor"] == cursor
    assert 1.5 <= elapsed < 10, elapsed
    assert dee.changes("feed", since=cursor, wait=0).json()["items"] == []

    answer = {}

    def reader():
        t0 = time.monotonic()
        response = dee.changes("feed", since=cursor, wait=30)
        answer.update(response=response, at=time.monotonic(), waited=time.monotonic() - t0)

    thread = threading.Thread(target=reader)
    thread.start()
    time.sleep(1.5)
    put = ben.put("feed", "wake-up", b"now", content_type="text/plain")
    committed = time.monotonic()
    assert put.status_code in (200, 201), put.text
    thread.join(40)
    body = answer["response"].json()
    assert [(i["id"], i["op"]) for i in body["items"]] == [("wake-up", "put")], body
    assert norm_etag(body["items"][0]["eTag"]) == norm_etag(put.headers["ETag"])
    assert body["items"][0]["modifiedBy"] == "ben" and body["items"][0]["contentLength"] == 3
    assert answer["at"] - committed < 3, "the long poll did not answer when the change committed"
    assert 1.0 <= answer["waited"] < 10
    assert body["cursor"] != cursor
    # Bad requests.
    assert_error(dee.changes("feed", since="!!not a cursor!!"), 400)
    for bad in ({"limit": 0}, {"limit": 1001}):
        assert_error(dee.changes("feed", since=cursor, **bad), 400)
    # limit and hasMore.
    for i in range(5):
        ben.put("feed", f"burst-{i}", b"b")
    first = dee.changes("feed", since=body["cursor"], limit=2).json()
    assert [i["id"] for i in first["items"]] == ["burst-0", "burst-1"] and first["hasMore"] is True
    rest = dee.changes("feed", since=first["cursor"], limit=100).json()
    assert [i["id"] for i in rest["items"]] == ["burst-2", "burst-3", "burst-4"] and rest["hasMore"] is False


def test_a_cursor_of_an_empty_feed_works(tg, keys):
    """A client's first sync of a collection nobody has written yet: the cursor it takes is valid
    (no items, no 410), and the first change comes after it; in a shared collection and in a
    user's space of an isolated one."""
    for collection, user in (("untouched", "ben"), ("drafts", "art")):
        client = who(tg, keys, user)
        cursor = current_cursor(client, collection)
        empty = client.changes(collection, since=cursor, wait=1)
        assert empty.status_code == 200, (collection, empty.text)
        assert empty.json()["items"] == [] and empty.json()["cursor"] == cursor
        put = client.put(collection, "first", b"the first change")
        assert put.status_code == 201, put.text
        after = client.changes(collection, since=cursor)
        assert after.status_code == 200, (collection, after.text)
        assert [(i["id"], i["op"], norm_etag(i["eTag"])) for i in after.json()["items"]] == \
            [("first", "put", norm_etag(put.headers["ETag"]))]
        assert current_cursor(client, collection) == after.json()["cursor"]


def test_isolation_bob_never_sees_alices_changes(tg, keys):
    alice, bob, eva = who(tg, keys, "alice"), who(tg, keys, "bob"), who(tg, keys, "eva")
    # A change in each space first (a feed that never had one is test_a_cursor_of_an_empty_feed_works's).
    assert alice.put("inbox", "hello", b"alice").status_code in (200, 201)
    assert bob.put("inbox", "hello", b"bob").status_code in (200, 201)
    alice_cursor, bob_cursor = current_cursor(alice, "inbox"), current_cursor(bob, "inbox")
    everyone_cursor = current_cursor(eva, "inbox", user="*")
    eva_alice_cursor = current_cursor(eva, "inbox", user="alice")
    bob_polls = {}

    def bob_waits():
        # A long poll by Bob while only Alice writes: it may end early, but never with her keys.
        response = bob.changes("inbox", since=bob_cursor, wait=4)
        bob_polls["first"] = response.json()

    thread = threading.Thread(target=bob_waits)
    thread.start()
    time.sleep(0.5)
    assert alice.put("inbox", "secret-1", b"alice 1").status_code == 201
    assert alice.put("inbox", "secret-2", b"alice 2").status_code == 201
    root_client(tg).put_object(Bucket=BUCKET, Key="inbox/alice/via-s3", Body=b"alice's, through S3")
    thread.join(30)
    assert bob_polls["first"]["items"] == [], bob_polls
    assert bob.put("inbox", "mine", b"bob's").status_code == 201
    assert alice.obj("DELETE", "inbox", "secret-1").status_code == 204

    deadline = time.monotonic() + 30
    changes_until(bob, "inbox", bob_cursor, 1, deadline=deadline, wait=2)
    bob_items = bob.changes("inbox", since=bob_cursor, wait=0).json()["items"]
    assert [(i["id"], i["op"]) for i in bob_items] == [("mine", "put")], bob_items
    assert bob_items[0].get("user") in (None, "bob")
    alice_items, _ = changes_until(alice, "inbox", alice_cursor, 4, deadline=deadline, wait=2)
    assert [(i["id"], i["op"]) for i in alice_items] == [("secret-1", "put"), ("secret-2", "put"), ("via-s3", "put"),
                                                        ("secret-1", "delete")], alice_items
    # Bob cannot read Alice's feed; Eva (Read-Write All Users) can, and every space with user=*.
    assert_error(bob.changes("inbox", since=bob_cursor, user="alice"), 403)
    everyone, _ = changes_until(eva, "inbox", everyone_cursor, 5, deadline=deadline, wait=2, user="*")
    assert [(i.get("user"), i["id"], i["op"]) for i in everyone] == [
        ("alice", "secret-1", "put"), ("alice", "secret-2", "put"), ("alice", "via-s3", "put"), ("bob", "mine", "put"),
        ("alice", "secret-1", "delete")], everyone
    only_alice, _ = changes_until(eva, "inbox", eva_alice_cursor, 4, deadline=deadline, wait=2, user="alice")
    assert [(i.get("user"), i["id"], i["op"]) for i in only_alice] == [
        ("alice", "secret-1", "put"), ("alice", "secret-2", "put"), ("alice", "via-s3", "put"), ("alice", "secret-1", "delete")]


def test_a_cursor_older_than_the_retention_is_gone(keys):
    """ChangeRetentionSeconds is 1 on "brief": a cursor taken, then left for 3 s while changes
    are made, is older than the retention (a server of its own: a tiny retention)."""
    server = magazine_server(keys, {"brief": {"Type": "shared", "ReadWrite": ["Author"], "ChangeRetentionSeconds": 1}}).start()
    try:
        check_retention(who(server, keys, "ben"))
    finally:
        server.cleanup()


def check_retention(ben: Client):
    assert ben.put("brief", "zero", b"0").status_code == 201
    old = current_cursor(ben, "brief")
    assert ben.put("brief", "one", b"1").status_code == 201
    # Young, the cursor works.
    young = ben.changes("brief", since=old)
    assert young.status_code == 200, young.text
    assert [(i["id"], i["op"]) for i in young.json()["items"]] == [("one", "put")]
    time.sleep(3)
    assert ben.put("brief", "two", b"2").status_code == 201
    assert ben.obj("DELETE", "brief", "one").status_code == 204
    gone = ben.changes("brief", since=old)
    assert_error(gone, 410, "MOBILE-CURSOR-EXPIRED")
    assert_error(ben.changes("brief", since=old, wait=5), 410, "MOBILE-CURSOR-EXPIRED")
    # A fresh cursor works; the client resyncs from a listing.
    fresh = current_cursor(ben, "brief")
    assert ben.put("brief", "three", b"3").status_code == 201
    items, _ = changes_until(ben, "brief", fresh, 1, deadline=time.monotonic() + 20, wait=2)
    assert [(i["id"], i["op"]) for i in items] == [("three", "put")]
    assert {item["id"] for item in ben.listing("brief").json()["items"]} == {"zero", "two", "three"}


def test_change_feed_through_s3_oss_and_the_api_across_a_kill_and_restart(keys):
    """A writer goes through S3 (boto3), OSS (oss2) and the Storage API while a reader long-polls
    the feed; every committed change shows once, in order, also across kill -9 and a restart."""
    server = magazine_server(keys).start()
    try:
        walt_api, dee = who(server, keys, "walt"), who(server, keys, "dee")
        credentials = vended(server, keys, "walt")
        s3 = s3_client(server, credentials)
        oss = oss_bucket(server, credentials)
        root = root_client(server)
        root.put_object(Bucket=BUCKET, Key="feed/primer", Body=b"before the reader's cursor")
        start_cursor = current_cursor(dee, "feed")
        reader = FeedReader(dee, "feed", start_cursor, deadline=time.monotonic() + 240)
        reader.start()
        expected = []

        put = s3.put_object(Bucket=BUCKET, Key="feed/s3-a", Body=b"a through S3")
        expected.append(("s3-a", "put", put["ETag"]))
        result = oss.put_object("feed/oss-b", b"b through OSS")
        expected.append(("oss-b", "put", result.etag))
        api = walt_api.put("feed", "api-c", b"c through the API", content_type="text/plain")
        assert api.status_code == 201, api.text
        expected.append(("api-c", "put", api.headers["ETag"]))
        copy = s3.copy_object(Bucket=BUCKET, Key="feed/s3-copy", CopySource={"Bucket": BUCKET, "Key": "feed/s3-a"})
        expected.append(("s3-copy", "put", copy["CopyObjectResult"]["ETag"]))
        oss.append_object("feed/oss-append", 0, b"first piece;")
        expected.append(("oss-append", "put", oss.head_object("feed/oss-append").etag))
        oss.append_object("feed/oss-append", len(b"first piece;"), b"second piece")
        expected.append(("oss-append", "put", oss.head_object("feed/oss-append").etag))
        upload = s3.create_multipart_upload(Bucket=BUCKET, Key="feed/s3-multipart")["UploadId"]
        parts = []
        for number, body in ((1, b"m" * (5 * MiB)), (2, b"tail")):
            part = s3.upload_part(Bucket=BUCKET, Key="feed/s3-multipart", UploadId=upload, PartNumber=number, Body=body)
            parts.append({"PartNumber": number, "ETag": part["ETag"]})
        done = s3.complete_multipart_upload(Bucket=BUCKET, Key="feed/s3-multipart", UploadId=upload,
                                            MultipartUpload={"Parts": parts})
        expected.append(("s3-multipart", "put", done["ETag"]))
        root.put_object(Bucket=BUCKET, Key="elsewhere/not-in-a-collection", Body=b"x")  # not in the feed
        root.put_object(Bucket=BUCKET, Key="feedback/not-in-the-feed", Body=b"x")  # prefix "feed/" only
        assert walt_api.obj("DELETE", "feed", "api-c").status_code == 204
        expected.append(("api-c", "delete", None))
        s3.delete_object(Bucket=BUCKET, Key="feed/oss-b")
        expected.append(("oss-b", "delete", None))
        deleted = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": "feed/s3-copy"}, {"Key": "feed/oss-append"}]})
        assert len(deleted.get("Deleted", [])) == 2 and not deleted.get("Errors"), deleted
        expected.append(frozenset({("s3-copy", "delete", None), ("oss-append", "delete", None)}))
        oss.delete_object("feed/s3-multipart")
        expected.append(("s3-multipart", "delete", None))
        posted = walt_api.request("POST", "/feed/objects", data=b"posted", headers={"Content-Type": "text/plain"})
        assert posted.status_code == 201, posted.text
        expected.append((posted.json()["id"], "put", posted.headers["ETag"]))
        oss.put_object("feed/oss-x", b"x")
        oss.put_object("feed/oss-y", b"y")
        expected += [("oss-x", "put", None), ("oss-y", "put", None)]
        result = oss.batch_delete_objects(["feed/oss-x", "feed/oss-y"])
        assert sorted(result.deleted_keys) == ["feed/oss-x", "feed/oss-y"]
        expected.append(frozenset({("oss-x", "delete", None), ("oss-y", "delete", None)}))
        count = sum(len(e) if isinstance(e, frozenset) else 1 for e in expected)
        items = reader.wait_for(count)
        time.sleep(1.5)  # nothing more may come
        with reader.lock:
            items = list(reader.items)
        check_feed(items, expected)
        api_put = next(i for i in items if i["id"] == posted.json()["id"])
        assert api_put["modifiedBy"] == "walt" and api_put["contentLength"] == 6
        multipart = next(i for i in items if i["id"] == "s3-multipart")
        assert multipart["contentLength"] == 5 * MiB + 4

        # One more committed change, then kill -9 while the reader is in a long poll.
        last = walt_api.put("feed", "before-kill", b"committed before the kill", content_type="text/plain")
        assert last.status_code == 201, last.text
        expected.append(("before-kill", "put", last.headers["ETag"]))
        time.sleep(0.5)
        server.kill()
        time.sleep(1)
        server.start()
        walt_api = who(server, keys, "walt")  # new connections
        after_s3 = s3_client(server, vended(server, keys, "walt")).put_object(Bucket=BUCKET, Key="feed/after-restart-s3", Body=b"s3")
        expected.append(("after-restart-s3", "put", after_s3["ETag"]))
        after_api = walt_api.put("feed", "after-restart-api", b"api", content_type="text/plain")
        assert after_api.status_code == 201, after_api.text
        expected.append(("after-restart-api", "put", after_api.headers["ETag"]))
        count += 3
        reader.wait_for(count, timeout=60)
        time.sleep(1.5)
        reader.stop.set()
        reader.join(30)
        assert reader.errors == [], reader.errors
        assert reader.failed_polls >= 1, "the kill did not interrupt the reader"
        check_feed(reader.items, expected)
        # The first cursor, after the restart: the whole history, the same, in the same order.
        replay, _ = changes_until(dee, "feed", start_cursor, count, deadline=time.monotonic() + 30, wait=1, limit=1000)
        check_feed(replay, expected)
        assert [(i["id"], i["op"], i.get("eTag")) for i in replay] == [(i["id"], i["op"], i.get("eTag")) for i in reader.items]
    finally:
        server.cleanup()


# MARK: Offline sync: two devices, local JSON stores, conditional PUTs and the feed

def device(tg, keys, tmp_path, name, user) -> mobile_sync_example.SyncClient:
    return mobile_sync_example.SyncClient(tg.url, "notes", lambda: keys.token(user), tmp_path / f"{name}.json", name)


def server_state(tg, keys) -> dict:
    ben = who(tg, keys, "ben")
    state = {}
    for item in ben.listing("notes", limit=1000).json()["items"]:
        state[item["id"]] = ben.obj("GET", "notes", item["id"]).json()["fields"]
    return state


def test_offline_devices_converge(tg, keys, tmp_path):
    phone = device(tg, keys, tmp_path, "phone", "ben")
    tablet = device(tg, keys, tmp_path, "tablet", "art")
    # Both start online, with one record the phone made.
    phone.edit("groceries", "title", "Groceries", at=1)
    phone.edit("groceries", "items", ["milk"], at=1)
    phone.edit("trip", "title", "Trip", at=1)
    phone.sync()
    tablet.sync()
    assert tablet.view() == phone.view() == server_state(tg, keys)

    # Offline, both edit. Same field of groceries: the later edit (the tablet's, at 3) wins; other
    # fields merge. The phone deletes trip while the tablet edits it: the edit wins. Each adds a
    # record, and both create "shared" with different fields.
    phone.edit("groceries", "title", "Groceries (phone)", at=2)
    phone.edit("groceries", "shop", "corner shop", at=2)
    tablet.edit("groceries", "title", "Groceries (tablet)", at=3)
    tablet.edit("groceries", "items", ["milk", "eggs"], at=3)
    phone.delete("trip")
    tablet.edit("trip", "when", "May", at=2)
    phone.edit("phone-only", "title", "From the phone", at=2)
    tablet.edit("tablet-only", "title", "From the tablet", at=2)
    phone.edit("shared", "a", "phone's a", at=5)
    tablet.edit("shared", "a", "tablet's a", at=4)
    tablet.edit("shared", "b", "tablet's b", at=4)
    # Records the other device made and nobody touches: a delete that must reach the tablet.
    tablet.edit("scratch", "title", "Scratch", at=1)
    tablet.sync()
    phone.sync()
    phone.delete("scratch")

    # Back online: sync in turn until both are quiet (bounded).
    for _ in range(3):
        phone.sync()
        tablet.sync()
    expected = {
        "groceries": {"title": "Groceries (tablet)", "items": ["milk", "eggs"], "shop": "corner shop"},
        "trip": {"title": "Trip", "when": "May"},
        "phone-only": {"title": "From the phone"},
        "tablet-only": {"title": "From the tablet"},
        "shared": {"a": "phone's a", "b": "tablet's b"},
    }
    assert phone.view() == expected
    assert tablet.view() == expected
    assert server_state(tg, keys) == expected
    for client in (phone, tablet):
        assert not any(entry.get("dirty") for entry in client.records.values())
        # The stores are JSON files a restarted app reads back.
        reopened = device(tg, keys, tmp_path, client.device, "ben")
        assert reopened.view() == expected and reopened.state["cursor"] == client.state["cursor"]

    # A third device starts from a listing, then follows the feed.
    laptop = device(tg, keys, tmp_path, "laptop", "ben")
    laptop.sync()
    assert laptop.view() == expected
    tablet.edit("groceries", "items", ["milk", "eggs", "bread"], at=10)
    tablet.sync()
    laptop.sync()
    assert laptop.view()["groceries"]["items"] == ["milk", "eggs", "bread"]


def test_the_sync_example_runs_from_the_command_line(tg, keys, tmp_path):
    script = Path(mobile_sync_example.__file__)
    env = {**os.environ, "TOLLGATE_LOGIN_TOKEN": keys.token("bonapart")}
    common = [sys.executable, str(script), "--base-url", tg.url, "--collection", "clinotes", "--device", "cli"]

    def run(store, *args):
        result = subprocess.run([*common, "--store", str(tmp_path / store), *args], capture_output=True, text=True,
                                timeout=60, env=env)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    assert run("one.json", "set", "cli-note", "title", "Written from the CLI")["cli-note"] == {"title": "Written from the CLI"}
    run("one.json", "sync")
    assert run("two.json", "sync")["cli-note"] == {"title": "Written from the CLI"}
