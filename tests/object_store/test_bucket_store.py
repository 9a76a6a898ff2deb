"""The bucket store on a real Ceph RGW: the same interface and promises as the folder store.

Each test works under its own prefix of one bucket (``bucket_url``) with two local tiers, one per
simulated worker host (``host_a``, ``host_b``: separate SEEDREUSE_CACHE_ROOT folders).
"""
from __future__ import annotations

import threading
import time

import pytest
import torch

from reuse_backend.bucket.cache import BucketCache
from reuse_backend.bucket import collect, log as commit_log
from reuse_backend.bucket.client import NotFound
from reuse_backend.bucket.store import BucketStore
from reuse_backend.errors import TransactionError
from reuse_backend.store.run_info import RunInfo
from reuse_backend.store import take_index
from reuse_backend.stores import open_cache

pytestmark = pytest.mark.hostfree
KEY = {"digest": "a" * 64}


def _value(marker: float):
    return {"cond": torch.full((4, 8), float(marker)), "pooled": [torch.full((3,), float(marker))]}


class Calls:
    """The S3 operations a client sends (botocore's own event hook), by name."""

    def __init__(self, cache):
        self.names: list[str] = []
        cache.client.s3.meta.events.register("before-call.s3.*", self._seen)

    def _seen(self, model, **kw):
        self.names.append(model.name)

    def reset(self):
        self.names.clear()


@pytest.fixture
def host_a(tmp_path):
    return tmp_path / "host-a"


@pytest.fixture
def host_b(tmp_path):
    return tmp_path / "host-b"


def _commit(url, root, marker, *, run_id=None, name="c"):
    cache = BucketCache(url, name, local_root=root)
    tx = cache.begin(RunInfo(run_id=run_id) if run_id else None)
    tx.stage_slot("text", _value(marker), key=KEY, meta={"encode_seconds": 1.0})
    return tx, tx.commit()


def test_a_commit_is_read_back_on_another_host(bucket_url, host_a, host_b):
    _, version = _commit(bucket_url, host_a, 1)
    snap = open_cache(bucket_url, "c", local_root=host_b).snapshot()
    assert snap.version == version and snap.slot_entry("text")["key"] == KEY
    assert torch.equal(snap.load_slot("text")["cond"], _value(1)["cond"])
    snap.close()


def test_a_commit_keeps_its_files_as_blobs_and_leaves_no_local_staging(bucket_url, host_a):
    tx, _ = _commit(bucket_url, host_a, 1)
    entry = tx.staged.files["slot_text.safetensors"]
    assert tx.cache.tier.has(entry["sha256"], entry["bytes"])
    assert not tx.staging.exists() and not any(tx.cache.tier.staging_parent(tx.cache.keys).glob("*"))


def test_a_hit_on_a_version_this_host_holds_costs_one_list(bucket_url, host_a, host_b):
    _commit(bucket_url, host_a, 1)
    first = BucketCache(bucket_url, "c", local_root=host_b)
    with first.snapshot() as s:                       # the first hit on host B downloads the slot
        s.load_slot("text")
    cache = BucketCache(bucket_url, "c", local_root=host_b)
    calls = Calls(cache)
    with cache.snapshot() as s:
        assert torch.equal(s.load_slot("text")["cond"], _value(1)["cond"])
    # one LIST to confirm the version is current; the load is local (the use record is at most
    # one small PUT a minute per host and was written by the first hit)
    assert calls.names == ["ListObjectsV2"], calls.names


def test_a_first_hit_downloads_only_what_it_loads(bucket_url, host_a, host_b):
    cache = BucketCache(bucket_url, "c", local_root=host_a)
    tx = cache.begin()
    tx.stage_slot("text", _value(1), key=KEY)
    tx.stage_slot("image", {"big": torch.zeros(256, 1024)}, key=KEY)
    tx.commit()
    b = BucketCache(bucket_url, "c", local_root=host_b)
    calls = Calls(b)
    with b.snapshot() as s:
        s.load_slot("text")
        assert s.fetched() == ["slot_text.safetensors"]
    assert calls.names.count("GetObject") == 2, calls.names    # the record, the one slot
    assert not b.tier.has(s.manifest["files"]["slot_image.safetensors"]["sha256"],
                          s.manifest["files"]["slot_image.safetensors"]["bytes"])


