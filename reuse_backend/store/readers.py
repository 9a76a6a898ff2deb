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

One lease serves every snapshot a process holds of a cache (a reference count), and it is kept
for LINGER_S after the last of them closes, so back-to-back snapshots register once: creating
and removing a file in the shared ``.readers`` folder cost 6-18 ms per snapshot on CephFS (each
client takes the folder's capabilities from the other) against one ``utime`` to reuse it. A
lease of this process that no snapshot uses is left out of this process's own listings (an
eviction here goes ahead at once, check does not report it); other processes see it live until
it is removed, so it keeps the cache from their evictions for at most LINGER_S (plus one
heartbeat) after its last use.

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

import logging
import os
import time

from .lock import judge as lock_judge, lock_status, read_lock
from .owner import hostname, pid_start
from .reader import Snapshot
from .reader_leases import IDLE_BIT, LINGER_S, READERS_DIR, ReaderLease, REGISTRY, unlink_quiet, readers_dir
from . import usage

__all__ = ["LINGER_S", "READERS_DIR", "ReaderLease", "readers_dir", "lease_cache_name", "judge", "leases",
           "live_readers", "remove_stale", "eviction_running", "LeasedSnapshot", "open_leased"]

log = logging.getLogger("seedreuse")

EVICT_RUN_PREFIX = "evict-"     # run id prefix of an evictor's writer lock


def lease_cache_name(entry: str) -> str:
    """The cache a lease file name belongs to (cache names never contain '.')."""
    return entry.split(".", 1)[0]


def _own_lease(owner: dict) -> str | None:
    pid = owner["pid"]
    if not REGISTRY.held(owner.get("run_id")) or owner.get("pid_start") != pid_start(pid):
        return f"reader is this process (pid {pid}) and no longer holds it"
    return None


def _mine(owner) -> bool:
    return isinstance(owner, dict) and owner.get("pid") == os.getpid() and owner.get("host") == hostname() \
        and owner.get("pid_start") == pid_start(os.getpid())


def _mine_and_unused(owner) -> bool:
    """A lease file of this very process that only lingers (this process's own listings skip it;
    every other process sees it live until the heartbeat thread removes it)."""
    return _mine(owner) and REGISTRY.idle(owner.get("run_id"))


def judge(owner: dict | None, st: os.stat_result, default_lease_s: float) -> str | None:
    """Why a reader lease is stale, or None when it is live (the writer lock's rules, lock.judge)."""
    return lock_judge(owner, st, default_lease_s, own=_own_lease, who="reader")


def leases(root, name: str | None = None, default_lease_s: float = 120.0) -> list[dict]:
    """Every lease file (of ``name``, or all): {"path", "cache", "owner", "stale": reason|None,
    "idle": it only lingers, no snapshot of its process uses it (reader_leases.IDLE_BIT)}."""
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
        if _mine_and_unused(owner):
            continue                    # no snapshot of this process uses it: not a reader here
        if _mine(owner) and not REGISTRY.held(owner.get("run_id")) and not os.path.lexists(d / entry):
            continue                    # this process removed it meanwhile (remove_expired)
        out.append({"path": str(d / entry), "cache": cache, "owner": owner,
                    "stale": judge(owner, st, default_lease_s), "idle": bool(st.st_mode & IDLE_BIT)})
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
            unlink_quiet(x["path"])
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
        super().__init__(snap.cache, snap._dfd, snap.manifest, snap._fds, snap.source, snap.damaged)
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
    lease = ReaderLease.acquire(cache.root, cache.name, lease_s=cache.lease_s,
                                heartbeat_s=cache.heartbeat_s, dir_mode=cache.dir_mode,
                                file_mode=cache.file_mode)
    try:
        snap = opener()
        if snap is None and lease is not None and eviction_running(cache):
            deadline = time.monotonic() + wait_s
            while eviction_running(cache) and time.monotonic() < deadline:
                time.sleep(0.02)
            snap = opener()
            if snap is None:      # not put back: the eviction (gc, budget, clear, delete) removed it
                cache.gone = ("it was removed (cleared, deleted or evicted) while this run was opening "
                              "it")
    except BaseException:
        if lease is not None:
            lease.release()
        raise
    if snap is None:
        if lease is not None:
            lease.release()
        return None
    return LeasedSnapshot(snap, lease)
