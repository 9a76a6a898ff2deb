"""The size budget (SEEDREUSE_MAX_BYTES) and safe eviction: LRU order, caches in use skipped,
SIGKILL at every filesystem operation of an eviction, ENOSPC evict-and-retry, check and CLI.

Real caches in tmp_path; readers and writers that must be "in use" are real other processes
where it matters (a reader lease judged across processes), or this process (a lease it holds).
"""
from __future__ import annotations

import errno
import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import torch

from tests import tier_gate
from tests.backend.storehelp import (REPO_ROOT, OpHook, cache_marker, continue_stopped, copy_root, entries,
                                     snapshot_marker, write_version)
from reuse_backend import settings
from reuse_backend.cli import main as cli
from reuse_backend.errors import InvalidRequestError, StorageFullError
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
from reuse_backend.folder import evict
from reuse_backend.folder import readers
from reuse_backend.folder import usage
from reuse_backend.folder.check import check, check_root
from reuse_backend.store.owner import hostname, pid_namespace

CTX = multiprocessing.get_context("fork")


@pytest.fixture(autouse=True)
def _no_budget(monkeypatch):
    monkeypatch.delenv(settings.MAX_BYTES, raising=False)


def _commit_all(root, names, start_mtime=1000):
    """One version per name, then their last use set to start_mtime, +1000, ... (oldest first)."""
    for i, n in enumerate(names):
        write_version(FolderCache(root, n), i + 1)
    for i, n in enumerate(names):
        os.utime(os.path.join(root, n), (start_mtime + 1000 * i,) * 2)


def _size(root, name):
    return usage.tree_size(os.path.join(root, name))


def test_parse_bytes():
    assert settings.parse_bytes("1048576") == 1 << 20
    assert settings.parse_bytes("500M") == 500 << 20
    assert settings.parse_bytes("20G") == 20 << 30
    assert settings.parse_bytes("1.5k") == 1536
    assert settings.parse_bytes("2GiB") == 2 << 30
    for bad in ("", "abc", "0", "-1", "5X", "1e9", True):
        with pytest.raises(InvalidRequestError) as ei:
            settings.parse_bytes(bad)
        assert "500M" in ei.value.fix


def test_sizes_count_allocated_bytes_and_hard_links_once(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "f").write_bytes(os.urandom(100_000))
    os.link(d / "f", d / "g")
    with open(d / "sparse", "wb") as f:            # 64 MiB apparent, a few KiB allocated
        f.truncate(64 << 20)
        f.write(b"x")
    alloc_f = os.lstat(d / "f").st_blocks * 512
    total = usage.tree_size(d)
    assert alloc_f >= 100_000
    assert alloc_f <= total < 2 * alloc_f + (1 << 20)     # the link once, the sparse file's blocks only


def test_lru_order_is_by_last_successful_use(tmp_path):
    root = str(tmp_path)
    _commit_all(root, ["a", "b", "c"])                   # last use: a oldest, then b, then c
    with FolderCache(root, "b").snapshot() as snap:            # a look that serves no hit is no use
        snap.validate_file("slot_text.safetensors")
    with FolderCache(root, "a").snapshot() as snap:            # a hit: a becomes the most recent
        snap.load_slot("text")
    assert usage.last_used(tmp_path / "a") > time.time() - 60
    order = [e.name for e in evict.survey(root)]
    assert order == ["b", "c", "a"]
    budget = usage.root_size(root) - _size(root, "b") + 1
    rep = evict.enforce(root, budget)
    assert rep.evicted == ["b"] and not rep.over_budget
    assert usage.root_size(root) <= budget
    assert entries(root) == ["a", "c"]
    assert cache_marker(FolderCache(root, "a")) == 1 and cache_marker(FolderCache(root, "c")) == 3
    assert check_root(root, max_bytes=budget) == []


def test_budget_holds_after_every_commit(tmp_path, monkeypatch):
    root = str(tmp_path)
    write_version(FolderCache(root, "probe"), 0)
    one = usage.root_size(root)
    FolderCache(root, "probe").clear()
    budget = int(2.5 * one)
    monkeypatch.setenv(settings.MAX_BYTES, str(budget))
    names = [f"c{i}" for i in range(6)]
    for i, n in enumerate(names):
        write_version(FolderCache(root, n), i + 1)
        assert usage.root_size(root) <= budget, f"after commit {i}"
        assert cache_marker(FolderCache(root, n)) == i + 1     # the committing cache is never evicted
        time.sleep(0.01)                                 # distinct commit times (LRU by mtime)
    kept = entries(root)
    assert kept == names[-len(kept):] and 1 <= len(kept) <= 2   # the oldest went first
    assert check_root(root) == [] and all(check(root, n) == [] for n in kept)


