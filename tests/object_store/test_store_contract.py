"""The store interface's contract (reuse_backend/store/interface.py), one suite for every medium:
the folder, the bucket on the in-memory S3 double (both in the fast lane: tests/conftest.py puts
them in the backend tier) and the bucket on the real Ceph RGW (the object-store tier, the proof).

Every test speaks only the interface (``stores.open_cache``, ``stores.at``, the cache, snapshot,
transaction and claim protocols); what differs per medium is the fixture's: where a simulated host
keeps its local tier (``cache(host)``), how a lease is made to look older than its lease
(``expire``), and how a stranger damages a committed file (``damage``). Invariants by number.
"""
from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
import torch

from reuse_backend import stores
from reuse_backend.errors import CacheBusyError, CorruptCacheError, InvalidCacheNameError, NoCommittedCacheError, \
    TransactionError
from reuse_backend.store import manifest as mf
from reuse_backend.store.run_info import RunInfo

from .memory_bucket import MemoryS3

pytestmark = pytest.mark.hostfree

NAME = "contract"
LEASE_S = 1.0


class Medium:
    """One medium under test: a location, and a handle per simulated host."""

    def __init__(self, kind: str, location: str, tmp, mem=None):
        self.kind, self.location, self.tmp, self.mem = kind, location, tmp, mem

    def _local(self, host: str) -> dict:
        return {} if self.kind == "folder" else {"local_root": self.tmp / f"tier-{host}"}

    def cache(self, host: str = "a", **kw):
        return stores.open_cache(self.location, NAME, **self._local(host), **kw)

    def store(self, host: str = "a"):
        return stores.at(self.location, **self._local(host))

    def expire(self, lease) -> None:
        """Make a held lease look older than its lease to every judge (its holder stopped)."""
        lease.stop_heartbeat()
        if self.kind == "folder":
            old = time.time() - lease.lease_s - 5
            os.utime(lease.path, (old, old))
        elif self.kind == "memory":
            self.mem.advance(lease.lease_s + 5)
        else:
            time.sleep(lease.lease_s + 2.5)        # RGW: the store's clock moves on its own

    def damage(self, cache, fname: str) -> None:
        """Replace a committed file's bytes with others of the same size (a stranger's write)."""
        with cache.snapshot(lease=False) as snap:
            junk = b"\xff" * snap.manifest["files"][fname]["bytes"]
            if self.kind == "folder":
                with open(os.path.join(self.location, NAME, fname), "r+b") as f:
                    f.write(junk)
            else:                                  # the object the commit record names
                cache.client.put(cache.keys.data(snap.objects[fname]), junk)


@pytest.fixture(params=["folder", "memory", "rgw"])
def medium(request, tmp_path):
    if request.param == "folder":
        yield Medium("folder", str(tmp_path / "cache"), tmp_path)
    elif request.param == "memory":
        mem = MemoryS3()
        bucket = f"mem-{uuid.uuid4().hex[:12]}"
        mem.install(bucket)
        try:
            yield Medium("memory", f"s3://{bucket}/contract", tmp_path, mem=mem)
        finally:
            mem.uninstall()
    else:
        yield Medium("rgw", request.getfixturevalue("bucket_url"), tmp_path)


def _stage(tx, marker: int, slots=("text", "image")) -> None:
    for slot in slots:
        tx.stage_slot(slot, {"cond": torch.full((2, 3), float(marker)), "marker": marker}, key={"slot": slot})
    tx.stage_boundary(0, torch.full((1, 2), float(marker)))
    path = tx.stage_path("result.mp4")
    with open(path, "wb") as f:
        f.write(f"result-{marker}".encode() * 8)
    tx.add_file("result.mp4")


def _commit(cache, marker: int, run_id: str | None = None) -> str:
    tx = cache.begin(RunInfo(run_id=run_id or f"run-{marker}-{uuid.uuid4().hex[:6]}"))
    try:
        _stage(tx, marker)
        return tx.commit()
    finally:
        tx.discard()


