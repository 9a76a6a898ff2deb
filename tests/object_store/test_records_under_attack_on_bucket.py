"""Commit records under an adversary (issue 41, defects 2, 3 and 4), on the in-memory double (fast
lane) and on the real RGW behind the fault proxy (the proof):

* a record create that gets no answer and lands later (a proxy or gateway queue): a run that
  reported failure never becomes current with its objects collected;
* keys someone else put under ``leases/`` (a console's folder marker, a note) and more stale
  leases than a fence may name: every fence record stays valid, readers keep the version;
* a key at a number out of range, a record at the last number, a record far ahead: ignored,
  refused with a typed error naming the object and the fix, or fenced, never a raw ValueError
  nor memory for the gap; ``check --repair`` removes what blocks the log.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from reuse_backend.bucket import collect, records
from reuse_backend.store.owner import owner_record
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.bucket.location import MAX_SEQ
from reuse_backend.bucket.store import BucketStore
from reuse_backend.errors import CorruptCacheError, ObjectStoreError, TransactionError

from .bucket_help import NAME, commit, current, read_back, stage

pytestmark = pytest.mark.hostfree
RECORD_2 = r"/log/0+2\.json$"


def _begin(url, root, marker, **kw):
    tx = BucketCache(url, NAME, local_root=root, **kw).begin()
    stage(tx, marker)
    return tx


def _clean(url, root) -> None:
    found = BucketStore(url, root).check(NAME)
    assert not [p for p in found if p.code not in ("collectable",)], [str(p) for p in found]


def _late_create(bucket, request):
    """Make every attempt at creating record 2 go unanswered, the first one carried out only
    when the returned ``land()`` is called (a request parked in a queue)."""
    if bucket.kind == "memory":
        bucket.mem.fault("PutObject", RECORD_2, "delay", times=1)
        bucket.mem.fault("PutObject", RECORD_2, "down", times=bucket.client.attempts - 1)
        return bucket.mem.land_delayed
    proxy = request.getfixturevalue("proxied")(SEEDREUSE_S3_TIMEOUT_S=2, AWS_MAX_ATTEMPTS=3)
    hold = proxy.hold("PUT", RECORD_2)
    proxy.drop("PUT", RECORD_2, when="before", times=2)

    def land():
        hold.release()
        assert hold.done.wait(60), "the parked create was never forwarded"
    return land


def test_a_create_that_lands_late_never_makes_a_failed_run_current(bucket, tmp_path, request):
    _, v1 = commit(bucket.url, tmp_path / "h0", 1)
    land = _late_create(bucket, request)
    tx = _begin(bucket.url, tmp_path / "h1", 2, lease_s=3, heartbeat_s=0.5)
    try:
        version, error = tx.commit(), None
    except ObjectStoreError as e:
        version, error = None, e
    finally:
        tx.discard()
    other = BucketCache(bucket.url, NAME, local_root=tmp_path / "h0", lease_s=3)
    if error is not None and error.details.get("published") is None:
        bucket.expire(other, tx.lease.path)        # unknown: the run kept its lease until it expired
    collect.collect(other)                        # what the next commit on any host runs
    land()                                        # the parked create reaches the gateway now
    seq, rec = current(bucket.url, tmp_path / "h0")
    if error is None:                             # resolved: the number was taken away from the late write
        assert rec["writer"] == tx.run.run_id and read_back(bucket.url, tmp_path / "r") == (version, 2.0)
    else:
        assert rec["writer"] != tx.run.run_id, (seq, rec["writer"], error)
        assert read_back(bucket.url, tmp_path / "r") == (v1, 1.0)
    _clean(bucket.url, tmp_path / "checker")


def _dead_run(url, root, marker):
    """A run that died while staging: its lease object stays, beating no more."""
    tx = _begin(url, root, marker, lease_s=2, heartbeat_s=0.5)
    tx.lease.stop_heartbeat()
    return tx


def test_keys_under_leases_that_are_no_runs_lease_are_nobodys_run(bucket, tmp_path):
    _, v1 = commit(bucket.url, tmp_path / "h0", 1)
    cache = BucketCache(bucket.url, NAME, local_root=tmp_path / "h0", lease_s=2)
    foreign = [cache.keys.lease_prefix, cache.keys.lease_prefix + "notes.txt", cache.keys.lease_prefix + "x y.json"]
    for k in foreign:                             # a console's folder marker, a note, a bad name
        bucket.plant(k, b"" if k.endswith("/") else b"hello")
    dead = _dead_run(bucket.url, tmp_path / "h1", 2)
    bucket.expire(cache, dead.lease.path, *foreign)
    rep = collect.collect(cache)
    assert rep.fenced == [dead.run.run_id], rep
    assert read_back(bucket.url, tmp_path / "r") == (v1, 1.0)
    BucketStore(bucket.url, tmp_path / "checker").check(NAME, repair=True)
    assert read_back(bucket.url, tmp_path / "r2") == (v1, 1.0)
    assert set(foreign) <= bucket.keys(cache.keys.lease_prefix)       # never ours to judge or delete


def test_more_stale_leases_than_a_fence_names_are_fenced_in_turns(bucket, tmp_path, monkeypatch):
    """1001 stale leases on the double; on RGW the bound is lowered to 20 (21 leases: the same
    turns, without planting and judging a thousand objects on the gateway)."""
    if bucket.kind == "rgw":
        monkeypatch.setattr(records, "MAX_FENCED", 20)
    _, v1 = commit(bucket.url, tmp_path / "h0", 1)
    cache = BucketCache(bucket.url, NAME, local_root=tmp_path / "h0", lease_s=2)
    ids = [f"dead-{i:04d}" for i in range(records.MAX_FENCED + 1)]
    body = json.dumps(owner_record("x", "run lease", 2.0, since=1, exact=False)).encode()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda r: bucket.plant(cache.keys.lease(r), body), ids))
    bucket.expire(cache, *[cache.keys.lease(r) for r in ids[:1] + ids[-1:]])
    first = collect.collect(cache)
    assert len(first.fenced) == records.MAX_FENCED and not first.skipped, first
    assert read_back(bucket.url, tmp_path / "r") == (v1, 1.0)
    second = collect.collect(cache)
    assert second.fenced == ids[records.MAX_FENCED:], second.fenced
    assert not bucket.keys(cache.keys.lease_prefix) and read_back(bucket.url, tmp_path / "r2") == (v1, 1.0)


def test_a_key_at_a_number_out_of_range_is_ignored_and_repair_removes_it(bucket, tmp_path):
    _, v1 = commit(bucket.url, tmp_path / "h0", 1)
    cache = BucketCache(bucket.url, NAME, local_root=tmp_path / "h0")
    _, rec = current(bucket.url, tmp_path / "h0")
    top = cache.keys.log_prefix + "9" * 20 + ".json"
    bucket.plant(top, records.dumps({**rec, "seq": 10 ** 20 - 1}))     # valid but for its number
    _, v2 = commit(bucket.url, tmp_path / "h1", 2)
    assert current(bucket.url, tmp_path / "h0")[0] == 2 and read_back(bucket.url, tmp_path / "r") == (v2, 2.0)
    store = BucketStore(bucket.url, tmp_path / "checker")
    assert [p.code for p in store.check(NAME) if p.path.endswith(top)] == ["foreign_record"]
    store.check(NAME, repair=True)
    assert top not in bucket.keys() and store.check(NAME) == []
    BucketCache(bucket.url, NAME, local_root=tmp_path / "h0").clear()
    assert BucketCache(bucket.url, NAME, local_root=tmp_path / "h0").snapshot() is None


def test_a_record_at_the_last_number_is_refused_by_name_and_repair_removes_it(bucket, tmp_path):
    _, v1 = commit(bucket.url, tmp_path / "h0", 1)
    cache = BucketCache(bucket.url, NAME, local_root=tmp_path / "h0")
    _, rec = current(bucket.url, tmp_path / "h0")
    last = cache.keys.log(MAX_SEQ)
    bucket.plant(last, records.dumps({**rec, "seq": MAX_SEQ, "writer": "stranger"}))
    tx = _begin(bucket.url, tmp_path / "h1", 2)
    with pytest.raises(CorruptCacheError) as e:
        tx.commit()
    tx.discard()
    assert last in e.value.message and "--repair" in e.value.fix, e.value
    store = BucketStore(bucket.url, tmp_path / "checker")
    assert "last_number" in [p.code for p in store.check(NAME)]
    store.check(NAME, repair=True)
    _, v3 = commit(bucket.url, tmp_path / "h1", 3)
    assert current(bucket.url, tmp_path / "h0")[0] == 2 and read_back(bucket.url, tmp_path / "r") == (v3, 3.0)


def test_a_record_far_ahead_costs_no_memory_for_the_gap(bucket, tmp_path):
    commit(bucket.url, tmp_path / "h0", 1)
    cache = BucketCache(bucket.url, NAME, local_root=tmp_path / "h0")
    _, rec = current(bucket.url, tmp_path / "h0")
    tx = _begin(bucket.url, tmp_path / "h1", 2)       # staged on record 1
    far = 10 ** 15
    bucket.plant(cache.keys.log(far), records.dumps({**rec, "seq": far, "writer": "stranger"}))
    with pytest.raises(TransactionError) as e:
        tx.commit()                                    # records 2..far are not there: fenced, typed
    tx.discard()
    assert f"2..{far}" in e.value.message, e.value
    _, v3 = commit(bucket.url, tmp_path / "h1", 3)     # the next run stages on the far record
    assert current(bucket.url, tmp_path / "h0")[0] == far + 1 and read_back(bucket.url, tmp_path / "r") == (v3, 3.0)