def test_a_budget_failure_never_fails_the_commit(tmp_path, monkeypatch, caplog):
    root = str(tmp_path)
    monkeypatch.setenv(settings.MAX_BYTES, "nonsense")
    with caplog.at_level(logging.WARNING, logger="seedreuse"):
        write_version(FolderCache(root, "a"), 1)
    assert cache_marker(FolderCache(root, "a")) == 1 and "budget enforcement" in caplog.text
    monkeypatch.setenv(settings.MAX_BYTES, "1")

    def broken(*a, **k):
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(evict, "enforce", broken)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="seedreuse"):
        write_version(FolderCache(root, "a"), 2)
    assert cache_marker(FolderCache(root, "a")) == 2 and "injected" in caplog.text


def _hold_child(root, name, conn):
    lock = FolderCache(root, name).writer_lock("holder")
    lock.heartbeat_s = 0.2
    lock.acquire()
    conn.send("held")
    conn.recv()                                   # until killed


def test_a_cache_with_a_live_writer_is_skipped(tmp_path):
    root = str(tmp_path)
    _commit_all(root, ["a", "b"])
    conn, child = CTX.Pipe()
    hold = CTX.Process(target=_hold_child, args=(root, "a", child))
    hold.start()
    try:
        assert conn.poll(60) and conn.recv() == "held"
        dry = evict.enforce(root, 1, dry_run=True)
        assert [(e.name, e.action) for e in dry.caches] == [("a", "skipped"), ("b", "would_evict")]
        rep = evict.enforce(root, 1)
        assert [(e.name, e.action) for e in rep.caches] == [("a", "skipped"), ("b", "evicted")]
        assert "being written by run holder" in rep.caches[0].why and rep.over_budget
        assert cache_marker(FolderCache(root, "a")) == 1
    finally:
        hold.kill()
        hold.join(60)
    rep = evict.enforce(root, 1)                  # the holder died: its lock is stale, a goes
    assert rep.evicted == ["a"] and entries(root) == []


def _reader_child(root, name, conn):
    snap = FolderCache(root, name).snapshot()
    snap.load_slot("text")
    conn.send("open")
    conn.recv()
    snap.close()
    conn.send("closed")
    conn.recv()          # stays alive (its heartbeat thread removes the unused lease) until told


class _Reader:
    """A reader in another process (forked: no interpreter start) holding a snapshot."""

    def __init__(self, root, name):
        self.conn, child = CTX.Pipe()
        self.p = CTX.Process(target=_reader_child, args=(root, name, child))
        self.p.start()
        assert self.conn.poll(60) and self.conn.recv() == "open"

    def close(self):
        self.conn.send("close")
        assert self.conn.poll(60) and self.conn.recv() == "closed"

    def kill(self):
        self.p.kill()
        self.p.join(60)


def _reader(root, name):
    return _Reader(root, name)


def test_a_cache_a_reader_holds_is_skipped_and_a_crashed_reader_does_not_pin_it(tmp_path):
    root = str(tmp_path)
    _commit_all(root, ["a", "b"])
    r = _reader(root, "a")
    try:
        assert [x["cache"] for x in readers.live_readers(root, "a")] == ["a"]
        rep = evict.enforce(root, 1)
        assert [(e.name, e.action) for e in rep.caches] == [("b", "evicted"), ("a", "skipped")]
        assert "read by 1 reader(s)" in rep.caches[1].why
        assert cache_marker(FolderCache(root, "a")) == 1
        r.close()
        # the closed snapshot's lease lingers (readers.LINGER_S) in case the reader opens the
        # cache again: another process's eviction still keeps the cache meanwhile...
        if readers.live_readers(root, "a"):
            rep = evict.enforce(root, 1)
            assert [(e.name, e.action) for e in rep.caches] == [("a", "skipped")]
        # ...and then the reader's heartbeat thread removes it (bounded wait)
        deadline = time.monotonic() + readers.LINGER_S + 10
        while os.listdir(tmp_path / ".readers") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.listdir(tmp_path / ".readers") == []
    finally:
        r.kill()
    r = _reader(root, "a")
    r.kill()                                                  # a crashed reader leaves its lease
    lease = readers.leases(root, "a")
    assert len(lease) == 1 and "is gone" in lease[0]["stale"]
    assert [p.code for p in check(root, "a")] == ["stale_reader_lease"]
    rep = evict.enforce(root, 1)
    assert rep.evicted == ["a"] and entries(root) == [] and check_root(root) == []


