"""Large GET bodies, as the local store sends them: on plain TCP, file pages that are in the page
cache go from the cache to the socket with sendfile, in segments of 2 MiB, and pages that are not
are read on the store's I/O pool and sent as bytes; over TLS every byte is read and encrypted.
Each way must deliver exactly the object's bytes, whole and by range, across segment boundaries,
and count them in tollgate_gateway_bytes_sent_total."""
import hashlib
import os
import re
import urllib.request

import pytest

from conftest import ROOT_SECRET, Server
from s3_helpers import ROOT_ACCESS_KEY_ID, MiB, s3_client
from test_tls import ScratchCA, tls_server

BUCKET = "tollgate"
SEGMENT = 2 * MiB
SIZE = 3 * SEGMENT + 12345  # three full segments and a short one
BODY = os.urandom(SIZE)
RANGES = [
    (0, 0), (SEGMENT - 1, SEGMENT), (1000, 5 * MiB), (SEGMENT, 2 * SEGMENT - 1), (SIZE - 5000, SIZE - 1), (0, SIZE - 1),
]


def root(server: Server, **config):
    return s3_client(server, access_key_id=ROOT_ACCESS_KEY_ID, secret=ROOT_SECRET, **config)


def evict(server: Server, fraction: slice = slice(None)) -> int:
    """Drops the object files' pages from the page cache (they are clean: the store fsyncs), so
    the next read finds them on the disk; `fraction` picks which MiB of each file. Returns the
    number of files."""
    files = [os.path.join(d, f) for d, _, names in os.walk(server.dir / "data" / "store" / "objects") for f in names]
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            for mib in list(range(0, size, MiB))[fraction]:
                os.posix_fadvise(fd, mib, MiB, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return len(files)


def bytes_sent(server: Server) -> float:
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(v) for v in re.findall(r'^tollgate_gateway_bytes_sent_total\{dialect="s3"\} (\S+)$', text, re.M))


def check_reads(s3) -> int:
    """Whole and ranged GETs; returns the number of object bytes received."""
    received = 0
    whole = s3.get_object(Bucket=BUCKET, Key="large/object")["Body"].read()
    assert hashlib.sha256(whole).digest() == hashlib.sha256(BODY).digest()
    received += len(whole)
    for first, last in RANGES:
        got = s3.get_object(Bucket=BUCKET, Key="large/object", Range=f"bytes={first}-{last}")
        data = got["Body"].read()
        assert got["ContentRange"] == f"bytes {first}-{last}/{SIZE}"
        assert data == BODY[first:last + 1], (first, last)
        received += len(data)
    return received


@pytest.fixture(scope="module")
def plain():
    server = Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET}).start()
    yield server
    server.cleanup()


def test_cached_pages_go_out_whole_and_by_range(plain):
    s3 = root(plain)
    s3.put_object(Bucket=BUCKET, Key="large/object", Body=BODY)
    before = bytes_sent(plain)
    received = check_reads(s3)
    assert bytes_sent(plain) - before == received


def test_pages_not_in_cache_are_read_and_sent(plain):
    s3 = root(plain)
    s3.put_object(Bucket=BUCKET, Key="large/object", Body=BODY)
    assert evict(plain) >= 1
    before = bytes_sent(plain)
    received = check_reads(s3)
    assert bytes_sent(plain) - before == received
    # Half the segments cached, half not: both kinds in one response.
    assert evict(plain, slice(None, None, 2)) >= 1
    assert check_reads(s3) == received


def test_large_bodies_over_tls(tmp_path_factory):
    ca = ScratchCA(tmp_path_factory.mktemp("ca"))
    server = tls_server(ca).start()
    try:
        s3 = root(server, verify=str(ca.path))
        s3.put_object(Bucket=BUCKET, Key="large/object", Body=BODY)
        check_reads(s3)
    finally:
        server.cleanup()
