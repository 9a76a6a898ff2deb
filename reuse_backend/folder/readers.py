"""Readers made visible to eviction: reader leases, ``<root>/.readers/<name>.<lease id>``.

A reader (``FolderCache.snapshot()``) holds a reader lease (store/lease.py) *before* it opens the
committed version, until the snapshot is closed. An evictor (evict.py) lists the leases of a cache
before it moves the cache out of the namespace and again after; a live lease at either look keeps
the cache (the second look puts it back). Since a reader registers before it opens, either the
evictor sees it or the reader finds no cache. A stale lease protects nothing and is removed by gc,
recovery or check --repair: a crashed reader pins a cache for at most one lease.

One lease serves every snapshot a process holds of a cache (a reference count), kept LINGER_S after
the last of them closes, so back-to-back snapshots register once (creating and removing a file in
the shared folder cost 6-18 ms per snapshot on CephFS against one look to reuse it). While it only
lingers its file carries the owner-execute bit (IDLE_BIT): this process's own listings skip it,
other processes count it as a live reader for at most LINGER_S, and the cache browser's delete
waits for it instead of answering "in use" (evict.py).

What this does not guarantee: a reader that cannot create its lease (no write permission: use
SEEDREUSE_GROUP_WRITABLE=1 for workers of several users; a read-only mount; a full disk) reads
unregistered: its pinned files stay readable on local disks and NFS after an eviction deletes them,
other network filesystems may fail its later reads, never with another version's data; a reader
paused past its lease loses its protection; the two looks need a listing of ``.readers`` that is
current on every host (true on the filesystems probe.py calls safe).
"""
from __future__ import annotations

import atexit
import logging
import multiprocessing.util
import os
import stat
import threading
import time
import uuid
from pathlib import Path

from ..errors import ReuseError
from ..storage import fsops
from ..store.lease import READER_LEASE, Lease, holds, stale_reason
from ..store.owner import hostname, pid_start
from . import usage
from .lease_files import LeaseFiles, read_lease, status

log = logging.getLogger("seedreuse")

READERS_DIR = usage.READERS_DIR
LINGER_S = 2.0                  # an unused lease is removed this long after its last snapshot closed
IDLE_BIT = stat.S_IXUSR         # set on a lease file while it only lingers (no snapshot uses it)
EVICT_RUN_PREFIX = "evict-"     # run id prefix of an evictor's writer lock


def readers_dir(root) -> Path:
    return Path(root) / READERS_DIR


def lease_cache_name(entry: str) -> str:
    """The cache a lease file name belongs to (cache names never contain '.')."""
    return entry.split(".", 1)[0]


class ReaderLease:
    """This process's reader lease of one cache, shared by its open snapshots (``refs``)."""

    def __init__(self, lease: Lease, key: tuple, mode: int | None):
        self.lease, self.key, self.mode = lease, key, mode
        self.path, self.id = lease.path, lease.run_id
        self.pid = os.getpid()
        self.refs = 1                 # open snapshots using this lease (guarded by the registry)
        self.idle_since = 0.0         # monotonic time refs dropped to 0
        self.marked_idle = False      # IDLE_BIT is set on the file (guarded by the registry)

    @classmethod
    def acquire(cls, root, name: str, *, lease_s: float, heartbeat_s: float, dir_mode: int = 0o755,
                file_mode: int = 0o644) -> "ReaderLease | None":
        """This process's lease of ``name`` under ``root`` (one more snapshot on it), created when
        there is none; None when it cannot be created (the reader then reads unregistered)."""
        key = (str(root), name, os.getpid())
        lease = REGISTRY.reuse(key)
        if lease is not None:
            return lease
        return cls.create(root, name, lease_s=lease_s, heartbeat_s=heartbeat_s, dir_mode=dir_mode,
                          file_mode=file_mode, key=key)

    @classmethod
    def create(cls, root, name: str, *, lease_s: float, heartbeat_s: float, dir_mode: int = 0o755,
               file_mode: int = 0o644, key: tuple = ()) -> "ReaderLease | None":
        """Register a new reader of ``name`` (a new lease file); None when it cannot (it then reads
        unregistered)."""
        lease_id = uuid.uuid4().hex
        lease = Lease(LeaseFiles(file_mode=file_mode, parent_mode=dir_mode, cache_name=name),
                      readers_dir(root) / f"{name}.{lease_id}", lease_id, READER_LEASE, lease_s=lease_s,
                      heartbeat_s=heartbeat_s, cache_name=name, extra={"cache": name})
        try:
            lease.acquire(exclusive=False)
        except (OSError, ReuseError) as e:        # no root yet, read-only, no permission, full
            log.debug("seedreuse: reader of '%s' unregistered: %s", name, e)
            lease.release()
            return None
        reader = cls(lease, key, lease.token.mode)      # the mode a chmod back restores
        REGISTRY.add(reader)
        return reader

    def release(self) -> None:
        """One snapshot less on this lease; the file is removed LINGER_S after the last one."""
        REGISTRY.release(self)


