"""Leases (store/lease.py) as lease files on a folder (folder/lease_files.py): the owner record, the
judge, the take-over of a stale lease, the heartbeat, fencing."""
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
from tests.backend.storehelp import REPO_ROOT, OpHook, cache_marker, entries, write_version, writer_proc

from reuse_backend.storage import fsops
from reuse_backend.store import lease as lk, owner as owners
from reuse_backend.errors import CacheBusyError, TransactionError
from reuse_backend.folder.lease_files import lease_file as LeaseFile
from reuse_backend.folder.cache import FolderCache

HERE = os.path.dirname(os.path.abspath(__file__))


def _fake_lock(path, *, host=None, pid=1, pid_start=None, run_id="other", age=0.0, lease_s=120.0):
    path.write_text(json.dumps({"host": host or socket.gethostname(), "pid": pid,
                                "pid_start": pid_start, "pid_ns": owners.pid_namespace(), "run_id": run_id,
                                "started_at": time.time() - age, "lease_s": lease_s}))
    t = time.time() - age
    os.utime(path, (t, t))


def test_owner_record_and_release(tmp_path):
    path = tmp_path / "c.lock"
    with LeaseFile(path, "r1") as lock:
        owner = json.loads(path.read_text())
        assert set(owner) == {"host", "pid", "pid_start", "pid_ns", "run_id", "role", "started_at",
                              "lease_s"} and owner["role"] == "writer lock"
        assert owner["pid"] == os.getpid() and owner["run_id"] == "r1"
        assert owner["host"] == socket.gethostname()
        assert owner["pid_start"] == owners.pid_start(os.getpid()) is not None
        assert lock.held()
        with pytest.raises(CacheBusyError, match="cache 'c' is being written by run r1 on host"):
            LeaseFile(path, "r2").acquire()
    assert os.listdir(tmp_path) == []


