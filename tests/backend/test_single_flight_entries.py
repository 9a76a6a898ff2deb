"""Single-flight entries (store/claim.py, folder/claims.py): a waiter ends its wait when the claim's holder has
*encoded* the slot key, not when the holder's whole prompt ends (an orchestrator's collector may
wait on the waiters themselves). The entry is no version: a failed holder publishes nothing.
"""
from __future__ import annotations

import os
import threading
import time

import torch

from reuse_backend.storage import fsops
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
from reuse_backend.folder.check import check
from tests.backend.storehelp import entries

KEY = {"digest": "d" * 64, "fields": {"text": "a cat"}}


def _value():
    return {"cond": torch.arange(6, dtype=torch.float32).reshape(2, 3), "slot": "text"}


def _holder_stages(cache: FolderCache, run_id: str = "holder"):
    got = cache.claim("text", KEY["digest"], run_id, wait=0)
    assert got.lease is not None and got.waited_for is None
    tx = cache.begin(RunInfo(run_id=run_id))
    tx.stage_slot("text", _value(), key=KEY, meta={"encode_seconds": 1.5})
    return got, tx


def test_a_waiter_gets_the_holders_encoding_while_the_holder_still_runs(tmp_path):
    cache = FolderCache(tmp_path, "a")
    got, tx = _holder_stages(cache)
    waiter: dict = {}

    def wait():
        w = FolderCache(tmp_path, "a").claim("text", KEY["digest"], "waiter", wait=120, on_wait=lambda: None)
        waiter["claimed"] = w
        waiter["value"] = w.entry.load_slot("text") if w.entry is not None else None
        waiter["meta"] = w.entry.slot_entry("text") if w.entry is not None else None
        w.close_entry()

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.3)                 # the waiter polls the live claim: no entry yet
    assert t.is_alive()
    assert got.publish(tx, "text")
    t.join(timeout=30)
    assert not t.is_alive()
    w = waiter["claimed"]
    # the wait ended by the entry: the holder still holds its claim and has committed nothing
    assert w.lease is None and w.waited_for["run_id"] == "holder" and got.lease.held()
    assert torch.equal(waiter["value"]["cond"], _value()["cond"])
    assert waiter["meta"]["key"] == KEY and waiter["meta"]["meta"]["encode_seconds"] == 1.5
    assert cache.snapshot() is None          # an entry is no version
    tx.discard()                              # the holder's prompt fails later
    got.release()
    assert cache.snapshot() is None and entries(tmp_path) == []


def test_the_entry_goes_with_the_claim_and_a_dead_holders_is_recovered(tmp_path):
    cache = FolderCache(tmp_path, "a")
    got, tx = _holder_stages(cache)
    assert got.publish(tx, "text")
    entry = cache.claims.entry_path("text", KEY["digest"])
    assert entry.is_dir()
    tx.commit()
    got.release()                                   # released after the commit: entry first
    assert not entry.exists() and entries(tmp_path) == ["a"]
    # a holder that died after publishing: its claim turns stale (here: released without the
    # release's cleanup, as a kill leaves it), so recovery removes the entry with it
    got, tx = _holder_stages(cache, "holder2")
    assert got.publish(tx, "text")
    got.lease.release()
    tx.discard()
    assert entry.is_dir()
    done = FolderCache(tmp_path, "a").recover()
    assert any(entry.name in d for d in done), done
    assert not entry.exists() and check(tmp_path, "a") == []


def test_an_entry_a_dead_holder_left_serves_the_next_claimant(tmp_path):
    """Killed after encoding, before its claim's cleanup: the next run taking the claim gets that
    encoding with it (no encode), holds the claim, and its release removes both."""
    cache = FolderCache(tmp_path, "a")
    got, tx = _holder_stages(cache)
    assert got.publish(tx, "text")
    got.lease.release()
    tx.discard()
    late = FolderCache(tmp_path, "a").claim("text", KEY["digest"], "late", wait=0)
    assert late.lease is not None and late.waited_for is None and late.entry is not None
    assert late.entry.manifest["run"]["run_id"] == "holder"
    assert torch.equal(late.entry.load_slot("text")["cond"], _value()["cond"])
    late.release()
    assert entries(tmp_path) == []


def test_a_broken_entry_is_never_used(tmp_path):
    cache = FolderCache(tmp_path, "a")
    got, tx = _holder_stages(cache)
    assert got.publish(tx, "text")
    entry = cache.claims.entry_path("text", KEY["digest"])
    os.unlink(entry / "slot_text.safetensors")         # damaged (or written by someone else)
    w = FolderCache(tmp_path, "a").claim("text", KEY["digest"], "waiter", wait=0.3)
    assert w.lease is None and w.entry is None          # waited its bound, then encodes itself
    tx.discard()
    got.release()


def test_publish_needs_the_claim_and_never_fails_the_run(tmp_path):
    cache = FolderCache(tmp_path, "a")
    got, tx = _holder_stages(cache)
    got.lease.release()                                  # lost (broken by another run)
    assert not got.publish(tx, "text")
    got.lease = None
    got2, tx2 = _holder_stages(cache, "other")

    def fail(op, path):
        if op == "rename" and ".entry.part-" in path:
            raise OSError(28, "No space left on device")
    fsops.set_hook(fail)
    try:
        assert not got2.publish(tx2, "text")            # logged; the waiters wait for the claim
    finally:
        fsops.clear_hook()
    assert not cache.claims.entry_path("text", KEY["digest"]).exists()
    tx2.commit()
    got2.release()
    tx.discard()
    assert entries(tmp_path) == ["a"]


def test_a_holder_killed_while_writing_its_entry_leaves_nothing_after_recovery(tmp_path):
    """Killed between the entry's part and its rename (the soak's kill:late saw it): the part is
    kept while its claim is live and removed by the next recovery once the claim is gone, without
    waiting out a lease (it was left behind after a burst before)."""
    cache = FolderCache(tmp_path, "a")
    got, tx = _holder_stages(cache)
    final = cache.claims.entry_path("text", KEY["digest"])

    def killed(op, path):
        if op == "rename" and ".entry.part-" in path:
            raise KeyboardInterrupt("killed")             # leaves the part, as SIGKILL would
    fsops.set_hook(killed)
    try:
        got.publish(tx, "text")
    except KeyboardInterrupt:
        pass
    finally:
        fsops.clear_hook()
    parts = [p for p in os.listdir(cache.paths.tmp) if ".entry.part-" in p]
    assert len(parts) == 1 and not final.exists()
    FolderCache(tmp_path, "a").recover()
    assert parts[0] in os.listdir(cache.paths.tmp)     # its claim is live: the holder may still run
    got.lease.release()                                  # the claim gone without its cleanup
    got.lease = None
    tx.discard()
    assert parts[0] in [p.name for p, _ in single_flight_dead(cache)]   # check sees it too
    done = FolderCache(tmp_path, "a").recover()
    assert any("single-flight entry" in d or parts[0] in d for d in done), done
    assert entries(tmp_path) == [] and check(tmp_path, "a") == []


def single_flight_dead(cache):
    from reuse_backend.folder import run_lease
    return run_lease.dead_entries(cache.paths, cache.lease_s)
