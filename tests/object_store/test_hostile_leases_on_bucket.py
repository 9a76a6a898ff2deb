"""Lease objects someone else wrote (issue 41, defect 5), on the in-memory double (fast lane) and on
the real RGW (the proof): a claim of deeply nested JSON, a claim and a reader lease that give
themselves a lifetime of 1e300 seconds. Each is refused or judged with a bounded lifetime: never a
RecursionError, never a slot waited on for ever, never all history pinned.

The bound is ``store/lease.py``'s ``MAX_LEASE_S`` (an hour); on RGW the test lowers it to 6 s (the gateway's
clock cannot be moved on), on the double the store's clock moves past the hour.
"""
from __future__ import annotations

import json

import pytest

from reuse_backend.bucket import collect
from reuse_backend.store import lease as lease_rules
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.bucket.store import BucketStore
from reuse_backend.errors import CacheBusyError

from .bucket_help import NAME, commit, read_back

pytestmark = pytest.mark.hostfree
DIGEST = "d" * 64


def _hostile(role: str, **fields) -> bytes:
    return json.dumps({"run_id": "stranger", "host": "elsewhere", "pid": 1, "role": role, "since": 0,
                       "lease_s": 1e300, "started_at": 0.0, **fields}).encode()


@pytest.fixture
def bound(bucket, monkeypatch):
    """``past(cache, *keys)``: until those lease objects are older than the lifetime bound."""
    if bucket.kind == "memory":
        return lambda cache, *keys: bucket.mem.advance(lease_rules.MAX_LEASE_S + 5)
    monkeypatch.setattr(lease_rules, "MAX_LEASE_S", 6.0)

    def past(cache, *keys):
        slow = BucketCache(cache.root, cache.name, local_root=cache.local_root, lease_s=6.0)
        bucket.expire(slow, *keys)
    return past


def test_a_claim_of_nested_json_is_refused_not_a_recursion_error(bucket, tmp_path):
    cache = BucketCache(bucket.url, NAME, local_root=tmp_path / "h", lease_s=2, heartbeat_s=0.5)
    key = cache.keys.claim("text", DIGEST)
    bucket.plant(key, b"[" * 60000)
    got = cache.claim("text", DIGEST, "run-a", wait=0)     # judged by its age: a fresh one is live
    assert got.lease is None and got.waited_for["run_id"] == "unknown"
    assert not collect.collect(cache).deleted
    bucket.expire(cache, key)
    got = cache.claim("text", DIGEST, "run-a", wait=0)     # stale now: taken over
    assert got.lease is not None
    got.release()


def test_a_claim_that_gives_itself_for_ever_is_stale_after_the_bound(bucket, bound, tmp_path):
    cache = BucketCache(bucket.url, NAME, local_root=tmp_path / "h", lease_s=1, heartbeat_s=0.25)
    key = cache.keys.claim("text", DIGEST)
    bucket.plant(key, _hostile("claim"))
    bucket.expire(cache, key)                               # past the judge's own lease: still within its own
    assert cache.claim("text", DIGEST, "run-a", wait=0).lease is None
    bound(cache, key)
    got = cache.claim("text", DIGEST, "run-a", wait=0)
    assert got.lease is not None and got.lease.broke, got.lease.broke
    got.release()


def test_a_reader_lease_that_gives_itself_for_ever_pins_history_only_until_the_bound(bucket, bound, tmp_path):
    h = tmp_path / "h"
    commit(bucket.url, h, 1)
    cache = BucketCache(bucket.url, NAME, local_root=h, lease_s=2, heartbeat_s=0.5)
    key = cache.keys.reader("stranger")
    bucket.plant(key, _hostile("reader lease", exact=False))
    for marker in (2, 3):
        _, v = commit(bucket.url, h, marker, )
    assert len(bucket.keys(cache.keys.log_prefix)) == 3                 # pinned: every record kept
    with pytest.raises(CacheBusyError):
        cache.clear()
    bound(cache, key)
    collect.collect(cache)
    assert key not in bucket.keys() and len(bucket.keys(cache.keys.log_prefix)) == 1
    assert BucketStore(bucket.url, tmp_path / "checker").check(NAME) == []
    assert read_back(bucket.url, tmp_path / "r") == (v, 3.0)
