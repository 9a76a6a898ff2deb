"""Fencing: a writer that lost its lock (paused past its lease) can no longer touch the new
owner's staging or publish anything (issue: a SIGSTOPped writer overwrote the next run's chunk).

A real writer process (tests/backend/writer_proc.py ``pause``) is stopped with SIGSTOP in the
middle of one kind of staging write; once its lease (shortened with SEEDREUSE_LEASE_S) has
expired, a second writer takes the cache over and stages its own files; then the first one
continues. The first must fail with "lost its run lease" (never a raw OSError, never a
commit), and the second one's staging, commit and committed content must be untouched.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from reuse_backend.errors import CacheBusyError
from reuse_backend.media import video
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
from reuse_backend.folder import run_lease
from reuse_backend.folder.check import check
from tests.backend.storehelp import (REPO_ROOT, boundary_value, continue_stopped, result_bytes,
                                     slot_value, write_version, writer_proc)

LEASE_S = 1.0


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _take_over(root, name):
    """Begin as a second writer once the paused writer's lease has expired (bounded wait): runs
    begin at once (no writer lock, run_lease.py), and this one's recovery then removes the
    paused run's staging (and breaks its writer lock when it paused inside its commit)."""
    cache = FolderCache(root, name, lease_s=LEASE_S, heartbeat_s=0.2)
    deadline = time.monotonic() + 60
    while not run_lease.dead_entries(cache.paths, LEASE_S):
        assert time.monotonic() < deadline, "the paused writer's lease never expired"
        time.sleep(0.2)
    return cache.begin(RunInfo(run_id="new-owner", extra={"marker": 3}))


@pytest.mark.parametrize("kind", [
    pytest.param("slot", marks=pytest.mark.exhaustive), pytest.param("boundary", marks=pytest.mark.exhaustive),
    "chunk",   # the fast lane's representative: the write kind that corrupted a committed result
    pytest.param("result", marks=pytest.mark.exhaustive), pytest.param("commit-old", marks=pytest.mark.exhaustive),
    pytest.param("commit-publish", marks=pytest.mark.exhaustive)])
def test_writer_paused_past_its_lease_is_fenced(tmp_path, kind):
    write_version(FolderCache(tmp_path, "c"), 1)
    env = {**os.environ, "SEEDREUSE_LEASE_S": str(LEASE_S)}
    proc = subprocess.Popen(writer_proc("pause", tmp_path, "c", kind), cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == f"paused {kind}", (line, proc.stderr.read() if proc.poll() is not None else "")
        tx = _take_over(tmp_path, "c")                 # breaks the stale lock, recovers, stages
        assert any("stale run lease" in r for r in tx.recovered), tx.recovered
        tx.stage_slot("text", slot_value(3, "text"), key={"slot": "text"}, meta={"m": 3})
        tx.stage_boundary(1, boundary_value(3, 1), {"i": 1})
        chunk = tx.stage_path("chunk_00001.mp4")
        with tx.writing("write chunk_00001.mp4"):
            video.write_chunk(chunk, np.full((3, 16, 16, 3), 40, np.uint8), 8)
        res = tx.stage_path("result.mp4")
        with open(res, "wb") as f:
            f.write(result_bytes(3))
        staged = {n: _sha(tx.staging / n) for n in ("slot_text.safetensors", "boundary_00001.safetensors",
                                                     "chunk_00001.mp4", "result.mp4")}
        os.kill(proc.pid, signal.SIGCONT)              # the paused writer goes on
        out, err = proc.communicate(timeout=120)
        outcome = json.loads(out.strip().splitlines()[-1])
        assert outcome["result"] == "error", (outcome, err[-2000:])
        assert outcome["type"] == "TransactionError" and "lost its run lease" in outcome["message"], outcome
        assert "SEEDREUSE_LEASE_S" in outcome["fix"]
        # nothing of the new owner's staging was touched
        assert staged == {n: _sha(tx.staging / n) for n in staged}
        tx.discard_file("chunk_00001.mp4")
        tx.add_file("result.mp4")
        tx.set_section("segments", {"count": 2, "marker": 3})
        tx.commit()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()
    with FolderCache(tmp_path, "c").snapshot() as snap:
        assert snap.manifest["run"]["run_id"] == "new-owner"
        assert snap.load_slot("text")["marker"] == 3
        assert snap.load_boundary(1).equal(boundary_value(3, 1))
        with snap.open_file("result.mp4") as f:
            assert f.read() == result_bytes(3)
        assert snap.verify_hashes() == []
    problems = [p for p in check(tmp_path, "c") if p.code != "stale_tmp"]
    assert problems == [], problems


def test_unpaused_writer_still_commits(tmp_path):
    """The control: with the same short lease, a writer that is not paused commits (its heartbeat
    keeps the lease fresh), so the fencing above is caused by the pause alone."""
    cache = FolderCache(tmp_path, "c", lease_s=LEASE_S, heartbeat_s=0.2)
    tx = cache.begin(RunInfo(extra={"marker": 5}))
    time.sleep(3 * LEASE_S)                          # three leases long, heartbeating meanwhile
    tx.stage_slot("text", slot_value(5, "text"), key={}, meta={})
    tx.commit()
    assert cache.snapshot().load_slot("text")["marker"] == 5


@pytest.mark.parametrize("steps", ["start", "checked", "moved", "checked+moved"])
def test_release_paused_at_any_step_never_removes_the_next_owners_lock(tmp_path, steps):
    """Issue 27: a writer stopped (SIGSTOP, every thread) at any step of its release for longer
    than its lease, while writer B breaks the lock and takes the cache, must leave B's lock
    alone: same file, same content, B still holds it. ``checked`` is where the old
    check-then-unlink removed B's lock; ``checked+moved`` stops again once the release has moved
    B's lock aside (the documented window: B's lock is off its name until the put-back)."""
    path = tmp_path / "c.lock"
    env = {**os.environ, "SEEDREUSE_LEASE_S": str(LEASE_S)}
    proc = subprocess.Popen(writer_proc("release", tmp_path, "c", steps), cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    b = None
    try:
        wanted = steps.split("+")
        line = proc.stdout.readline().strip()
        assert line == f"paused {wanted[0]}", (line, proc.stderr.read() if proc.poll() is not None else "")
        # B takes over: past the stopped writer's lease (its lock still at the path: broken), or at
        # once (the stopped writer moved its own lock aside already)
        b = FolderCache(tmp_path, "c", lease_s=LEASE_S, heartbeat_s=0.2).writer_lock("new-owner")
        deadline = time.monotonic() + 60
        while True:
            try:
                b.acquire()
                break
            except CacheBusyError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        ino, content = os.stat(path).st_ino, path.read_bytes()
        assert json.loads(content)["run_id"] == "new-owner" and b.held()
        continue_stopped(proc.pid)
        if len(wanted) > 1:
            line = proc.stdout.readline().strip()
            assert line == f"paused {wanted[1]}", line
            assert not path.exists() and not b.held()     # the window, until the put-back
            continue_stopped(proc.pid)
        out, err = proc.communicate(timeout=120)
        outcome = json.loads(out.strip().splitlines()[-1])
        assert outcome["result"] == "released", (outcome, err[-2000:])
        assert os.stat(path).st_ino == ino and path.read_bytes() == content
        assert b.held()
        b.release()
        assert os.listdir(tmp_path) == []                  # nothing left under any temp name
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()
        if b is not None:
            b.release()
