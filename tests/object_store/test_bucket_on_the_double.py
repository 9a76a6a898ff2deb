"""The bucket store's basic promises on the in-memory S3 double (the fast lane; the same on the
real RGW: test_bucket_store.py): a commit read back on another host, racing commits with one
winner per number, a failed run publishes nothing, clear and a commit over it, the endpoint
probe. What the double is for: a protocol change is judged here in seconds before RGW runs."""
from __future__ import annotations

import threading

import pytest
import torch

from reuse_backend.bucket import log as commit_log, probe
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.bucket.store import BucketStore

from .bucket_help import NAME, commit, read_back, stage

pytestmark = pytest.mark.hostfree


def test_a_commit_is_read_back_on_another_host(memory_bucket, tmp_path):
    _, v1 = commit(memory_bucket.url, tmp_path / "a", 1)
    assert read_back(memory_bucket.url, tmp_path / "b") == (v1, 1.0)


def test_racing_commits_have_one_winner_per_number_and_all_commit(memory_bucket, tmp_path):
    commit(memory_bucket.url, tmp_path / "h0", 0)
    txs = []
    for i in range(6):
        tx = BucketCache(memory_bucket.url, NAME, local_root=tmp_path / f"h{i}").begin()
        stage(tx, i + 1)
        txs.append(tx)
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
    assert sorted(tx.seq for tx in txs) == list(range(2, 8))
    last = max(txs, key=lambda tx: tx.seq)
    assert read_back(memory_bucket.url, tmp_path / "r")[0] == last.version


def test_a_failed_run_publishes_nothing(memory_bucket, tmp_path):
    _, v1 = commit(memory_bucket.url, tmp_path / "a", 1)
    tx = BucketCache(memory_bucket.url, NAME, local_root=tmp_path / "a").begin()
    stage(tx, 2)
    tx.discard()
    assert read_back(memory_bucket.url, tmp_path / "b") == (v1, 1.0)


def test_clear_then_a_commit_over_it(memory_bucket, tmp_path):
    commit(memory_bucket.url, tmp_path / "a", 1)
    cache = BucketCache(memory_bucket.url, NAME, local_root=tmp_path / "a")
    cache.clear()
    assert cache.snapshot() is None and BucketStore(memory_bucket.url, tmp_path / "a").names() == []
    _, v = commit(memory_bucket.url, tmp_path / "b", 3)
    assert read_back(memory_bucket.url, tmp_path / "c") == (v, 3.0)


def test_the_double_keeps_the_probes_promises(memory_bucket):
    results = probe.run(memory_bucket.client, memory_bucket.loc)
    assert all(r["ok"] for r in results), results
    assert memory_bucket.keys() == set()


def test_a_hit_on_a_version_this_host_holds_costs_one_list(memory_bucket, tmp_path):
    commit(memory_bucket.url, tmp_path / "a", 1)
    read_back(memory_bucket.url, tmp_path / "b")
    memory_bucket.mem.calls.clear()
    with BucketCache(memory_bucket.url, NAME, local_root=tmp_path / "b").snapshot() as s:
        assert torch.equal(s.load_slot("text")["cond"], torch.full((4, 8), 1.0))
    assert memory_bucket.mem.calls == ["ListObjectsV2"], memory_bucket.mem.calls
    assert commit_log.numbers(memory_bucket.client, BucketCache(memory_bucket.url, NAME, local_root=tmp_path / "b").keys) == [1]