class _Registry:
    """The reader leases this process holds (reusable by key), and their linger."""

    def __init__(self):
        self.guard = threading.Lock()
        self.leases: dict[str, ReaderLease] = {}
        self.by_key: dict[tuple, ReaderLease] = {}

    def add(self, reader: ReaderLease) -> None:
        with self.guard:
            self.leases[reader.id] = reader
            if reader.key:
                self.by_key[reader.key] = reader

    def reuse(self, key: tuple) -> ReaderLease | None:
        """This process's lease of ``key`` with one more snapshot on it, or None (none, or no longer
        ours: judged stale and removed, or its heartbeat gave it up)."""
        with self.guard:
            reader = self.by_key.get(key)
            if reader is None or reader.pid != os.getpid():
                return None
            if not reader.lease.held():
                self._drop(reader)
                threading.Thread(target=reader.lease.release, daemon=True).start()
                return None
            reader.refs += 1
            if reader.marked_idle:            # in use again: other processes see it at once
                reader.marked_idle = False
                try:
                    fsops.chmod(reader.path, reader.mode)
                except OSError:
                    pass                      # it looks idle a little longer: nothing unsafe
            return reader

    def release(self, reader: ReaderLease) -> None:
        with self.guard:
            reader.refs = max(0, reader.refs - 1)
            if reader.refs:
                return
            reader.idle_since = time.monotonic()
            if reader.key and self.by_key.get(reader.key) is reader:
                self._mark_idle(reader)
                timer = threading.Timer(LINGER_S, self.remove_expired)
                timer.daemon = True
                timer.start()
                return
            self._drop(reader)                # not reusable (made by create): no reason to keep it
        reader.lease.release()

    @staticmethod
    def _mark_idle(reader: ReaderLease) -> None:
        if reader.mode is None:
            return
        try:
            fsops.chmod(reader.path, reader.mode | IDLE_BIT)
            reader.marked_idle = True
        except OSError as e:              # it looks in use: a delete answers at once, nothing unsafe
            log.debug("seedreuse: could not mark reader lease %s idle: %s", reader.path, e)

    def _drop(self, reader: ReaderLease) -> None:
        self.leases.pop(reader.id, None)
        if reader.key and self.by_key.get(reader.key) is reader:
            del self.by_key[reader.key]

    def idle(self, lease_id) -> bool:
        """A lease of this process that no open snapshot uses (lingering until LINGER_S)."""
        with self.guard:
            reader = self.leases.get(lease_id)
            return reader is not None and reader.pid == os.getpid() and not reader.refs

    # Unused leases are taken out of the registry and their files removed under the guard, so a
    # listing of this process (leases()) that finds one of its own files no longer registered can
    # tell, by looking again, that it was just removed rather than lost.
    def _remove(self, pick) -> None:
        with self.guard:
            for reader in [x for x in self.leases.values() if x.pid == os.getpid() and not x.refs and pick(x)]:
                self._drop(reader)
                reader.lease.release()

    def remove_idle(self, root, name: str | None) -> None:
        """Remove this process's unused leases of ``name`` (or of every cache) under ``root``."""
        self._remove(lambda x: x.key and x.key[0] == str(root) and (name is None or x.key[1] == name))

    def remove_expired(self) -> None:
        """Remove the unused leases whose last snapshot closed LINGER_S ago or more."""
        now = time.monotonic()
        self._remove(lambda x: now - x.idle_since >= LINGER_S - 0.01)


REGISTRY = _Registry()


def _mine(owner) -> bool:
    return isinstance(owner, dict) and owner.get("pid") == os.getpid() and owner.get("host") == hostname() \
        and owner.get("pid_start") == pid_start(os.getpid())


