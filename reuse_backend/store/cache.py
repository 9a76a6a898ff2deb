"""One named cache under a root: read its committed version, begin a run, recover, clear.

Layout (see docs/ARCHITECTURE.md): ``<root>/<name>/`` is the committed version (never
modified in place), ``<name>.tmp/<staging id>/`` the staging of each run (with its
lease ``<staging id>.lease``), ``<name>.old/`` the previous version during the commit window only,
``<name>.lock`` the writer lock (held for a commit's critical section only). Reading is reader.py, writing transaction.py, crash repair recovery.py.
"""
from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from ..errors import CacheBusyError, CorruptCacheError, ReuseError
from ..storage import fsops
from .. import settings
from . import evict, filesystems, readers, recovery, rootdirs, roots, run_lease, single_flight
from .lock import WRITER_LOCK, LeaseFile, stray_lock_files
from .reader import Snapshot, VersionReader
from .transaction import RunInfo, Transaction

log = logging.getLogger("seedreuse")

DEFAULT_BUDGET = 64 << 30


def list_caches(root) -> list[str]:
    """Names of the caches under ``root`` (committed, staging, previous or locked)."""
    names = set()
    try:
        entries = os.listdir(root)
    except FileNotFoundError:
        return []
    for e in entries:
        base = e
        for suf in roots.SUFFIXES:
            if e.endswith(suf):
                base = e[:-len(suf)]
        if roots.is_valid_cache_name(base):   # foreign entries are not caches
            names.add(base)
    return sorted(names)


def committed_caches(root) -> list[str]:
    """Names with a committed version (a real directory, not a symlink) under ``root``."""
    out = []
    for name in list_caches(root):
        p = Path(root) / name
        if not os.path.islink(p) and os.path.isdir(p):
            out.append(name)
    return out


