"""The hour lease's conditions, on both stores: a real S3 server (SeaweedFS's If-None-Match/If-Match)
and the local flock stand-in. Whoever loses a race gets None, never a silent overwrite."""

from __future__ import annotations

import time

import pytest

from ranklog.archive.leases import HourLease, LeaseLost, LocalLeaseStore, S3LeaseStore
from ranklog.object_store import S3Settings


def _stores(tmp_path, request):
    if request.param == "local":
        return LocalLeaseStore(str(tmp_path))
    seaweedfs = request.getfixturevalue("seaweedfs")
    root = request.getfixturevalue("s3_root")
    return S3LeaseStore(root, S3Settings(seaweedfs.endpoint, seaweedfs.region, seaweedfs.access_key,
                                         seaweedfs.secret_key))


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow)])
def store(tmp_path, request):
    return _stores(tmp_path, request)


def test_conditional_create_and_replace(store):
    key = "date=2026-12-01/hour=03/_ranklog_lease.json"
    assert store.read(key) is None
    etag = store.create(key, {"owner": "a"})
    assert etag is not None
    assert store.create(key, {"owner": "b"}) is None  # exists: If-None-Match refuses
    body, current = store.read(key)
    assert body == {"owner": "a"} and current == etag
    assert store.replace(key, {"owner": "c"}, '"0123456789abcdef0123456789abcdef"') is None  # stale ETag
    newer = store.replace(key, {"owner": "c"}, etag)
    assert newer is not None and newer != etag
    assert store.replace(key, {"owner": "d"}, etag) is None  # the old version is gone
    assert store.read(key)[0] == {"owner": "c"}


def test_one_owner_at_a_time_and_a_fenced_loser(store):
    first = HourLease(store, "date=2026-12-01/hour=04", "a1", ttl=1.0)
    second = HourLease(store, "date=2026-12-01/hour=04", "a2", ttl=1.0)
    assert first.acquire()
    assert not second.acquire()  # live lease of another archive
    time.sleep(1.1)
    assert second.acquire()  # expired: taken over
    with pytest.raises(LeaseLost):
        first.write(commits=[{"output": "x.parquet", "inputs": ["y.parquet"], "temp": "t", "done": False}])
    assert second.commits == []
    second.release()
    assert first.acquire()  # released: free for anyone