def test_a_reader_on_another_host_is_live_until_its_lease_runs_out(tmp_path):
    root = str(tmp_path)
    _commit_all(root, ["a"])
    d = tmp_path / ".readers"
    d.mkdir()
    lease = d / f"a.{uuid.uuid4().hex}"
    lease.write_text(json.dumps({"host": "other-host", "pid": 1, "pid_start": 1, "pid_ns": "x",
                                 "run_id": "r", "cache": "a", "started_at": time.time(), "lease_s": 30}))
    assert evict.enforce(root, 1).caches[0].action == "skipped"
    os.utime(lease, (time.time() - 32,) * 2)         # heartbeat older than lease + 1 s
    assert "heartbeat" in readers.leases(root, "a")[0]["stale"]
    assert evict.enforce(root, 1).evicted == ["a"] and entries(root) == []


def test_a_reader_registering_during_the_eviction_puts_the_cache_back(tmp_path):
    """The second look: a lease that appears after the rename out keeps the cache."""
    root = str(tmp_path)
    _commit_all(root, ["a"])
    cache = FolderCache(root, "a")
    got = {}

    def register(op, path):      # just after the rename out (the fsync of .evicting)
        if op == "fsync_dir" and os.path.basename(path) == ".evicting" and "lease" not in got:
            got["lease"] = readers.ReaderLease.create(root, "a", lease_s=120, heartbeat_s=10)

    with OpHook(1, register, persistent=True):
        ok, why = evict.evict_cache(root, "a", lease_s=120)
    assert not ok and "read by 1 reader" in why and got["lease"] is not None
    got["lease"].release()
    assert entries(root) == ["a"] and cache_marker(cache) == 1 and check(root, "a") == []
    assert check_root(root) == []


def test_a_lease_whose_close_fails_is_not_kept(tmp_path, monkeypatch):
    """close() after writing a lease can report the write's failure on a network filesystem:
    the half-known lease file is removed and the reader reads unregistered (None), no error."""
    root = str(tmp_path)
    _commit_all(root, ["a"])
    real_close = os.close

    def failing_close(fd):
        target = os.readlink(f"/proc/self/fd/{fd}")
        real_close(fd)
        if os.path.basename(os.path.dirname(target)) == readers.READERS_DIR:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "close", failing_close)
    lease = readers.ReaderLease.create(root, "a", lease_s=120, heartbeat_s=10)
    monkeypatch.setattr(os, "close", real_close)
    assert lease is None
    assert os.listdir(readers.readers_dir(root)) == []
    assert cache_marker(FolderCache(root, "a")) == 1


def test_a_new_cache_of_the_same_name_right_after_the_rename(tmp_path):
    root = str(tmp_path)
    _commit_all(root, ["a"])
    done = []

    def recreate(op, path):      # the old version is out of the namespace, not yet deleted
        if op == "rmtree" and ".evicting" in path and not done:
            done.append("started")           # the new writer's own recovery reaches here too
            done.append(write_version(FolderCache(root, "a"), 7))

    with OpHook(1, recreate, persistent=True):
        assert evict.evict_cache(root, "a", lease_s=120)[0]
    assert done and cache_marker(FolderCache(root, "a")) == 7 and entries(root) == ["a"]
    assert check(root, "a") == [] and check_root(root) == []