def _marker(cache, slot: str = "text"):
    snap = cache.snapshot()
    if snap is None:
        return None
    with snap:
        return snap.load_slot(slot)["marker"]


def test_a_commit_is_read_back_whole_by_another_host(medium):
    """Invariants 1 and 2: what one host committed another reads whole, file by file."""
    version = _commit(medium.cache("a"), 1)
    with medium.cache("b").snapshot() as snap:
        assert snap.version == version
        assert snap.load_slot("text")["marker"] == 1 and snap.load_slot("image")["marker"] == 1
        assert torch.equal(snap.load_boundary(0), torch.full((1, 2), 1.0))
        with snap.open_file("result.mp4") as f:
            assert f.read() == b"result-1" * 8


def test_a_failed_run_publishes_nothing(medium):
    """Invariant 1: a run that stages everything and then fails (discard) leaves the last good
    version current, on every host."""
    version = _commit(medium.cache("a"), 1)
    tx = medium.cache("a").begin()
    _stage(tx, 2)
    assert tx.discard()
    for host in ("a", "b"):
        with medium.cache(host).snapshot() as snap:
            assert snap.version == version and snap.load_slot("text")["marker"] == 1


def test_racing_commits_all_publish_one_after_the_other(medium):
    """Invariant 3: runs begun on one base, committed at once from several hosts: every one
    commits, each after the first says its base changed, and the current version is one of them."""
    _commit(medium.cache("h0"), 0)
    txs = [medium.cache(f"h{i}").begin(RunInfo(run_id=f"racer-{i}")) for i in range(1, 5)]
    for i, tx in enumerate(txs, 1):
        _stage(tx, i)
    errors = []

    def go(tx):
        try:
            tx.commit()
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)
        finally:
            tx.discard()

    threads = [threading.Thread(target=go, args=(tx,)) for tx in txs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert [tx.state for tx in txs] == ["committed"] * 4 and len({tx.version for tx in txs}) == 4
    assert sum(1 for tx in txs if tx.rebased and "base changed" in tx.rebased) == 3
    with medium.cache("r").snapshot() as snap:
        assert snap.manifest["run"]["run_id"] in {tx.run.run_id for tx in txs}


def test_a_run_whose_base_changed_commits_its_own_complete_version(medium):
    """Invariant 3: a run that carried a slot of its base and staged another commits, after
    another host committed meanwhile, its own complete version: what it carried and what it
    staged, whatever the other version holds."""
    _commit(medium.cache("a"), 1)
    tx = medium.cache("a").begin(RunInfo(run_id="carrier"))
    try:
        tx.carry_slot("image")
        tx.stage_slot("text", {"cond": torch.full((2, 3), 2.0), "marker": 2}, key={"slot": "text"})
        other = _commit(medium.cache("b"), 3)
        version = tx.commit()
    finally:
        tx.discard()
    assert version != other and tx.rebased and "base changed" in tx.rebased
    with medium.cache("c").snapshot() as snap:
        assert snap.version == version
        assert snap.load_slot("text")["marker"] == 2 and snap.load_slot("image")["marker"] == 1


def test_a_fenced_run_publishes_nothing(medium):
    """Invariant 4: a run whose run lease went stale and was taken over by another host's
    recovery (a folder) or collection (a bucket) fails its commit as fenced; the version current
    before it stays current."""
    version = _commit(medium.cache("a", lease_s=LEASE_S, heartbeat_s=0.2), 1)
    tx = medium.cache("a", lease_s=LEASE_S, heartbeat_s=0.2).begin(RunInfo(run_id="paused"))
    try:
        _stage(tx, 2)
        medium.expire(tx.lease)
        medium.cache("b", lease_s=LEASE_S, heartbeat_s=0.2).recover("another-host")
        with pytest.raises(TransactionError, match="was fenced") as ei:
            tx.commit()
        assert ei.value.details["lost"] == "run lease" and tx.state == "fenced"
    finally:
        tx.discard()
    with medium.cache("c").snapshot() as snap:
        assert snap.version == version


def test_single_flight_one_holder_and_a_waiter_adopts_its_entry(medium):
    """Invariant 5: one live holder per slot key; a waiter gets the holder's encoding as soon as it
    is published, not its commit; the holder's failed prompt publishes nothing, and its release
    frees the key."""
    holder = medium.cache("a").claim("text", "d1", "holder-run", wait=0)
    assert holder.held and holder.waited_for is None and holder.entry is None
    busy = medium.cache("b").claim("text", "d1", "waiter-run", wait=0)
    assert not busy.held and busy.waited_for["run_id"] == "holder-run"
    tx = medium.cache("a").begin(RunInfo(run_id="holder-run"))
    try:
        tx.stage_slot("text", {"cond": torch.full((2, 3), 7.0), "marker": 7}, key={"slot": "text"})
        assert holder.publish(tx, "text")
        got = medium.cache("b").claim("text", "d1", "waiter-run", wait=30)
        assert not got.held and got.entry is not None and got.entry.load_slot("text")["marker"] == 7
        got.close_entry()
    finally:
        tx.discard()
        holder.release()
    assert medium.cache("b").snapshot() is None            # an entry is no version
    again = medium.cache("b").claim("text", "d1", "waiter-run", wait=0)
    assert again.held and again.waited_for is None
    again.release()


def test_a_reader_keeps_its_version_from_being_cleared(medium):
    """Invariant 6: while another host holds a snapshot it has not finished reading, clearing the
    cache is refused (in use) and the snapshot reads on; once it is closed, the cache clears."""
    _commit(medium.cache("a"), 1)
    snap = medium.cache("b").snapshot()
    try:
        with pytest.raises(CacheBusyError, match="read by"):
            medium.cache("a").clear()
        assert snap.load_slot("text")["marker"] == 1
    finally:
        snap.close()
    assert medium.cache("a").clear()
    assert medium.cache("c").snapshot() is None


def test_a_damaged_file_is_refused_never_loaded(medium):
    """Invariant 7: a committed file replaced by someone else's bytes is refused with a typed error
    naming the cache and the fix; nothing of it is returned."""
    _commit(medium.cache("a"), 1)
    medium.damage(medium.cache("a"), mf.slot_file("text"))
    with pytest.raises(CorruptCacheError) as ei:
        with medium.cache("b").snapshot() as snap:
            snap.load_slot("text", verify=True)
    assert NAME in ei.value.message and "clear" in ei.value.fix


def test_names_are_validated_before_anything_is_touched(medium):
    """Invariant 7: a cache or slot name that could address anything outside the cache is refused
    before a byte is written."""
    with pytest.raises(InvalidCacheNameError):
        stores.open_cache(medium.location, "../other", **medium._local("a"))
    tx = medium.cache("a").begin()
    try:
        with pytest.raises(InvalidCacheNameError):
            tx.stage_slot("../x", {"v": 1}, key={})
    finally:
        tx.discard()
    assert medium.cache("a").snapshot() is None


def test_the_store_lists_checks_and_deletes(medium):
    """The Store protocol on every medium: a committed cache is listed and described, check finds
    nothing wrong with it, delete removes it and says what it freed; a second delete is refused."""
    _commit(medium.cache("a"), 1)
    store = medium.store("a")
    assert NAME in store.names() and NAME in store.committed()
    row, snap = store.describe(NAME)
    assert row["committed"] and row["bytes"] > 0 and snap is not None
    snap.close()
    assert [p for p in store.check(NAME) if not p.repaired] == []
    assert store.delete(NAME) > 0
    assert NAME not in store.committed()
    with pytest.raises(NoCommittedCacheError):
        store.delete(NAME)