def leases(root, name: str | None = None, default_lease_s: float = 120.0) -> list[dict]:
    """Every reader lease (of ``name``, or all): {"path", "cache", "owner", "stale": reason|None,
    "idle": it only lingers, no snapshot of its process uses it (IDLE_BIT)}."""
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
        owner, st = read_lease(d / entry)
        if st is None:
            continue                    # released meanwhile
        if _mine(owner) and REGISTRY.idle(owner.get("run_id")):
            continue                    # no snapshot of this process uses it: not a reader here
        if _mine(owner) and not holds(owner.get("run_id")) and not os.path.lexists(d / entry):
            continue                    # this process removed it meanwhile (remove_expired)
        stale = stale_reason(owner, st.st_mtime, time.time(), default_lease_s, who="reader")
        out.append({"path": str(d / entry), "cache": cache, "owner": owner, "stale": stale,
                    "idle": bool(st.st_mode & IDLE_BIT)})
    return out


def live_readers(root, name: str, default_lease_s: float = 120.0) -> list[dict]:
    return [x for x in leases(root, name, default_lease_s) if x["stale"] is None]


def remove_stale(root, name: str | None = None, default_lease_s: float = 120.0) -> list[str]:
    """Remove stale leases (of ``name`` or all), and this process's unused ones (they would go
    within LINGER_S anyway); the folder too when it is empty."""
    REGISTRY.remove_idle(root, name)
    done = []
    for x in leases(root, name, default_lease_s):
        if x["stale"] is not None:
            fsops.unlink(x["path"], missing_ok=True)
            done.append(f"removed stale reader lease {os.path.basename(x['path'])}: {x['stale']}")
    try:
        fsops.rmdir(readers_dir(root))
    except OSError:
        pass
    return done


def eviction_running(cache) -> bool:
    st = status(cache.paths.lock, cache.lease_s)
    return st["state"] == "live" and str((st["owner"] or {}).get("run_id", "")).startswith(EVICT_RUN_PREFIX)


def open_leased(cache, opener, wait_s: float = 5.0):
    """``opener()`` (the version reader) under a reader lease of ``cache``.

    When no version is found while an eviction holds the cache's lock, the evictor may be about to
    put it back (it saw our lease on its second look): wait for it (bounded by ``wait_s``), then look
    once more."""
    # Invariant 6 (readers): the lease exists before the version is opened, so an evictor's second
    # look (after its rename out) sees every reader that could have opened the version.
    reader = ReaderLease.acquire(cache.root, cache.name, lease_s=cache.lease_s, heartbeat_s=cache.heartbeat_s,
                                 dir_mode=cache.dir_mode, file_mode=cache.file_mode)
    try:
        snap = opener()
        if snap is None and reader is not None and eviction_running(cache):
            deadline = time.monotonic() + wait_s
            while eviction_running(cache) and time.monotonic() < deadline:
                time.sleep(0.02)
            snap = opener()
            if snap is None:      # not put back: the eviction (gc, budget, clear, delete) removed it
                cache.gone = "it was removed (cleared, deleted or evicted) while this run was opening it"
    except BaseException:
        if reader is not None:
            reader.release()
        raise
    if snap is None:
        if reader is not None:
            reader.release()
        return None
    snap.lease = reader
    return snap


@atexit.register
def _remove_unused_at_exit() -> None:
    # a process that ends normally takes its lingering leases with it (a killed one leaves them
    # to turn stale: its pid is gone)
    with REGISTRY.guard:
        idle = [x for x in REGISTRY.leases.values() if x.pid == os.getpid() and not x.refs]
    for reader in idle:
        try:
            os.unlink(reader.path)     # at exit: no hook, no heartbeat thread to stop
        except OSError:
            pass


def _after_fork_in_child() -> None:
    # a fork while another thread held the guard must not deadlock the child; the child's leases
    # are its own (the parent's keep the parent's pid and are never beaten by the child)
    REGISTRY.guard = threading.Lock()
    REGISTRY.by_key = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
# a multiprocessing child ends with os._exit (no atexit); its finalizers run just before, and the
# ones registered before the fork are dropped, so each child registers its own
multiprocessing.util.register_after_fork(
    REGISTRY, lambda reg: multiprocessing.util.Finalize(reg, _remove_unused_at_exit, exitpriority=1))
