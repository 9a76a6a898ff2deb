"""Readers made visible to eviction: one lease file per open snapshot, with a heartbeat.

A reader (``Cache.snapshot()``) creates ``<root>/.readers/<name>.<lease id>`` *before* it
opens the committed version and removes it when the snapshot is closed. The file holds JSON
{host, pid, pid_start, pid_ns, run_id (the lease id), cache, started_at, lease_s}; its mtime
is the heartbeat, refreshed by one daemon thread per process for every lease it holds. An
evictor (evict.py) lists the leases of a cache twice: before it moves the cache out of the
namespace and again after; a live lease at either look keeps the cache (the second look puts
it back). Since a reader registers before it opens, either the evictor sees it, or the reader
registered after the cache was gone and finds no cache: it never loses a cache it opened.

A lease is stale (does not protect anything, and is removed by gc, recovery or check --repair)
when its owner is provably dead on this host (pid gone or reused, same pid namespace), when it
names this process but this process no longer holds it, or when its heartbeat is older than
its lease (``SEEDREUSE_LEASE_S``, as the writer lock) plus 1 s. So a crashed reader pins a cache
for at most one lease.

Lease files are not part of any version: they are written with plain system calls, not
through fsops (a crash anywhere leaves at most a lease that turns stale).

What this does not guarantee:
* a reader that cannot create its lease (no write permission on the root: use
  SEEDREUSE_GROUP_WRITABLE=1 for workers of several users; a read-only mount; a full disk)
  reads unregistered. Its snapshot keeps every file of the version open, which on local disks
  and NFS (silly rename) keeps them readable after an eviction deletes them; on other network
  filesystems its later reads may fail with an I/O error. It never reads another version's data.
* a reader paused or partitioned for longer than its lease loses its protection (like a writer
  loses its lock); its heartbeat then finds the lease gone and logs it.
* the two looks rely on the directory listing of ``.readers`` being current on every host (true
  on the filesystems probe.py calls safe; not on clients that cache directory entries).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from pathlib import Path

from .lock import judge as lock_judge, lock_status, read_lock
from .owner import hostname, pid_namespace, pid_start
from .reader import Snapshot
from . import usage

log = logging.getLogger("seedreuse")

READERS_DIR = usage.READERS_DIR
EVICT_RUN_PREFIX = "evict-"     # run id prefix of an evictor's writer lock
_O_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def readers_dir(root) -> Path:
    return Path(root) / READERS_DIR


def lease_cache_name(entry: str) -> str:
    """The cache a lease file name belongs to (cache names never contain '.')."""
    return entry.split(".", 1)[0]


class ReaderLease:
    def __init__(self, path: Path, lease_id: str, lease_s: float, heartbeat_s: float):
        self.path, self.id = path, lease_id
        self.lease_s, self.heartbeat_s = lease_s, heartbeat_s
        self.pid = os.getpid()
        self.lost = False

    @classmethod
    def create(cls, root, name: str, *, lease_s: float, heartbeat_s: float,
               dir_mode: int = 0o755, file_mode: int = 0o644) -> ReaderLease | None:
        """Register a reader of ``name``; None when it cannot (it then reads unregistered)."""
        d = readers_dir(root)
        lease_id = uuid.uuid4().hex
        pid = os.getpid()
        body = json.dumps({"host": hostname(), "pid": pid, "pid_start": pid_start(pid),
                           "pid_ns": pid_namespace(), "run_id": lease_id, "cache": name,
                           "started_at": time.time(), "lease_s": lease_s}).encode()
        path = d / f"{name}.{lease_id}"
        for _ in range(5):      # bounded: a closing reader may remove the empty folder in between
            try:
                os.mkdir(d, dir_mode)
            except FileExistsError:
                pass
            except OSError as e:            # no root yet, read-only, no permission, full
                log.debug("seedreuse: reader of '%s' unregistered: %s", name, e)
                return None
            try:
                fd = os.open(path, _O_CREATE, file_mode)
            except FileNotFoundError:
                continue
            except OSError as e:
                log.debug("seedreuse: reader of '%s' unregistered: %s", name, e)
                return None
            try:
                view = memoryview(body)
                while view:
                    view = view[os.write(fd, view):]
            except OSError:
                os.close(fd)
                _unlink(path)
                return None
            os.close(fd)
            lease = cls(path, lease_id, lease_s, heartbeat_s)
            _REGISTRY.add(lease)
            return lease
        return None

    def beat(self) -> None:
        try:
            os.utime(self.path)
        except FileNotFoundError:
            self.lost = True
            _REGISTRY.remove(self.id)
            log.warning("seedreuse: reader lease %s was removed (judged stale: this reader stopped "
                        "heartbeating for longer than its lease); the cache is no longer protected "
                        "from eviction while this snapshot is open", self.path)
        except OSError as e:        # transient (network filesystem): the next beat retries
            log.debug("seedreuse: heartbeat of reader lease %s failed: %s", self.path, e)

    def release(self) -> None:
        _REGISTRY.remove(self.id)
        # the folder stays: removing it when empty cost a directory operation per snapshot
        # (a server round trip on network filesystems) on the hit path, for nothing
        _unlink(self.path)


def _unlink(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class _Registry:
    """The leases this process holds, and the one heartbeat thread that keeps them fresh."""

    def __init__(self):
        self.guard = threading.Lock()
        self.leases: dict[str, ReaderLease] = {}
        self.interval = 10.0
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def add(self, lease: ReaderLease) -> None:
        with self.guard:
            self.leases[lease.id] = lease
            if lease.heartbeat_s < self.interval:
                self.interval = lease.heartbeat_s
                self.wake.set()
            if self.thread is None or not self.thread.is_alive():   # also after a fork
                self.thread = threading.Thread(target=self._run, name="seedreuse-reader-leases",
                                               daemon=True)
                self.thread.start()

    def remove(self, lease_id: str) -> None:
        with self.guard:
            self.leases.pop(lease_id, None)

    def held(self, lease_id: str) -> bool:
        with self.guard:
            lease = self.leases.get(lease_id)
        return lease is not None and lease.pid == os.getpid() and not lease.lost

    def _run(self) -> None:
        while True:
            self.wake.wait(self.interval)
            self.wake.clear()
            with self.guard:
                mine = [x for x in self.leases.values() if x.pid == os.getpid()]
            for lease in mine:
                lease.beat()


_REGISTRY = _Registry()


def _after_fork_in_child() -> None:
    # a fork while the heartbeat thread held the guard must not deadlock the child; the child's
    # leases are its own (the parent's keep the parent's pid and are never beaten by the child)
    _REGISTRY.guard = threading.Lock()
    _REGISTRY.wake = threading.Event()
    _REGISTRY.thread = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _own_lease(owner: dict) -> str | None:
    pid = owner["pid"]
    if not _REGISTRY.held(owner.get("run_id")) or owner.get("pid_start") != pid_start(pid):
        return f"reader is this process (pid {pid}) and no longer holds it"
    return None


def judge(owner: dict | None, st: os.stat_result, default_lease_s: float) -> str | None:
    """Why a reader lease is stale, or None when it is live (the writer lock's rules, lock.judge)."""
    return lock_judge(owner, st, default_lease_s, own=_own_lease, who="reader")


def leases(root, name: str | None = None, default_lease_s: float = 120.0) -> list[dict]:
    """Every lease file (of ``name``, or all): {"path", "cache", "owner", "stale": reason|None}."""
    d = readers_dir(root)
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    out = []
    for entry in names:
        cache = lease_cache_name(entry)
        if name is not None and cache != name:
            continue
        owner, st = read_lock(d / entry)
        if st is None:
            continue                    # released meanwhile
        out.append({"path": str(d / entry), "cache": cache, "owner": owner,
                    "stale": judge(owner, st, default_lease_s)})
    return out


def live_readers(root, name: str, default_lease_s: float = 120.0) -> list[dict]:
    return [x for x in leases(root, name, default_lease_s) if x["stale"] is None]


def remove_stale(root, name: str | None = None, default_lease_s: float = 120.0) -> list[str]:
    """Remove stale leases (of ``name`` or all); the folder too when it is empty."""
    done = []
    for x in leases(root, name, default_lease_s):
        if x["stale"] is not None:
            _unlink(x["path"])
            done.append(f"removed stale reader lease {os.path.basename(x['path'])}: {x['stale']}")
    try:
        os.rmdir(readers_dir(root))
    except OSError:
        pass
    return done


def eviction_running(cache) -> bool:
    st = lock_status(cache.paths.lock, cache.lease_s)
    return st["state"] == "live" and str((st["owner"] or {}).get("run_id", "")).startswith(EVICT_RUN_PREFIX)


class LeasedSnapshot(Snapshot):
    """A reader's snapshot: holds a reader lease until closed; its first load records a use."""

    def __init__(self, snap: Snapshot, lease: ReaderLease | None):
        super().__init__(snap.cache, snap._dfd, snap.manifest, snap._fds, snap.source)
        snap._dfd, snap._fds = None, {}          # ownership of the fds moves here
        self._lease, self._used = lease, False

    def _record_use(self) -> None:
        if not self._used and self._dfd is not None:
            self._used = True
            usage.touch_version(self._dfd, self.name)

    def load_slot(self, slot: str, *, verify: bool | None = None):
        value = super().load_slot(slot, verify=verify)
        self._record_use()                       # a load that served a hit is a use
        return value

    def load_boundary(self, i: int, *, verify: bool | None = None):
        value = super().load_boundary(i, verify=verify)
        self._record_use()
        return value

    def close(self) -> None:
        try:
            super().close()
        finally:
            lease, self._lease = getattr(self, "_lease", None), None
            if lease is not None:
                lease.release()


def open_leased(cache, opener, wait_s: float = 5.0):
    """``opener()`` (the version reader) under a reader lease of ``cache``.

    When no version is found while an eviction holds the cache's lock, the evictor may be
    about to put it back (it saw our lease on its second look): wait for it (bounded by
    ``wait_s``), then look once more."""
    # Invariant (readers): the lease exists before the version is opened, so an evictor's
    # second look (after its rename out) sees every reader that could have opened the version.
    lease = ReaderLease.create(cache.root, cache.name, lease_s=cache.lease_s,
                               heartbeat_s=cache.heartbeat_s, dir_mode=cache.dir_mode,
                               file_mode=cache.file_mode)
    try:
        snap = opener()
        if snap is None and lease is not None and eviction_running(cache):
            deadline = time.monotonic() + wait_s
            while eviction_running(cache) and time.monotonic() < deadline:
                time.sleep(0.02)
            snap = opener()
    except BaseException:
        if lease is not None:
            lease.release()
        raise
    if snap is None:
        if lease is not None:
            lease.release()
        return None
    return LeasedSnapshot(snap, lease)
