"""CONCURRENCY: racing writers (one lock holder at a time) and readers during many commits."""
import json
import multiprocessing
import os
import queue
import socket
import subprocess
import sys
import time
import traceback

from tests.backend.storehelp import OpHook, cache_marker, entries, snapshot_marker, write_version

from reuse_backend.errors import CacheBusyError
from reuse_backend.store.lock import pid_namespace
from reuse_backend.store import Cache, RunInfo

CTX = multiprocessing.get_context("fork")
N_WRITERS, ROUNDS = 8, 3


def _racer(root, idx, barrier, inside, peak, attempts, guard, results):
    cache = Cache(root, "a")
    for rnd in range(ROUNDS):
        barrier.wait(timeout=60)
        run_id = f"w{idx}-r{rnd}"
        try:
            tx = cache.begin(RunInfo(run_id=run_id, extra={"marker": 100 * rnd + idx}))
        except CacheBusyError as e:
            results.put(("busy", rnd, idx, e.details.get("owner", {}).get("run_id"), str(e)))
            with guard:
                attempts.value += 1
        else:
            with guard:
                inside.value += 1
                attempts.value += 1
                peak.value = max(peak.value, inside.value)
            deadline = time.monotonic() + 30          # hold the lock until all others tried
            while attempts.value < N_WRITERS * (rnd + 1) and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.05)
            with guard:
                inside.value -= 1
            tx.set_section("who", {"run": run_id})
            tx.commit()
            results.put(("won", rnd, idx, run_id, ""))
        barrier.wait(timeout=60)                      # the round ends when the winner released


def test_racing_writers_one_lock_holder(tmp_path):
    barrier = CTX.Barrier(N_WRITERS)
    inside, peak, attempts = CTX.Value("i", 0), CTX.Value("i", 0), CTX.Value("i", 0)
    guard, results = CTX.Lock(), CTX.Queue()
    procs = [CTX.Process(target=_racer,
                         args=(tmp_path, i, barrier, inside, peak, attempts, guard, results))
             for i in range(N_WRITERS)]
    for p in procs:
        p.start()
    rows = [results.get(timeout=60) for _ in range(N_WRITERS * ROUNDS)]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert peak.value == 1
    for rnd in range(ROUNDS):
        won = [r for r in rows if r[1] == rnd and r[0] == "won"]
        busy = [r for r in rows if r[1] == rnd and r[0] == "busy"]
        assert len(won) == 1 and len(busy) == N_WRITERS - 1
        winner = won[0][3]
        for _, _, _, owner, msg in busy:                # every loser is told who holds it
            assert owner == winner and f"run {winner} on host" in msg and "pid" in msg
    with Cache(tmp_path, "a").snapshot() as snap:
        last = next(r for r in rows if r[0] == "won" and r[1] == ROUNDS - 1)
        assert snap.manifest["sections"]["who"]["run"] == last[3]
    assert entries(tmp_path) == ["a"]


def _breaker(root, barrier, results):
    barrier.wait(timeout=60)
    try:
        tx = Cache(root, "a").begin()
    except CacheBusyError as e:
        results.put(("busy", e.details.get("owner", {}).get("run_id")))
        return
    time.sleep(0.3)
    results.put(("won", tx.recovered))
    tx.discard()


def test_racing_breakers_of_a_dead_lock(tmp_path):
    write_version(Cache(tmp_path, "a"), 1)
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    (tmp_path / "a.lock").write_text(json.dumps({
        "host": socket.gethostname(), "pid": p.pid, "pid_start": None, "pid_ns": pid_namespace(),
        "run_id": "dead",
        "started_at": time.time(), "lease_s": 120.0}))
    barrier, results = CTX.Barrier(N_WRITERS), CTX.Queue()
    procs = [CTX.Process(target=_breaker, args=(tmp_path, barrier, results)) for _ in range(N_WRITERS)]
    for q in procs:
        q.start()
    rows = [results.get(timeout=60) for _ in range(N_WRITERS)]
    for q in procs:
        q.join(30)
    won = [r for r in rows if r[0] == "won"]
    assert len(won) == 1                      # one breaker wins the rename; one creator wins
    assert all(r[1] not in (None, "dead") for r in rows if r[0] == "busy")
    assert cache_marker(Cache(tmp_path, "a")) == 1 and entries(tmp_path) == ["a"]


def _widen_commit_window(op, path):
    """Sleep between current -> .old and .tmp -> current so readers hit the window often."""
    if op == "rename" and os.path.basename(os.path.dirname(path)) == "a.tmp":   # staging -> current
        time.sleep(0.02)


def _committer(root, first, count, done):
    cache = Cache(root, "a")
    try:
        with OpHook(1, _widen_commit_window, persistent=True):
            for m in range(first, first + count):
                write_version(cache, m)
    finally:
        done.set()


def _reader(root, done, results):
    cache = Cache(root, "a")
    seen, n, from_old, errors = set(), 0, 0, []
    while not done.is_set() or n < 5:
        try:
            snap = cache.snapshot()
            with snap:
                seen.add(snapshot_marker(snap))      # every file must carry this version's marker
                from_old += snap.source == "old"
            n += 1
        except Exception as e:  # noqa: BLE001 - every failure is reported to the test
            errors.append(f"{type(e).__name__}: {e}\n{traceback.format_exc()[-800:]}")
            if len(errors) > 20:
                break
    results.put((n, sorted(seen), errors, from_old))


def test_readers_never_see_a_mix(tmp_path):
    write_version(Cache(tmp_path, "a"), 1)
    done, results = CTX.Event(), CTX.Queue()
    readers = [CTX.Process(target=_reader, args=(tmp_path, done, results)) for _ in range(2)]
    for r in readers:
        r.start()
    commits = 40
    writer = CTX.Process(target=_committer, args=(tmp_path, 2, commits, done))
    writer.start()
    writer.join(120)
    assert writer.exitcode == 0
    stats = []
    for _ in readers:
        try:
            stats.append(results.get(timeout=60))
        except queue.Empty:
            raise AssertionError("a reader did not finish")
    for r in readers:
        r.join(10)
    total = sum(st[0] for st in stats)
    versions = set().union(*(set(st[1]) for st in stats))
    errors = [e for st in stats for e in st[2]]
    from_old = sum(st[3] for st in stats)
    assert errors == [], errors[:3]
    assert total >= 20 and len(versions) >= 3
    assert cache_marker(Cache(tmp_path, "a")) == commits + 1
    print(f"\nreaders: {total} consistent snapshots of {len(versions)} distinct versions "
          f"during {commits} commits ({from_old} read from .old in the commit window), 0 mixed")
    assert entries(tmp_path) == ["a"] and not os.path.exists(tmp_path / "a.old")
