"""ListBuckets by prefix and by page, as boto3 (S3: prefix, max-buckets, continuation-token) and
oss2 (OSS: prefix, marker, max-keys) ask for it. A tool that lists the buckets with a prefix and
deletes what comes back must get only those."""
import oss2
import pytest
from botocore.exceptions import ClientError

from conftest import ROOT_SECRET
from s3_helpers import ROOT_ACCESS_KEY_ID, root_client

NAMES = ["lb-alpha-1", "lb-alpha-2", "lb-alpha-3", "lb-beta-1", "lb-beta-2"]


@pytest.fixture(scope="module")
def buckets(gw):
    root = root_client(gw)
    for name in NAMES:
        root.create_bucket(Bucket=name)
    return root


def test_s3_lists_by_prefix_and_pages_with_continuation_tokens(gw, buckets):
    listed = buckets.list_buckets(Prefix="lb-alpha-")
    assert [b["Name"] for b in listed["Buckets"]] == ["lb-alpha-1", "lb-alpha-2", "lb-alpha-3"]
    assert listed.get("Prefix") == "lb-alpha-"
    pages, token = [], None
    while True:
        kwargs = {"Prefix": "lb-", "MaxBuckets": 2}
        if token:
            kwargs["ContinuationToken"] = token
        page = buckets.list_buckets(**kwargs)
        pages.append([b["Name"] for b in page["Buckets"]])
        token = page.get("ContinuationToken")
        if not token:
            break
        assert len(pages) < 10
    assert pages == [["lb-alpha-1", "lb-alpha-2"], ["lb-alpha-3", "lb-beta-1"], ["lb-beta-2"]]
    # boto3's own paginator, over the same parameters.
    paginated = [b["Name"] for page in buckets.get_paginator("list_buckets").paginate(Prefix="lb-beta", MaxBuckets=1)
                 for b in page["Buckets"]]
    assert paginated == ["lb-beta-1", "lb-beta-2"]
    # Without parameters, every bucket.
    assert set(NAMES) <= {b["Name"] for b in buckets.list_buckets()["Buckets"]}


def test_s3_refuses_a_bad_page_size_or_token(gw, buckets):
    for kwargs in ({"MaxBuckets": 10001}, {"ContinuationToken": "%%%"}):
        with pytest.raises(ClientError) as info:
            buckets.list_buckets(**kwargs)
        assert info.value.response["Error"]["Code"] == "InvalidArgument", kwargs


def test_oss_lists_by_prefix_and_pages_with_markers(gw, buckets):
    service = oss2.Service(oss2.Auth(ROOT_ACCESS_KEY_ID, ROOT_SECRET), gw.gateway_url)
    assert [b.name for b in service.list_buckets(prefix="lb-beta-").buckets] == ["lb-beta-1", "lb-beta-2"]
    first = service.list_buckets(prefix="lb-", max_keys=3)
    assert [b.name for b in first.buckets] == ["lb-alpha-1", "lb-alpha-2", "lb-alpha-3"]
    assert first.is_truncated and first.next_marker == "lb-alpha-3"
    second = service.list_buckets(prefix="lb-", marker=first.next_marker, max_keys=3)
    assert [b.name for b in second.buckets] == ["lb-beta-1", "lb-beta-2"] and not second.is_truncated
    # oss2's iterator pages by itself.
    assert [b.name for b in oss2.BucketIterator(service, prefix="lb-alpha", max_keys=1)] == ["lb-alpha-1", "lb-alpha-2", "lb-alpha-3"]
    with pytest.raises(oss2.exceptions.OssError) as info:
        service.list_buckets(max_keys=1001)
    assert (info.value.status, info.value.code) == (400, "InvalidArgument")
