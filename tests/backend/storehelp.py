"""Shared helpers of the store/lock/crash/fault/concurrency tests (plain module, no fixtures).

A "version" written by ``write_version(cache, marker)`` has 2 slots, 3 boundaries and a
result file, every tensor filled with ``marker`` and the result holding ``result-<marker>``,
so a reader can tell from content alone which version each file belongs to.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import torch

from reuse_backend.storage import fsops
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo

REPO_ROOT = Path(__file__).resolve().parents[2]


def continue_stopped(pid: int, bound_s: float = 60.0) -> None:
    """SIGCONT a child that announced it stops itself, once it really is stopped: it prints
    "paused ..." and then sends itself SIGSTOP, so a SIGCONT sent right after reading the line
    could arrive first and leave it stopped for good. Waits for the state in /proc (bounded)."""
    import signal
    deadline = time.monotonic() + bound_s
    while True:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state in ("T", "t") or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    os.kill(pid, signal.SIGCONT)


def writer_proc(*args) -> list[str]:
    """Command line of tests/backend/writer_proc.py (run it with cwd=REPO_ROOT)."""
    return [sys.executable, "-m", "tests.backend.writer_proc", *map(str, args)]


SLOTS = ("text", "image")
BOUNDARIES = (0, 1, 2)


def slot_value(marker: int, slot: str) -> dict:
    return {"cond": torch.full((2, 3), float(marker)), "pooled": [torch.full((4,), float(marker))],
            "slot": slot, "marker": marker}


def boundary_value(marker: int, i: int) -> torch.Tensor:
    return torch.full((1, 2, 2), float(marker), dtype=torch.bfloat16)


def result_bytes(marker: int) -> bytes:
    return f"result-{marker}".encode() * 10


def stage_version(tx, marker: int) -> None:
    """Stage 2 slots + 3 boundaries + result file, every one carrying ``marker``."""
    for slot in SLOTS:
        tx.stage_slot(slot, slot_value(marker, slot), key={"slot": slot}, meta={"m": marker})
    for i in BOUNDARIES:
        tx.stage_boundary(i, boundary_value(marker, i), {"i": i})
    path = tx.stage_path("result.mp4")
    with open(path, "wb") as f:
        f.write(result_bytes(marker))
    tx.add_file("result.mp4")
    tx.set_section("segments", {"count": len(BOUNDARIES) + 1, "marker": marker})


def write_version(cache: FolderCache, marker: int, *, run_id: str | None = None) -> str:
    """begin -> stage 2 slots + 3 boundaries + result file -> commit (discard on failure)."""
    tx = cache.begin(RunInfo(run_id=run_id or f"run-{marker}", extra={"marker": marker}))
    try:
        stage_version(tx, marker)
        return tx.commit()
    except BaseException:
        tx.discard()
        raise


def snapshot_marker(snap) -> int:
    """The marker of a snapshot; asserts every file of it belongs to that same version."""
    marker = snap.manifest["run"]["extra"]["marker"]
    assert snap.manifest["sections"]["segments"]["marker"] == marker
    assert set(snap.manifest["slots"]) == set(SLOTS)
    assert snap.boundary_indices() == list(BOUNDARIES)
    for slot in SLOTS:
        v = snap.load_slot(slot)
        assert v["marker"] == marker and v["slot"] == slot
        assert torch.equal(v["cond"], torch.full((2, 3), float(marker)))
        assert torch.equal(v["pooled"][0], torch.full((4,), float(marker)))
    for i in BOUNDARIES:
        assert torch.equal(snap.load_boundary(i), boundary_value(marker, i))
    with snap.open_file("result.mp4") as f:
        assert f.read() == result_bytes(marker)
    assert snap.verify_hashes() == []
    return marker


def cache_marker(cache: FolderCache) -> int | None:
    snap = cache.snapshot()
    if snap is None:
        return None
    with snap:
        return snapshot_marker(snap)


def cache_state(cache: FolderCache) -> tuple[int | None, dict | None]:
    """(marker, manifest) of the committed version, after checking all of its content."""
    snap = cache.snapshot()
    if snap is None:
        return None, None
    with snap:
        return snapshot_marker(snap), snap.manifest


def normalized(m: dict | None) -> dict | None:
    """A manifest without what differs between two runs writing the same content."""
    if m is None:
        return None
    m = json.loads(json.dumps(m))
    del m["version"], m["created_at"], m["run"]["host"], m["run"]["pid"]
    return m


def entries(root) -> list[str]:
    """The root's entries; the ``.readers`` folder is left out when it is empty (it is kept
    between snapshots) or holds only this process's unused leases (removed LINGER_S after their
    last snapshot: readers.py); the reader tests look at it directly."""
    from reuse_backend.folder import readers

    def kept(e):
        p = os.path.join(root, e)
        if e != readers.READERS_DIR or not os.path.isdir(p):
            return True
        return any(x["owner"] is None or x["owner"].get("pid") != os.getpid() for x in readers.leases(root))
    return sorted(e for e in os.listdir(root) if kept(e))


class OpHook:
    """fsops hook: counts main-thread operations and acts on the k-th (1-based) one.

    action(op, path) is called for op number k (and every later one when persistent).
    Heartbeat threads are not counted, so op numbers are deterministic.
    """

    def __init__(self, k: int | None = None, action=None, persistent: bool = False):
        self.k, self.action, self.persistent = k, action, persistent
        self.count = 0
        self.fired = False
        self.ops: list[tuple[str, str]] = []

    def __call__(self, op: str, path: str) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self.count += 1
        self.ops.append((op, os.path.basename(path)))
        if self.k is not None and (self.count == self.k or (self.persistent and self.count > self.k)):
            self.fired = True
            self.action(op, path)

    def __enter__(self):
        fsops.set_hook(self)
        return self

    def __exit__(self, *exc):
        fsops.clear_hook()


def copy_root(src, dst, **kw):
    """shutil.copytree of a cache root (symlinks as symlinks) without its reader leases: they
    name the process that read the source (this one), so in a copy they would be leases this
    process does not hold (stale for check)."""
    from reuse_backend.folder import readers
    return shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(readers.READERS_DIR), **kw)
