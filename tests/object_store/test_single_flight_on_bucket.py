"""Single flight and collection on the real RGW: one holder per claim (If-None-Match: *), a
waiter adopts the holder's entry, a dead holder's claim is broken only after its lease and what
it left is collected; what a dead run uploaded is collected only once its lease expired (after
a fence), and a reader's version is never deleted under it.
"""
from __future__ import annotations

import threading

import pytest
import torch

from reuse_backend.bucket import log as commit_log
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.bucket.store import BucketStore

from .bucket_help import NAME, Writer, commit, current, keys_under, text_value, wait_stale

pytestmark = pytest.mark.hostfree
RECORD = r"/log/\d+\.json$"


def test_one_holder_per_claim_and_a_waiter_adopts_its_entry(bucket_url, tmp_path):
    caches = [BucketCache(bucket_url, NAME, local_root=tmp_path / f"h{i}") for i in range(6)]
    got = [None] * 6

    def take(i):
        got[i] = caches[i].claim("text", "d1", f"run-{i}", wait=0)
    ts = [threading.Thread(target=take, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    holders = [i for i, g in enumerate(got) if g.lease is not None]
    assert len(holders) == 1, [g.lease for g in got]                 # the gateway let one create win
    h = holders[0]
    assert all(g.waited_for["run_id"] in (f"run-{h}", "unknown (released just now)")
               for i, g in enumerate(got) if i != h)
    tx = caches[h].begin()
    tx.stage_slot("text", text_value(5), key={"digest": "d1"})
    waiting, adopted = threading.Event(), {}

    def wait_for_it():
        adopted["got"] = caches[(h + 1) % 6].claim("text", "d1", "waiter", wait=120, on_wait=waiting.set)
    t = threading.Thread(target=wait_for_it)
    t.start()
    assert waiting.wait(60), "the waiter never waited"
    assert got[h].publish(tx, "text")                               # the holder's encoding, as an entry
    t.join(120)
    w = adopted["got"]
    assert w.lease is None and w.entry is not None and w.waited_for["run_id"] == f"run-{h}"
    assert torch.equal(w.entry.load_slot("text")["cond"], text_value(5)["cond"])
    w.close_entry()
    got[h].release()
    tx.discard()
    assert not any("/claims/" in k for k in keys_under(caches[0]))  # the entry went with the claim


def test_a_dead_holders_claim_is_broken_after_its_lease_and_collected(bucket_url, rgw, tmp_path):
    cache = BucketCache(bucket_url, NAME, local_root=tmp_path / "h0")
    env = rgw.env() | {"SEEDREUSE_LEASE_S": "2", "SEEDREUSE_CACHE_ROOT": str(tmp_path / "holder")}
    with Writer(env, "claim", bucket_url, tmp_path / "holder", NAME, "text") as w:
        w.expect("claimed")
        live = cache.claim("text", "d1", "second", wait=0)         # the holder lives: its entry is adopted
        assert live.lease is None and live.waited_for["run_id"] == "dead-holder"
        assert torch.equal(live.entry.load_slot("text")["cond"], text_value(7)["cond"])
        live.close_entry()
        w.kill()
    wait_stale(cache, "dead-holder")
    found = BucketStore(bucket_url, tmp_path / "h0").check(NAME)
    claim_key, entry_key = cache.keys.claim("text", "d1"), cache.keys.entry("text", "d1")
    assert {p.path.split("/", 3)[-1] for p in found if p.code == "collectable"} >= {claim_key, entry_key}, found
    taken = cache.claim("text", "d1", "second", wait=120)           # the stale claim is taken over
    assert taken.lease is not None and any("broke stale claim of run dead-holder" in b for b in taken.lease.broke)
    taken.release()
    store = BucketStore(bucket_url, tmp_path / "h0")
    store.check(NAME, repair=True)
    left = [k for k in (k[len(cache.keys.base):] for k in keys_under(cache)) if "claims/" in k or "dead-holder" in k]
    assert store.check(NAME) == [] and not left, left


def test_collection_waits_for_a_dead_runs_lease_and_never_deletes_a_readers_version(bucket_url, rgw, proxy,
                                                                                   tmp_path):
    h0 = tmp_path / "h0"
    _, v1 = commit(bucket_url, h0, 1)
    cache = BucketCache(bucket_url, NAME, local_root=h0)
    v1_objects = {cache.keys.data(rel) for rel in current(bucket_url, h0)[1]["objects"].values()}
    reader = BucketCache(bucket_url, NAME, local_root=tmp_path / "reader").snapshot()   # a reader lease on v1
    hold = proxy.hold("PUT", RECORD)
    env = rgw.env() | proxy.env() | {"SEEDREUSE_LEASE_S": "2", "SEEDREUSE_CACHE_ROOT": str(tmp_path / "hw")}
    try:
        with Writer(env, "commit", bucket_url, tmp_path / "hw", NAME, 2) as w:
            w.expect("begun")
            hold.wait_arrived(120)                      # uploaded, alive (heartbeating), not committed
            uploaded = {k for k in keys_under(cache) if "/data/writer-2/" in k}
            assert len(uploaded) == 2
            commit(bucket_url, h0, 3)                   # its collection runs while the writer lives
            assert uploaded <= keys_under(cache)
            w.kill()
            hold.release(forward=False)
        wait_stale(cache, "writer-2")
        commit(bucket_url, h0, 4)                       # a fence first, then the dead run's uploads go
        seq, rec = current(bucket_url, h0)
        assert rec["kind"] == "fence" and rec["fenced"] == ["writer-2"], rec
        assert not uploaded & keys_under(cache)
        # the reader's version outlived three commits and their collections
        assert v1_objects <= keys_under(cache) and commit_log.read(cache.client, cache.keys, 1) is not None
        assert torch.equal(reader.load_slot("text")["cond"], text_value(1)["cond"])
        assert reader.version == v1
    finally:
        reader.close()
    commit(bucket_url, h0, 5)
    assert not v1_objects & keys_under(cache)           # collected once no reader needs it
