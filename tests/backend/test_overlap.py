"""Overlapping writers (issue 27): runs stage side by side under their own leases and take the
writer lock only to commit (folder/run_lease.py, folder/commit.py, store/rebase.py, store/claim.py).

Real subprocesses (tests/backend/writer_proc.py): two runs committing back to back, a kill of one
run inside its commit while another one commits, a stall of a single-flight leader; and the take
list of a segment cache merged when two takes commit from the same base.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess

import torch

from reuse_backend.media import segment_takes
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
from reuse_backend.store import claim as single_flight
from reuse_backend.store import take_index
from reuse_backend.folder.check import check
from tests.backend.storehelp import REPO_ROOT, cache_marker, continue_stopped, entries, write_version, writer_proc

LEASE_S = 1.0


def _start(*args, env=None):
    return subprocess.Popen(writer_proc(*args), cwd=REPO_ROOT, env=env or os.environ.copy(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _outcome(proc) -> dict:
    out, err = proc.communicate(timeout=180)
    lines = [ln for ln in out.strip().splitlines() if ln.startswith("{")]
    assert lines, (out, err[-2000:])
    return json.loads(lines[-1])


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()


def test_two_runs_commit_back_to_back(tmp_path):
    """Both succeed; the second one re-read the current version under the lock (its base had
    changed: it says so), and it is the current version, whole."""
    write_version(FolderCache(tmp_path, "a"), 1)
    go = tmp_path / "go"
    procs = [_start("overlap", tmp_path, "a", m, go) for m in (2, 3)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "staged", p.stderr.read() if p.poll() is not None else ""
        go.write_text("")
        outs = [_outcome(p) for p in procs]
    finally:
        _stop(procs)
    assert [o["result"] for o in outs] == ["committed", "committed"], outs
    first = [o for o in outs if o["rebased"] is None]
    later = [o for o in outs if o["rebased"] is not None]
    assert len(first) == 1 and len(later) == 1, outs
    assert "base changed" in later[0]["rebased"] and first[0]["version"] in later[0]["rebased"]
    assert cache_marker(FolderCache(tmp_path, "a")) == later[0]["marker"]     # every file of that run
    with FolderCache(tmp_path, "a").snapshot() as snap:
        assert snap.version == later[0]["version"]
    os.unlink(go)
    assert check(tmp_path, "a") == [] and entries(tmp_path) == ["a"]


def test_a_kill_of_one_run_inside_its_commit_while_the_other_commits(tmp_path):
    """Run A stops inside its commit (writer lock held, the previous version moved to .old) and
    is killed; run B, staged meanwhile, commits: it breaks the dead lock, recovery puts the
    previous version back and removes A's staging, and B's version is current."""
    write_version(FolderCache(tmp_path, "a"), 1)
    go = tmp_path / "go"
    a = _start("pause", tmp_path, "a", "commit-publish")
    b = None
    try:
        assert a.stdout.readline().strip() == "paused commit-publish", a.stderr.read() if a.poll() is not None else ""
        assert os.path.isdir(tmp_path / "a.old") and not os.path.exists(tmp_path / "a")
        b = _start("overlap", tmp_path, "a", 3, go)
        assert b.stdout.readline().strip() == "staged", b.stderr.read() if b.poll() is not None else ""
        go.write_text("")                      # B's commit waits for A's lock ...
        os.kill(a.pid, signal.SIGKILL)         # ... until A dies inside its commit
        a.wait()
        out = _outcome(b)
    finally:
        _stop([a] + ([b] if b else []))
    assert out["result"] == "committed", out
    assert any("broke stale writer lock" in r for r in out["recovered"]), out
    assert any("restored previous version" in r for r in out["recovered"]), out
    assert cache_marker(FolderCache(tmp_path, "a")) == 3
    os.unlink(go)
    assert check(tmp_path, "a") == [] and entries(tmp_path) == ["a"]


def test_a_stalled_single_flight_leader_is_waited_for_no_longer_than_its_lease(tmp_path):
    """The leader takes the claim of a slot key and stops (SIGSTOP: its heartbeat too). A waiter
    waits, then takes the claim once the leader's lease has expired (it then encodes itself).
    The leader, continued, finds it lost the claim, and its release leaves the waiter's alone."""
    env = {**os.environ, "SEEDREUSE_LEASE_S": str(LEASE_S)}
    leader = _start("claim", tmp_path, "a", "text", "stall", env=env)
    try:
        assert leader.stdout.readline().strip() == "claimed", leader.stderr.read()
        assert leader.stdout.readline().strip() == "paused claim"
        cache = FolderCache(tmp_path, "a", lease_s=LEASE_S, heartbeat_s=0.2)
        got = single_flight.claim(cache, "text", "d1", "waiter", wait=120)
        assert got.lease is not None and got.waited_for["run_id"] == "leader"
        continue_stopped(leader.pid)
        out = _outcome(leader)
        assert out == {"held_after_stall": False}
        assert got.lease.held()                       # the leader's release left it alone
        got.release()
    finally:
        _stop([leader])
    FolderCache(tmp_path, "a").recover()
    assert entries(tmp_path) == []


