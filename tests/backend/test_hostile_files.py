"""Hostile cache folders (written by someone else): refused quickly, never a hang or a huge load.

- a FIFO (or socket, device) named ``<name>.lock`` used to block the worker's whole prompt
  queue and ``check`` (the lock was opened without O_NONBLOCK and read);
- a sparse slot file of a few KB on disk claiming 2 GiB used to be loaded (+6 GB peak RSS).
"""
from __future__ import annotations

import json
import os
import struct
import threading
import time

import pytest
import torch

from reuse_backend.errors import CorruptCacheError
from reuse_backend.folder.cache import FolderCache
from reuse_backend.folder import lease_files as lk
from reuse_backend.folder.check import check
from tests.backend.storehelp import cache_marker, write_version


def _within(seconds: float, fn):
    """fn() in a thread; fails (instead of hanging the suite) if it does not return in time."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn} blocked for more than {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("age", ["fresh", "past its lease"])
def test_a_lock_path_that_is_not_a_file_is_refused_at_once_and_left_alone(tmp_path, kind, age):
    """Something other than a regular file where the writer lock belongs (a FIFO, a folder: nothing
    SeedReuse writes) is refused at the commit's first look, with the path and the fix, instead of
    being waited on for the whole commit wait (and a FIFO or folder past its lease is never 'broken':
    it is not a lease); the last good version stays; check names it; nothing reads from it."""
    write_version(FolderCache(tmp_path, "c"), 1)
    lock = tmp_path / "c.lock"
    os.mkfifo(lock) if kind == "fifo" else os.mkdir(lock)
    if age != "fresh":
        old = time.time() - 1000
        os.utime(lock, (old, old))
    owner, st = _within(10, lambda: lk.read_lease(lock))
    assert owner is None and st is not None
    tx = _within(10, lambda: FolderCache(tmp_path, "c").begin())    # runs begin without the lock
    tx.stage_slot("text", {"x": 1}, key={})
    with pytest.raises(CorruptCacheError, match="not a regular file") as ei:
        _within(10, tx.commit)                                     # the default commit wait is minutes
    assert str(lock) in ei.value.message and str(lock) in ei.value.fix
    tx.discard()
    assert [p.code for p in _within(10, lambda: check(tmp_path, "c"))] == ["not_a_lock_file"]
    assert os.path.lexists(lock) and cache_marker(FolderCache(tmp_path, "c")) == 1


def test_fifo_in_place_of_a_slot_is_refused(tmp_path):
    cache = FolderCache(tmp_path, "c")
    write_version(cache, 1)
    slot = tmp_path / "c" / "slot_text.safetensors"
    os.unlink(slot)
    os.mkfifo(slot)
    with pytest.raises(CorruptCacheError, match="not a regular file"):
        _within(10, cache.snapshot)
    assert "not_regular" in [p.code for p in _within(10, lambda: check(tmp_path, "c"))]


def _sparse_slot(cache: FolderCache, claim: int) -> None:
    """Rewrite slot 'text' as a sparse file whose header claims one float32 tensor of
    ``claim`` bytes (its data area is a hole), and make the manifest agree with its size."""
    d = cache.paths.current
    path = d / "slot_text.safetensors"
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__")
    structure = json.loads(meta["seedreuse.structure"])
    # one tensor "t0" under the value's structure, as serialize writes a bare tensor
    header = {"__metadata__": {**meta, "seedreuse.structure": json.dumps({"t": "tensor", "k": "t0"})},
              "t0": {"dtype": "F32", "shape": [claim // 4], "data_offsets": [0, claim]}}
    assert structure  # the original structure was readable
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    os.unlink(path)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        f.truncate(8 + len(blob) + claim)          # a hole: nothing allocated
    m = json.loads((d / "manifest.json").read_text())
    m["files"]["slot_text.safetensors"]["bytes"] = os.path.getsize(path)
    (d / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True))


@pytest.mark.exhaustive       # a 2 GiB sparse file; the 32 MiB variant below stays in the fast lane
def test_sparse_slot_claiming_gigabytes_is_refused_before_reading(tmp_path):
    cache = FolderCache(tmp_path, "c")
    write_version(cache, 1)
    _sparse_slot(cache, 2 << 30)
    st = os.stat(cache.paths.current / "slot_text.safetensors")
    assert st.st_size > 2 << 30 and st.st_blocks * 512 < 1 << 20     # really sparse here
    with cache.snapshot() as snap:
        with pytest.raises(CorruptCacheError, match="sparse file"):
            snap.load_slot("text")
        assert torch.equal(snap.load_boundary(0), snap.load_boundary(0))   # the rest still loads
    assert any(p.code == "unreadable_tensor" and "sparse" in p.message
               for p in check(tmp_path, "c"))


def test_sparse_check_can_be_lifted_for_compressing_filesystems(tmp_path, monkeypatch):
    cache = FolderCache(tmp_path, "c")
    write_version(cache, 1)
    _sparse_slot(cache, 32 << 20)
    with cache.snapshot() as snap:
        with pytest.raises(CorruptCacheError, match="sparse"):
            snap.load_slot("text")
        monkeypatch.setenv("SEEDREUSE_ALLOW_SPARSE", "1")
        assert snap.load_slot("text").numel() == (32 << 20) // 4     # zeros, as the file says