def test_a_reader_that_arrives_while_its_cache_is_out_waits_for_it_to_come_back(tmp_path):
    """A reader registers while the cache is renamed out; the evictor's second look sees it and
    puts the cache back; the reader, which found nothing, waits for the evictor and reads it."""
    import threading
    root = str(tmp_path)
    _commit_all(root, ["a"])
    got = {}

    def read():
        snap = FolderCache(root, "a").snapshot()
        got["marker"] = None if snap is None else snapshot_marker(snap)
        if snap is not None:
            snap.close()

    def arrive(op, path):
        if op == "fsync_dir" and os.path.basename(path) == ".evicting" and "thread" not in got:
            got["thread"] = t = threading.Thread(target=read)
            t.start()
            for _ in range(500):                     # bounded: until its lease exists
                if readers.leases(root, "a"):
                    break
                time.sleep(0.01)

    with OpHook(1, arrive, persistent=True):
        ok, why = evict.evict_cache(root, "a", lease_s=120)
    got["thread"].join(60)
    assert not ok and "read by" in why
    assert got["marker"] == 1 and entries(root) == ["a"] and check_root(root) == []


_UNPRIVILEGED_READER = r"""
import os, sys, torch
import reuse_backend.storage.serialize
from reuse_backend.folder.cache import FolderCache
os.setgroups([]); os.setgid(65534); os.setuid(65534)
with FolderCache(sys.argv[1], "a").snapshot() as snap:
    print("ok", snap.load_slot("text")["marker"], flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to read as another uid")
def test_a_reader_without_write_permission_reads_and_the_commit_time_stays_the_last_use(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    _commit_all(str(root), ["a"])
    for p in [tmp_path, *tmp_path.parents]:          # let uid 65534 reach it (pytest's dirs are 0o700)
        if str(p).startswith("/tmp/pytest-of-"):
            os.chmod(p, os.stat(p).st_mode | 0o055)
    out = subprocess.run([sys.executable, "-c", _UNPRIVILEGED_READER, str(root)], capture_output=True,
                         text=True, timeout=120, cwd="/", env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert out.returncode == 0 and out.stdout.split() == ["ok", "1"], out.stderr[-2000:]
    assert usage.last_used(root / "a") == 1000       # could not touch it: the commit-time record stands
    assert entries(str(root)) == ["a"]               # could not register either, and read anyway


# ------------------------------------------------------------------ SIGKILL at every operation
def _kill_self(op, path):
    os.kill(os.getpid(), signal.SIGKILL)


def _evict_proc(root, k, q=None):
    with OpHook(k, _kill_self) as hook:
        rep = evict.enforce(root, usage.root_size(root) - _size(root, "a") + 1)
    if q is not None:
        q.put((hook.count, rep.evicted, hook.ops))


def _recover_proc(root, how):
    if how == "recover":
        FolderCache(root, "a").recover()
    elif how == "gc":
        evict.enforce(root, None)
    else:
        FolderCache(root, "a").begin().discard()


def _run(target, *args) -> int:
    p = CTX.Process(target=target, args=args)
    p.start()
    p.join(120)
    if p.exitcode is None:
        p.kill()
        p.join()
    return p.exitcode


@pytest.mark.exhaustive
def test_sigkill_at_every_fs_operation_of_an_eviction(tmp_path):
    import shutil
    template = tmp_path / "template"
    template.mkdir()
    _commit_all(str(template), ["a", "b"])                 # a is the least recently used
    dry = tmp_path / "dry"
    copy_root(template, dry)
    q = CTX.Queue()
    assert _run(_evict_proc, str(dry), None, q) == 0
    K, evicted, ops = q.get(timeout=10)
    assert evicted == ["a"] and K >= 8, ops
    assert ("rename", "a") in ops and ("rmtree", next(n for o, n in ops if o == "rmtree")) in ops
    outcomes = []
    for k in range(1, K + 2):
        root = tmp_path / f"k{k}"
        copy_root(template, root)
        code = _run(_evict_proc, str(root), k)
        assert code == (-signal.SIGKILL if k <= K else 0), f"point {k} ({ops[k - 1] if k <= K else 'end'})"
        # what any reader sees right after the crash, before recovery: all of a, or no a
        m = cache_marker(FolderCache(root, "a"))
        assert m in (1, None), f"point {k}"
        how = ("recover", "gc", "begin+discard")[k % 3]
        assert _run(_recover_proc, str(root), how) == 0, f"point {k}"
        m2 = cache_marker(FolderCache(root, "a"))
        assert m2 == m, f"point {k}: recovery changed the outcome"
        assert cache_marker(FolderCache(root, "b")) == 2, f"point {k}: b was touched"
        assert entries(root) == (["a", "b"] if m == 1 else ["b"]), f"point {k}: {entries(root)}"
        assert check(root, "a") == [] and check(root, "b") == [] and check_root(root) == [], f"point {k}"
        outcomes.append("intact" if m == 1 else "gone")
        shutil.rmtree(root)
    first_gone = outcomes.index("gone")
    assert outcomes == ["intact"] * first_gone + ["gone"] * (len(outcomes) - first_gone)
    assert ops[first_gone - 1] == ("rename", "a"), ops      # gone exactly from the rename out
    print(f"\neviction crash points: {K} of {K} passed (+1 uninterrupted); intact at "
          f"{first_gone}, gone at {K + 1 - first_gone}")


# ------------------------------------------------------------------ ENOSPC: evict and retry once
def _big_version(cache, marker, nbytes):
    tx = cache.begin(RunInfo(run_id=f"big-{marker}"))
    try:
        tx.stage_slot("x", torch.full((nbytes // 4,), float(marker)), key={"m": marker})
        return tx.commit()
    except BaseException:
        tx.discard()
        raise


def _big_marker(cache):
    with cache.snapshot() as s:
        v = s.load_slot("x")
        assert bool((v == v[0]).all())
        return int(v[0])


@pytest.fixture
def tmpfs(tmp_path):
    d = tmp_path / "fs"
    d.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(d)],
                                           capture_output=True).returncode != 0:
        tier_gate.require(                      # CI runs as root: there it fails
            "the full-disk test", "needs root to mount a small tmpfs (a full disk cannot be made otherwise)")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def test_enospc_evicts_least_recently_used_and_retries_the_write(tmpfs, monkeypatch):
    root = str(tmpfs)
    monkeypatch.setenv(settings.MAX_BYTES, "1G")          # far above the disk: ENOSPC comes first
    five = 5 << 20
    for i, n in enumerate(["a", "b", "c"]):               # 15 MiB of 20
        _big_version(FolderCache(root, n), i + 1, five)
        os.utime(tmpfs / n, (1000 * (i + 1),) * 2)
    # d needs 6 MiB: its slot write hits ENOSPC, a (least recently used) goes, the write is retried
    _big_version(FolderCache(root, "d"), 4, 6 << 20)
    assert entries(root) == ["b", "c", "d"] and _big_marker(FolderCache(root, "d")) == 4
    assert [_big_marker(FolderCache(root, n)) for n in ("b", "c")] == [2, 3]
    # nothing evictable: b and c are being read, d is the cache being written
    snaps = [FolderCache(root, n).snapshot() for n in ("b", "c")]
    try:
        with pytest.raises(StorageFullError) as ei:
            _big_version(FolderCache(root, "d"), 5, 12 << 20)
    finally:
        for s in snaps:
            s.close()
    e = ei.value
    assert root in e.message and "the root holds" in str(e.actual) and "budget 1073741824" in str(e.actual)
    assert "SEEDREUSE_MAX_BYTES" in e.fix and e.details["budget"] == 1 << 30
    assert entries(root) == ["b", "c", "d"] and _big_marker(FolderCache(root, "d")) == 4
    assert check_root(root) == [] and all(check(root, n) == [] for n in ("b", "c", "d"))


def test_enospc_without_a_budget_evicts_nothing_and_says_how_to_set_one(tmp_path):
    root = str(tmp_path)
    _commit_all(root, ["a"])

    def full(op, path):
        if op == "write" and "b.tmp" in path:
            raise OSError(errno.ENOSPC, "No space left on device", path)

    with OpHook(1, full, persistent=True), pytest.raises(StorageFullError) as ei:
        write_version(FolderCache(root, "b"), 2)
    assert "no budget" in str(ei.value.actual) and "set SEEDREUSE_MAX_BYTES" in ei.value.fix
    assert cache_marker(FolderCache(root, "a")) == 1


def test_fake_enospc_once_is_retried_after_an_eviction(tmp_path, monkeypatch):
    """The same path through the fsops hook (any machine): one ENOSPC, a goes, the write is retried."""
    root = str(tmp_path)
    _commit_all(root, ["a"])
    monkeypatch.setenv(settings.MAX_BYTES, "1G")
    monkeypatch.setattr(usage, "disk_free", lambda r: (0, 1) if os.path.isdir(os.path.join(r, "a")) else (1 << 30, 1 << 31))
    fired = []

    def full_once(op, path):
        if op == "write" and "b.tmp" in path and not fired:
            fired.append(path)
            raise OSError(errno.ENOSPC, "No space left on device", path)

    with OpHook(1, full_once, persistent=True):
        write_version(FolderCache(root, "b"), 2)
    assert fired and entries(root) == ["b"] and cache_marker(FolderCache(root, "b")) == 2


# ------------------------------------------------------------------ check and CLI
def test_check_reports_leftovers_orphans_stale_leases_and_the_budget(tmp_path):
    root = str(tmp_path)
    _commit_all(root, ["a"])
    left = tmp_path / ".evicting" / f"a.{uuid.uuid4().hex}"
    left.mkdir(parents=True)
    (left / "slot_text.safetensors").write_bytes(b"x" * 5000)
    (tmp_path / "junk.bin").write_bytes(b"j")
    (tmp_path / ".users").mkdir()                         # another module's hidden folder: not ours to judge
    d = tmp_path / ".readers"
    d.mkdir()
    (d / "a.dead").write_text(json.dumps({"host": hostname(), "pid": 2 ** 22 + 7, "pid_ns": pid_namespace(),
                                          "run_id": "dead", "lease_s": 120}))
    codes = sorted(p.code for p in check(root, "a"))
    assert codes == ["eviction_leftover", "stale_reader_lease"]
    found = check_root(root, max_bytes=1)
    assert sorted(p.code for p in found) == ["eviction_leftover", "orphaned_entry", "root_over_budget",
                                             "stale_reader_lease"]
    assert [p.path for p in found if p.code == "orphaned_entry"] == [str(tmp_path / "junk.bin")]
    fixed = check_root(root, repair=True)
    assert sorted(p.code for p in fixed if p.repaired) == ["eviction_leftover", "stale_reader_lease"]
    assert [p.code for p in fixed if not p.repaired] == ["orphaned_entry"]
    assert sorted(os.listdir(root)) == [".users", "a", "junk.bin"] and check(root, "a") == []


def test_cli_list_gc_dry_run_and_gc(tmp_path, capsys):
    root = str(tmp_path)
    _commit_all(root, ["a", "b", "c"])
    assert cli(["--root", root, "list"]) == 0
    out = capsys.readouterr().out
    assert "size " in out and "last used 1970-01-01" in out
    budget = usage.root_size(root) - _size(root, "a") + 1
    assert cli(["gc", "--root", root, "--max-bytes", str(budget), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would evict    a" in out and "least recently used" in out and "dry run" in out
    assert entries(root) == ["a", "b", "c"]               # nothing changed
    assert cli(["--root", root, "gc", "--max-bytes", str(budget), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["evicted"] == ["a"] and rep["bytes_after"] <= budget and entries(root) == ["b", "c"]
    with FolderCache(root, "b").snapshot():                     # in use: gc cannot reach the budget
        assert cli(["--root", root, "gc", "--max-bytes", "1"]) == 1
    assert "kept (in use)" in capsys.readouterr().out and entries(root) == ["b"]
    assert cli(["--root", root, "gc", "--max-bytes", "lots"]) == 2
    assert cli(["--root", root, "check"]) == 0


def test_back_to_back_snapshots_register_once_and_the_lease_goes_after_its_linger(tmp_path):
    """One lease per process and cache: a second snapshot (open together or right after) reuses
    it (one utime instead of creating and removing a file in the shared folder); an unused lease
    does not keep this process's own eviction waiting; it is removed LINGER_S after its last
    snapshot; a lease removed meanwhile (judged stale elsewhere) is replaced by a new one."""
    root = str(tmp_path)
    _commit_all(root, ["a", "b"])
    d = tmp_path / ".readers"
    s1 = FolderCache(root, "a").snapshot()
    first = os.listdir(d)
    s2 = FolderCache(root, "a").snapshot()
    assert os.listdir(d) == first and len(first) == 1              # open together: one lease
    s1.close()
    assert os.listdir(d) == first and readers.live_readers(root, "a")   # s2 still holds it
    s2.close()
    assert os.listdir(d) == first                                   # lingering, unused
    assert readers.live_readers(root, "a") == []                    # not a reader for this process
    with FolderCache(root, "a").snapshot():
        assert os.listdir(d) == first                               # right after: reused
    os.unlink(d / first[0])                                         # removed by someone else
    with FolderCache(root, "a").snapshot():
        again = os.listdir(d)
        assert len(again) == 1 and again != first                   # a new lease, registered
    deadline = time.monotonic() + readers.LINGER_S + 10
    while os.listdir(d) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.listdir(d) == []                                      # gone after the linger
    with FolderCache(root, "b").snapshot():
        pass
    rep = evict.enforce(root, 1)                                    # b's unused lease: no wait
    assert sorted(rep.evicted) == ["a", "b"] and entries(root) == []


def test_a_reader_of_a_cache_removed_while_it_opens_it_says_so(tmp_path):
    """Issue 27: a reader whose cache was removed under it (here an eviction, as clear and the
    delete route do it, stopped after its second look) said "no successful run in cache 'd' yet";
    it says the cache was removed while being read, for require and auto alike."""
    from reuse_backend.errors import NoCommittedCacheError
    from reuse_backend.keys.key import ReuseKey
    from reuse_backend.keys.slots import decide_slot
    write_version(FolderCache(tmp_path, "d"), 1)
    proc = subprocess.Popen([sys.executable, "-m", "tests.backend.writer_proc", "evict-pause", str(tmp_path), "d"],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == "paused evict", (line, proc.stderr.read() if proc.poll() is not None else "")
        cache = FolderCache(tmp_path, "d")
        assert cache.snapshot() is None          # the eviction holds on (bounded wait), never puts it back
        assert cache.gone and "removed" in cache.gone
        key = ReuseKey.build("slot", {"text": "a"})
        with pytest.raises(NoCommittedCacheError, match="cache 'd' was removed while being read") as ei:
            decide_slot(None, cache_name="d", slot="text", key=key, mode="require", gone=cache.gone)
        assert "auto" in ei.value.fix
        d = decide_slot(None, cache_name="d", slot="text", key=key, mode="auto", gone=cache.gone)
        assert d.action == "encode" and "removed while being read" in d.reason
        continue_stopped(proc.pid)
        out, err = proc.communicate(timeout=120)
        assert json.loads(out.strip().splitlines()[-1])["evicted"] is True, err[-2000:]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()
    cache = FolderCache(tmp_path, "d")
    assert cache.snapshot() is None and cache.gone is None    # plainly empty now: nothing was being removed


def test_delete_answers_at_once_while_a_reader_holds_a_snapshot(tmp_path):
    """Issue 27: the delete route retried for 5 s while a reader held the cache, although only a
    lingering lease (snapshot closed, lease kept LINGER_S) can go away that soon. Here the reader
    closes right after the first refusal (at that attempt's lock release): the delete must
    already have answered with that refusal, not retried into the closed reader's linger."""
    from reuse_backend.storage import fsops
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    snap = cache.snapshot()
    closed = []

    def close_after_the_first_attempt(op, path):
        if op == "rename" and path == str(tmp_path / "a.lock") and not closed:
            closed.append(op)
            snap.close()

    fsops.set_hook(close_after_the_first_attempt)
    try:
        ok, why = evict.evict_cache_when_readers_leave(tmp_path, "a", lease_s=120)
    finally:
        fsops.clear_hook()
        snap.close()
    assert closed and not ok and "read by 1 reader(s)" in why and not why.lingering, why
    assert cache_marker(cache) == 1


def test_a_lingering_lease_of_another_process_is_told_from_an_open_reader(tmp_path):
    """Another process's lease says whether a snapshot uses it now (open: refused at once) or it
    only lingers after its last close (the delete waits for it)."""
    write_version(FolderCache(tmp_path, "a"), 1)
    proc = subprocess.Popen([sys.executable, "-m", "tests.backend.writer_proc", "read-pause", str(tmp_path), "a"],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "paused open"
        live = readers.live_readers(tmp_path, "a")
        assert [x["idle"] for x in live] == [False]
        ok, why = evict.evict_cache(tmp_path, "a", lease_s=120)
        assert not ok and not why.lingering and "closing" not in why
        continue_stopped(proc.pid)
        assert proc.stdout.readline().strip() == "paused closed"
        live = readers.live_readers(tmp_path, "a")
        assert [x["idle"] for x in live] == [True]            # still live: evictions keep the cache
        ok, why = evict.evict_cache(tmp_path, "a", lease_s=120)
        assert not ok and why.lingering and "closing" in why
    finally:
        if proc.poll() is None:
            continue_stopped(proc.pid)
            proc.wait(timeout=60)
    assert cache_marker(FolderCache(tmp_path, "a")) == 1