def test_dead_pid_on_this_host_is_broken(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    path = tmp_path / "c.lock"
    _fake_lock(path, pid=p.pid, run_id="dead")
    with LeaseFile(path, "mine") as lock:
        assert "is gone" in lock.broke[0]
        assert json.loads(path.read_text())["run_id"] == "mine"
    assert os.listdir(tmp_path) == []


def test_reused_pid_is_broken(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path = tmp_path / "c.lock"
        time.sleep(0.05)
        _fake_lock(path, pid=p.pid, pid_start=(owners.pid_start(p.pid) or 0) + 1)
        with LeaseFile(path, "mine") as lock:
            assert "reused" in lock.broke[0]
    finally:
        p.kill()
        p.wait()


def test_sigkilled_holder_subprocess(tmp_path):
    cache = FolderCache(tmp_path, "c")
    write_version(cache, 1)
    p = subprocess.Popen(writer_proc("hold", tmp_path, "c", "holder-run"), cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        tx = cache.begin()                                # runs begin without the writer lock ...
        tx.stage_slot("text", {"x": 1}, key={})
        os.environ["SEEDREUSE_COMMIT_WAIT_S"] = "0.2"    # ... and their commit waits for it, bounded
        try:
            with pytest.raises(CacheBusyError) as ei:
                tx.commit()
        finally:
            del os.environ["SEEDREUSE_COMMIT_WAIT_S"]
            tx.discard()
        msg = str(ei.value)
        assert "holder-run" in msg and f"pid {p.pid}" in msg and socket.gethostname() in msg
        assert ei.value.details["owner"]["pid"] == p.pid
        assert ei.value.expected and ei.value.actual and ei.value.fix
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    with cache.begin() as tx:                            # the dead holder's lock is broken
        assert any("holder-run" in r for r in tx.recovered)
    assert cache_marker(cache) == 1 and entries(tmp_path) == ["c"]


def test_dead_pid_in_another_pid_namespace_is_not_judged(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    path = tmp_path / "c.lock"
    _fake_lock(path, pid=p.pid, run_id="container")
    owner = json.loads(path.read_text())
    owner["pid_ns"] = "pid:[1]"                           # same host name, other container
    path.write_text(json.dumps(owner))
    with pytest.raises(CacheBusyError, match="container"):
        LeaseFile(path, "mine").acquire()


def test_fresh_lock_of_other_host_is_not_broken(tmp_path):
    path = tmp_path / "c.lock"
    _fake_lock(path, host="render-07.example", pid=1, run_id="remote", age=100)  # mtime 100s < 120s lease
    with pytest.raises(CacheBusyError, match="run remote on host render-07.example") as ei:
        LeaseFile(path, "mine").acquire()
    assert ei.value.details["owner"]["host"] == "render-07.example"
    assert json.loads(path.read_text())["run_id"] == "remote"


def test_expired_lock_of_other_host_is_broken(tmp_path):
    path = tmp_path / "c.lock"
    _fake_lock(path, host="render-07.example", pid=1, run_id="remote", age=500)
    with LeaseFile(path, "mine") as lock:
        assert "heartbeat" in lock.broke[0]


def test_unreadable_lock(tmp_path):
    path = tmp_path / "c.lock"
    path.write_bytes(b"")
    with pytest.raises(CacheBusyError, match="unknown run") as ei:
        LeaseFile(path, "mine").acquire()
    # issue 27: the message names the file and why it cannot be read; the fix says what to do
    assert f"unreadable writer lock {path}: empty" in ei.value.message, ei.value.message
    assert str(path) in ei.value.fix and "120 s" in ei.value.fix and "SEEDREUSE_LEASE_S" in ei.value.fix
    path.write_text("not json")
    tx = FolderCache(tmp_path, "c").begin()
    tx.stage_slot("text", {"x": 1}, key={})
    os.environ["SEEDREUSE_COMMIT_WAIT_S"] = "0.2"
    try:
        with pytest.raises(CacheBusyError, match="its content is not a SeedReuse lease"):
            tx.commit()
    finally:
        del os.environ["SEEDREUSE_COMMIT_WAIT_S"]
        tx.discard()
    path.write_text("{}")
    os.utime(path, (time.time() - 500, time.time() - 500))
    with LeaseFile(path, "mine"):
        pass


def test_heartbeat_keeps_lock_fresh(tmp_path):
    path = tmp_path / "c.lock"
    a = LeaseFile(path, "A", lease_s=0.6, heartbeat_s=0.1).acquire()
    time.sleep(1.5)
    with pytest.raises(CacheBusyError):
        LeaseFile(path, "B", lease_s=0.6).acquire()
    a.stop_heartbeat()                                  # owner hangs: no more heartbeats
    time.sleep(0.6 + lk.SLACK_S + 0.4)             # past lease + the mtime-resolution slack
    b = LeaseFile(path, "B", lease_s=0.6).acquire()     # lease expired: broken
    assert not a.held() and b.held()
    a.release()                                          # not ours any more: left alone
    assert json.loads(path.read_text())["run_id"] == "B"
    b.release()
    assert not path.exists()


def test_breaker_restores_a_lock_that_turned_fresh(tmp_path):
    path = tmp_path / "c.lock"
    _fake_lock(path, host="render-07.example", run_id="remote", age=500)
    ino = os.stat(path).st_ino

    def owner_beats(op, p):                  # the owner heartbeats right before our rename
        if op == "rename" and p == str(path):
            os.utime(path)

    with OpHook(1, owner_beats, persistent=True), pytest.raises(CacheBusyError, match="remote"):
        LeaseFile(path, "mine").acquire()
    assert os.stat(path).st_ino == ino and json.loads(path.read_text())["run_id"] == "remote"
    assert os.listdir(tmp_path) == ["c.lock"]


def test_abandoned_lock_of_this_process_is_broken(tmp_path):
    path = tmp_path / "c.lock"
    a = LeaseFile(path, "A").acquire()

    def fail(op, p):                         # the release's first step: moving the lock aside
        if op == "rename" and p == str(path):
            raise OSError(errno.EIO, "injected", p)

    with OpHook(1, fail, persistent=True), pytest.raises(OSError):
        a.release()                                   # the lock file stays behind
    assert path.exists()
    with LeaseFile(path, "B") as b:                     # same live pid, but A is not held
        assert "no longer holds run A" in b.broke[0]


def test_fencing_stolen_lock_commit_refuses(tmp_path):
    cache = FolderCache(tmp_path, "c")
    write_version(cache, 1)
    tx = cache.begin()
    tx.stage_boundary(0, torch.zeros(1))
    lease = tx.lease.path                                  # the run's lease (run_lease.py)
    os.unlink(lease)                                      # lease expired, someone broke it ...
    thief = LeaseFile(lease, "thief").acquire()          # ... and took it
    assert not tx.lease.held()
    with pytest.raises(TransactionError, match="lost its run lease"):
        tx.commit()
    assert tx.state == "fenced"
    tx.discard()                                          # must not touch the thief's staging
    assert (tmp_path / "c.tmp").exists() and thief.held()
    assert cache_marker(cache) == 1
    thief.release()
    cache.begin().discard()
    assert entries(tmp_path) == ["c"]


def test_fencing_replaced_staging(tmp_path):
    cache = FolderCache(tmp_path, "c")
    tx = cache.begin()
    os.rename(tmp_path / "c.tmp", tmp_path / "gone")
    os.mkdir(tmp_path / "c.tmp")
    with pytest.raises(TransactionError, match="lost its"):
        tx.stage_boundary(0, torch.zeros(1))
    tx.discard()
    assert not (tmp_path / "c.lock").exists()


def test_filesystem_without_stable_inodes_is_refused_clearly(tmp_path, monkeypatch):
    """sshfs/SFTP hand out a new inode number per lookup: the lock cannot fence, so the cache
    root is refused at acquire with the reason (never a run that later 'loses' its lock)."""
    import os as _os

    from reuse_backend.folder import lease_files as lockmod
    from reuse_backend.errors import UnsupportedFilesystemError

    real = lockmod.read_lease

    def unstable(path):
        owner, st = real(path)
        if st is None:
            return owner, st
        fields = list(st)
        fields[1] += 1000          # st_ino as a per-lookup filesystem would report it
        return owner, _os.stat_result(fields)

    monkeypatch.setattr(lockmod, "read_lease", unstable)
    path = tmp_path / "c.lock"
    with pytest.raises(UnsupportedFilesystemError, match="stable file identities"):
        lockmod.lease_file(path, "run-1", cache_name="c").acquire()
    assert not path.exists()
    monkeypatch.setattr(lockmod, "read_lease", real)
    lk = lockmod.lease_file(path, "run-2", cache_name="c").acquire()   # nothing left behind
    assert lk.held()
    lk.release()


def test_stale_only_past_lease_plus_mtime_slack(tmp_path):
    """MooseFS keeps mtime in whole seconds: a heartbeat can look up to 1 s older than it is,
    so a lock is not judged stale until its age exceeds lease + MTIME_SLACK_S."""
    path = tmp_path / "c.lock"
    _fake_lock(path, host="render-07.example", run_id="remote", age=0, lease_s=10.0)
    st = os.stat(path)
    now = time.time()
    os.utime(path, (now - 10.5, now - 10.5))
    assert lk.stale_reason(json.loads(path.read_text()), os.stat(path).st_mtime, time.time(), 10.0) is None
    os.utime(path, (now - 11.5, now - 11.5))
    assert "heartbeat is" in lk.stale_reason(json.loads(path.read_text()), os.stat(path).st_mtime, time.time(), 10.0)
    assert st.st_size > 0


def test_heartbeat_retries_transient_errors_then_gives_the_lease_up(tmp_path):
    """A network filesystem hiccup (EIO/ESTALE) does not lose the lock at once; a heartbeat
    failing for a whole lease does, once, and held() is False from then on (fencing)."""
    path = tmp_path / "c.lock"
    fails = {"n": 0, "on": True}

    def flaky(op, p):
        if op == "utime" and fails["on"]:
            fails["n"] += 1
            raise OSError(errno.ESTALE, "injected stale handle", p)

    a = LeaseFile(path, "A", lease_s=1.2, heartbeat_s=0.1)
    fsops.set_hook(flaky)
    try:
        a.acquire()
        deadline = time.monotonic() + 30
        while fails["n"] < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fails["n"] >= 3 and a.held() and not a.lost      # retried, still ours
        fails["on"] = False                                      # the filesystem recovers
        n = fails["n"]
        time.sleep(0.5)
        assert a.held() and not a.lost and fails["n"] == n
        fails["on"] = True                                       # and fails for good
        while not a.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert a.lost and not a.held()
        assert isinstance(a.heartbeat_error, OSError)
    finally:
        fsops.clear_hook()
        a.release()


def test_heartbeat_gives_up_at_once_on_a_non_transient_error(tmp_path):
    path = tmp_path / "c.lock"

    def denied(op, p):
        if op == "utime":
            raise PermissionError(errno.EACCES, "injected", p)

    a = LeaseFile(path, "A", lease_s=60, heartbeat_s=0.05)
    fsops.set_hook(denied)
    try:
        a.acquire()
        deadline = time.monotonic() + 30
        while not a.lost and time.monotonic() < deadline:
            time.sleep(0.02)
        assert a.lost and not a.held()
    finally:
        fsops.clear_hook()
        a.release()


def test_a_stale_lock_broken_by_another_run_is_reported(tmp_path):
    """A commit that finds the writer lock stale while another run breaks it first (the rename of
    the break finds nothing) still reports what happened in ``tx.recovered``: whose stale lock it
    was, why it was stale, and that another run broke it."""
    cache = FolderCache(tmp_path, "c")
    tx = cache.begin()
    tx.stage_slot("text", {"x": 1}, key={})
    lock = tmp_path / "c.lock"
    _fake_lock(lock, host="elsewhere", run_id="stale-run", age=600.0, lease_s=1.0)

    def another_breaker(op, path):       # the other run's break lands just before ours
        if op == "rename" and path == str(lock) and lock.exists():
            os.unlink(lock)
    fsops.set_hook(another_breaker)
    try:
        tx.commit()
    finally:
        fsops.clear_hook()
    said = [r for r in tx.recovered if "stale-run" in r]
    assert said and "broken by another run" in said[0] and "heartbeat" in said[0], tx.recovered
    assert cache.snapshot().slot_entry("text") is not None