class Cache:
    def __init__(self, root, name: str, *, max_total_bytes: int = DEFAULT_BUDGET,
                 lease_s: float | None = None, heartbeat_s: float | None = None):
        self.name = roots.validate_cache_name(name)
        self.root = Path(root)
        self.paths = roots.cache_paths(self.root, self.name)
        self.max_total_bytes = int(max_total_bytes)
        self.lease_s = float(lease_s) if lease_s is not None else settings.lease_s()
        # a heartbeat well inside the lease: 10 s, or a quarter of a shorter lease
        self.heartbeat_s = float(heartbeat_s) if heartbeat_s is not None else min(10.0, self.lease_s / 4)
        group = settings.group_writable()
        # modes before the umask: workers of one group can recover each other's leftovers
        self.dir_mode, self.file_mode = (0o775, 0o664) if group else (0o755, 0o644)
        # set by the last snapshot() that found no version because the cache was removed while
        # it was being read (a clear, delete or eviction in progress): why, for the messages
        self.gone: str | None = None

    def __repr__(self) -> str:
        return f"Cache({str(self.root)!r}, {self.name!r})"

    # ------------------------------------------------------------------ reading
    def snapshot(self, retries: int = 20, delay: float = 0.05, *, lease: bool = True) -> Snapshot | None:
        """The committed version (one version, never a mix), or None when never committed
        (``gone`` then says when it was removed while being read).

        With ``lease`` (every reader) the snapshot is registered as a reader until it is closed,
        so eviction never removes the cache under it, and its first load records a use of the
        cache (readers.py, usage.py). A writer's base needs neither: its writer lock keeps
        evictions away and its commit records the use."""
        filesystems.check_root(self.root)      # cheap after the first call for this mount
        self.gone = None
        if not lease:
            return VersionReader(self).open(retries, delay)
        return readers.open_leased(self, lambda: VersionReader(self).open(retries, delay))

    # ------------------------------------------------------------------ writing
    def staging_parent(self) -> Path:
        """Where runs stage: ``<name>.tmp/``, beside the committed version (the commit is a rename)."""
        return self.paths.tmp

    def retry_when_full(self, fn, **kw):
        """``fn()``; on ENOSPC evict what the budget allows and retry once (evict.py)."""
        return evict.retry_when_full(self, fn, **kw)

    def storage_full(self, exc: OSError, during: str):
        return evict.storage_full(self, exc, during)

    def writer_lock(self, run_id: str) -> LeaseFile:
        """The writer lock of this cache (not yet acquired): held for a commit's critical
        section, a recovery, an eviction (lock.py's lease file in the role "writer lock")."""
        return LeaseFile(self.paths.lock, run_id, lease_s=self.lease_s, heartbeat_s=self.heartbeat_s,
                         cache_name=self.name, role=WRITER_LOCK)

    def begin(self, run: RunInfo | None = None) -> Transaction:
        """Begin a run: remove what dead runs left (never waiting for anyone), take this run's
        lease, snapshot the base, create fresh staging. No writer lock: runs stage side by side,
        each under its own lease (run_lease.py), and take the lock only to commit
        (transaction.py), so a run never fails because another one writes the same cache."""
        run = run or RunInfo()
        if not self.root.is_dir():
            fsops.mkdir(self.root, parents=True, exist_ok=True)
        filesystems.check_root(self.root)      # refuse unsafe shared filesystems before any write
        recovered = self.recover_leftovers(f"recover-{run.run_id}", strays=True)
        base = None
        try:
            base, base_error = self.snapshot(lease=False), None
        except CorruptCacheError as e:   # a broken version cannot be a base; it gets replaced
            log.warning("%s", e)
            base, base_error = None, e
        tx = Transaction(self, run, base, base_error, recovered)
        try:
            # the lease exists before the staging directory (run_lease.py's invariant); a full
            # disk: evict what the budget allows and retry once (evict.py)
            tx.lease = self.retry_when_full(lambda: run_lease.acquire(self, tx.staging_id, run.run_id),
                                            during="take the run lease")
            try:
                self.retry_when_full(tx.create_staging, reset=tx.remove_staging)
            except OSError as e:
                err = tx.explain(e, "create its staging directory")
                if err is e:
                    raise
                raise err from e
            return tx
        except BaseException:
            tx.state = "failed"
            tx.discard()
            raise

    def claim(self, slot: str, digest: str, run_id: str, *, wait: float | None = None, on_wait=None):
        """Single flight (single_flight.py): take the claim of this slot key, or wait for the run
        that holds it to publish its encoding; a ``Claimed``."""
        return single_flight.claim(self, slot, digest, run_id, wait=wait, on_wait=on_wait)

    def _recover_locked(self) -> list[str]:
        return recovery.recover_locked(self.root, self.name, self.paths, self.lease_s)

    def recover(self, run_id: str | None = None) -> list[str]:
        """Recovery under the writer lock (CacheBusyError while a live writer holds it)."""
        lock = self.writer_lock(run_id or f"recover-{uuid.uuid4().hex}").acquire()
        try:
            return lock.broke + self._recover_locked()
        finally:
            lock.release()

    def recover_leftovers(self, run_id: str | None = None, *, strays: bool = False) -> list[str]:
        """For readers and runs beginning: when a crashed writer left something behind (its lock,
        the staging of a dead run, the previous version) it is cleaned up, so leftovers never
        outlive the next request. Recovery runs under the lock; while another run commits (busy)
        only what dead runs left in ``.tmp`` is removed (judged by their leases, run_lease.py),
        and a failed recovery is logged (the next one retries it). Never waits. ``strays``: also
        the temp files of a crashed lock attempt or release and a half-deleted eviction (a listing
        of the root, a look at ``.evicting``: a run beginning looks for them, a reader does not)."""
        if not recovery.has_leftovers(self.paths) and not (
                strays and (stray_lock_files(self.root, self.name) or os.path.lexists(rootdirs.evicting_dir(self.root)))):
            return []
        try:
            done = self.recover(run_id)
        except CacheBusyError:
            try:
                done = run_lease.remove_dead(self.paths, self.lease_s)
            except OSError as e:
                log.warning("recovery of cache '%s' failed: %s", self.name, e)
                return []
        except ReuseError as e:
            log.warning("recovery of cache '%s' failed: %s", self.name, e)
            return []
        if done:
            log.info("recovered cache '%s': %s", self.name, "; ".join(map(str, done)))
        return done

    def clear(self, run_id: str | None = None) -> list[str]:
        """Remove the committed version, as the cache browser's delete does: the safe eviction
        (evict.py ``evict_cache_when_readers_leave``: under the writer lock, never while a reader
        holds a snapshot of it, at either of its two looks; a lease that only lingers after its
        reader closed is waited for), then recovery of any leftovers. CacheBusyError, with the
        reason, while a live writer or reader keeps it (nothing is removed then)."""
        ok, why = evict.evict_cache_when_readers_leave(self.root, self.name, lease_s=self.lease_s)
        if not ok and why != "no committed version":
            raise CacheBusyError(
                f"cache '{self.name}' was not cleared: it is {why}" if why.startswith(("being", "read"))
                else f"cache '{self.name}' was not cleared: {why}",
                expected="no live writer and no open reader of the cache", actual=why,
                fix="wait for that run or reader to finish (a worker serving a prompt from this "
                    "cache), then clear again",
                details={"cache": self.name})
        done = [f"removed committed version of '{self.name}'"] if ok else []
        if recovery.has_leftovers(self.paths):
            done = self.recover(run_id or f"clear-{uuid.uuid4().hex}") + done
        return done