def test_a_failed_run_publishes_nothing(bucket_url, host_a):
    _, v1 = _commit(bucket_url, host_a, 1)
    cache = BucketCache(bucket_url, "c", local_root=host_a)
    tx = cache.begin()
    tx.stage_slot("text", _value(2), key=KEY)
    tx.discard()
    with cache.snapshot() as s:
        assert s.version == v1 and torch.equal(s.load_slot("text")["cond"], _value(1)["cond"])


def test_the_loser_of_a_race_rebases_and_both_commit(bucket_url, host_a, host_b):
    _commit(bucket_url, host_a, 1)
    a = BucketCache(bucket_url, "c", local_root=host_a).begin()
    b = BucketCache(bucket_url, "c", local_root=host_b).begin()
    a.stage_slot("text", _value(2), key=KEY)
    b.stage_slot("text", _value(3), key={"digest": "b" * 64})
    va = a.commit()
    vb = b.commit()
    assert a.rebased is None and "base changed" in b.rebased and "['text']" in b.rebased
    with BucketCache(bucket_url, "c", local_root=host_a).snapshot() as s:
        assert s.version == vb != va and torch.equal(s.load_slot("text")["cond"], _value(3)["cond"])


def test_concurrent_commits_have_exactly_one_winner_per_number(bucket_url, tmp_path):
    _commit(bucket_url, tmp_path / "h0", 0)
    txs = [BucketCache(bucket_url, "c", local_root=tmp_path / f"h{i}").begin() for i in range(6)]
    for i, tx in enumerate(txs):
        tx.stage_slot(f"s{i}", _value(i), key=KEY)
    errors = []

    def go(tx):
        try:
            tx.commit()
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)
    ts = [threading.Thread(target=go, args=(tx,)) for tx in txs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    cache = BucketCache(bucket_url, "c", local_root=tmp_path / "h0")
    seqs = sorted(tx.seq for tx in txs)
    assert seqs == list(range(2, 8))                          # six commits, six numbers, no loss
    newest, rec = commit_log.latest(cache.client, cache.keys)
    assert newest == 7 and rec["writer"] == next(tx.run.run_id for tx in txs if tx.seq == 7)


def test_take_lists_merge_across_hosts(bucket_url, host_a, host_b):
    def take(root, marker, takes):
        cache = BucketCache(bucket_url, "seg", local_root=root)
        tx = cache.begin()
        tx.keep_takes = 3
        p = tx.stage_path("result.mp4")
        with open(p, "wb") as f:
            f.write(f"result-{marker}".encode())
        tx.add_file("result.mp4")
        tx.stage_boundary(0, torch.full((2,), float(marker)))
        rec = {"take": takes, "result": "result.mp4", "boundaries": {"0": "boundary_00000.safetensors"},
               "segments": {"marker": marker}}
        kept = []
        if tx.base is not None:
            for r in take_index.records(tx.base.manifest) or []:
                res = take_index.result_file(r["take"]) if r["result"] == "result.mp4" else r["result"]
                tx.carry_file(res, src=r["result"])
                kept.append({**r, "result": res, "boundaries": {}})
        tx.set_section(take_index.SECTION, {"schema": take_index.SCHEMA, "takes": [rec] + kept})
        return tx
    take(host_a, 1, 1).commit()
    a, b = take(host_a, 2, 2), take(host_b, 3, 2)        # both from take 1
    a.commit()
    b.commit()
    with BucketCache(bucket_url, "seg", local_root=host_a).snapshot() as s:
        recs = take_index.records(s.manifest)
        assert [r["take"] for r in recs] == [3, 2, 1], recs
        with s.open_file(recs[1]["result"]) as f:
            assert f.read() == b"result-2"
        with s.open_file("result.mp4") as f:
            assert f.read() == b"result-3"


def test_a_run_whose_lease_was_removed_publishes_nothing(bucket_url, host_a):
    _, v1 = _commit(bucket_url, host_a, 1)
    cache = BucketCache(bucket_url, "c", local_root=host_a)
    tx = cache.begin()
    tx.stage_slot("text", _value(2), key=KEY)
    cache.client.delete(tx.lease.path)             # a collection judged it dead
    with pytest.raises(TransactionError, match="fenced|lost"):
        tx.commit()
    staging = cache.staging_parent()
    assert any(staging.iterdir())
    tx.discard()                                   # its local staging is its own: gone with it
    assert not staging.exists() or not any(staging.iterdir())
    with cache.snapshot() as s:
        assert s.version == v1


def test_clear_publishes_a_cleared_state_and_a_run_commits_over_it(bucket_url, host_a, host_b):
    _commit(bucket_url, host_a, 1)
    cache = BucketCache(bucket_url, "c", local_root=host_a)
    tx = cache.begin()
    tx.stage_slot("text", _value(2), key=KEY)
    tx.discard()
    store = BucketStore(bucket_url, host_a)
    assert store.names() == ["c"]
    cache.clear()
    assert BucketCache(bucket_url, "c", local_root=host_b).snapshot() is None
    # as on a folder, a deleted cache is not named (its log stays: numbering never restarts) ...
    assert store.names() == [] and cache.client.list(cache.keys.log_prefix)[0]
    tx = BucketCache(bucket_url, "c", local_root=host_b).begin()
    assert store.names() == ["c"]                  # ... until something lives under it again
    tx.discard()
    _, v = _commit(bucket_url, host_b, 3)
    assert store.names() == ["c"]
    with BucketCache(bucket_url, "c", local_root=host_a).snapshot() as s:
        assert s.version == v


def test_a_dead_holders_claim_and_entry_are_collected_once_stale(bucket_url, host_a):
    """A run that died holding a single-flight claim (after publishing its entry) leaves both;
    the collection keeps them while the claim is live and removes them once it is stale (a live
    claim and its entry stay). Judged by the store's clock, which reads whole seconds: the test
    polls for the collection (bounded) instead of sleeping a fixed time, and the lease is long
    enough that the first look comes well inside it on a loaded machine."""
    cache = BucketCache(bucket_url, "c", local_root=host_a, lease_s=5.0, heartbeat_s=0.5)
    tx = cache.begin()
    dead = cache.claim("text", "d" * 64, tx.run.run_id, wait=0)
    tx.stage_slot("text", _value(1), key=KEY)
    assert dead.publish(tx, "text")
    live = cache.claim("text", "e" * 64, tx.run.run_id, wait=0)
    assert live.publish(tx, "text")
    keys = {k: cache.keys.claim("text", k * 64) for k in "de"} | {f"{k}.entry": cache.keys.entry("text", k * 64)
                                                                for k in "de"}
    dead.lease.stop_heartbeat()                  # its process died: no heartbeat, no release
    collect.collect(cache)
    assert {k for k, key in keys.items() if _exists(cache, key)} == set(keys)      # not stale yet
    deadline = time.monotonic() + 60             # past its lease (5 s) and the slack (1 s)
    while True:
        time.sleep(0.5)
        collect.collect(cache)
        left = {k for k, key in keys.items() if _exists(cache, key)}
        assert {"e", "e.entry"} <= left, left    # the live claim and its entry: never collected
        if left == {"e", "e.entry"} or time.monotonic() > deadline:
            break
    assert left == {"e", "e.entry"}, f"the dead claim was not collected within 60 s: {left}"
    live.release()
    tx.discard()


def _exists(cache, key) -> bool:
    try:
        cache.client.head(key)
        return True
    except NotFound:
        return False