def test_single_flight_waits_at_most_its_bound_and_takes_over_from_a_dead_leader(tmp_path):
    leader = _start("claim", tmp_path, "a", "text", "hold")
    try:
        assert leader.stdout.readline().strip() == "claimed", leader.stderr.read()
        cache = FolderCache(tmp_path, "a")
        got = single_flight.claim(cache, "text", "d1", "waiter", wait=0.3)
        assert got.lease is None and got.waited_for["run_id"] == "leader"    # gave up: encodes
        other = single_flight.claim(cache, "neg", "d1", "waiter", wait=0.3)  # another key: no wait
        assert other.lease is not None and other.waited_for is None
        other.release()
        leader.kill()
        leader.wait()
        got = single_flight.claim(cache, "text", "d1", "waiter", wait=60)   # a dead holder: broken at once
        assert got.lease is not None and got.waited_for is None and "run leader" in got.lease.broke[0]
        got.release()
    finally:
        _stop([leader])
    assert entries(tmp_path) == []


# ------------------------------------------------------------------ take lists merged

F, M = 5, 1


def _stage_take(tx, video: str, keep: int) -> None:
    takes = segment_takes.read_takes(tx.base)
    number = segment_takes.next_number(takes)
    tx.keep_takes = keep
    with open(tx.stage_path(take_index.RESULT), "wb") as f:
        f.write(video.encode())
    tx.add_file(take_index.RESULT)
    tx.stage_boundary(0, {"motion_frames": torch.zeros(1)}, {"index": 0})
    segment_takes.stage_tail_boundary(tx, {"motion_frames": torch.zeros(1)})
    kept = segment_takes.carry_history(tx, takes, keep - 1)
    body = {"spec": {"S": 2, "F": F, "M": M}, "seed": 1, "take": number, "video": video}
    tx.set_section("segments", body)
    segment_takes.publish_index(tx, segment_takes.Take(number, take_index.RESULT,
                                                       segment_takes.new_take_boundaries(2, True), body), kept)


def _takes(cache) -> list:
    with cache.snapshot() as snap:
        out = []
        for t in segment_takes.read_takes(snap):
            with snap.open_file(t.result) as f:
                out.append((t.number, f.read().decode(), t.section.get("video"), t.section.get("take")))
        return out


def test_take_lists_of_overlapping_takes_are_merged(tmp_path):
    """Two takes begun on the same base both become takes: the later commit renumbers its take
    above the one committed meanwhile and keeps it (never a stale copy of the list)."""
    cache = FolderCache(tmp_path, "c")
    tx = cache.begin(RunInfo(run_id="t1"))
    _stage_take(tx, "one", keep=3)
    tx.commit()
    a, b = cache.begin(RunInfo(run_id="a")), cache.begin(RunInfo(run_id="b"))
    _stage_take(a, "a", keep=3)
    _stage_take(b, "b", keep=3)
    a.commit()
    b.commit()
    assert "take list merged" in b.rebased and "this run's take is 3 (planned as 2)" in b.rebased
    assert _takes(cache) == [(3, "b", "b", 3), (2, "a", "a", 2), (1, "one", "one", 1)]
    assert check(tmp_path, "c") == []
    # with a limit of 2 the oldest take goes; three overlapping takes all land in turn
    runs = [cache.begin(RunInfo(run_id=f"r{i}")) for i in range(3)]
    for i, t in enumerate(runs):
        _stage_take(t, f"r{i}", keep=2)
    for t in runs:
        t.commit()
    assert [x[:2] for x in _takes(cache)] == [(6, "r2"), (5, "r1")]
    assert check(tmp_path, "c") == [] and entries(tmp_path) == ["c"]


def test_eviction_keeps_a_cache_a_live_run_stages_into(tmp_path):
    """A run stages without the writer lock: its lease keeps evictions away, as the lock did."""
    from reuse_backend.folder import evict
    write_version(FolderCache(tmp_path, "a"), 1)
    tx = FolderCache(tmp_path, "a").begin(RunInfo(run_id="stager"))
    ok, why = evict.evict_cache(tmp_path, "a", lease_s=120.0)
    assert not ok and "being written by run stager" in why
    assert "being written by run stager" in evict.in_use(tmp_path, "a", 120.0)
    tx.discard()
    ok, _ = evict.evict_cache(tmp_path, "a", lease_s=120.0)
    assert ok and entries(tmp_path) == []
