"""One named cache in a folder: the folder medium's side of the store interface (interface.Cache).

Layout (layout.py, docs/ARCHITECTURE.md): ``<root>/<name>/`` is the committed version (never
modified in place), ``<name>.tmp/<staging id>/`` the staging of each run (with its run lease
``<staging id>.lease``), ``<name>.old/`` the previous version during the commit window only,
``<name>.lock`` the writer lock (held for a commit's critical section only). Reading is reader.py,
the commit commit.py, crash repair recovery.py, the size budget evict.py; the engine
(store/transaction.py, store/claim.py) does the rest over what this class gives.
"""
from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from .. import settings
from ..errors import CacheBusyError, CorruptCacheError, ReuseError
from ..storage import fsops
from ..store import roots
from ..store.claim import claim as take_claim
from ..store.lease import WRITER_LOCK, Lease
from ..store.run_info import RunInfo
from ..store.transaction import Transaction
from . import commit, evict, filesystems, readers, recovery, rootdirs, run_lease
from .claims import FolderClaims
from .layout import cache_paths
from .lease_files import LeaseFiles, stray_files
from .reader import FolderSnapshot, VersionReader, carry

log = logging.getLogger("seedreuse")


class FolderCache:
    """interface.Cache on a folder. Invariant by invariant (docs/ARCHITECTURE.md, "Invariants"):
    1: the staging becomes the version by renames after everything is staged and fsynced (commit.py);
    2: a version is a directory never modified in place, read through one pinned directory fd (reader.py);
    3: commits are serialized by the writer lock, each re-reading the current version under it (commit.py);
    4: fenced by the run lease, the staging's identity and the writer lock, checked before every write
       and twice in the commit; a stale run's staging is moved away before it is removed (run_lease.py);
    5: the claim is a lease file in ``.tmp``, its entry a one-slot version beside it (claims.py);
    6: recovery and eviction remove only what stale leases left (recovery.py, evict.py, readers.py);
    7: names validated (store/roots.py), no symlink or FIFO opened, loads bounded (reader.py)."""

    staging_is_shared = True      # a fenced run's staging is the next owner's recovery's to remove

    def __init__(self, root, name: str, *, lease_s: float | None = None, heartbeat_s: float | None = None):
        self.name = roots.validate_cache_name(name)
        self.root = Path(root)
        self.paths = cache_paths(self.root, self.name)
        self.lease_s = float(lease_s) if lease_s is not None else settings.lease_s()
        # a heartbeat well inside the lease: 10 s, or a quarter of a shorter lease
        self.heartbeat_s = float(heartbeat_s) if heartbeat_s is not None else min(10.0, self.lease_s / 4)
        group = settings.group_writable()
        # modes before the umask: workers of one group can recover each other's leftovers
        self.dir_mode, self.file_mode = (0o775, 0o664) if group else (0o755, 0o644)
        # set by the last snapshot() that found no version because the cache was removed while
        # it was being read (a clear, delete or eviction in progress): why, for the messages
        self.gone: str | None = None
        self.claims = FolderClaims(self)

    def __repr__(self) -> str:
        return f"FolderCache({str(self.root)!r}, {self.name!r})"

    # ------------------------------------------------------------------ reading
    def snapshot(self, *, lease: bool = True) -> FolderSnapshot | None:
        """The committed version (one version, never a mix), or None when never committed
        (``gone`` then says when it was removed while being read).

        With ``lease`` (every reader) the snapshot is registered as a reader until it is closed,
        so eviction never removes the cache under it, and its first load records a use of the
        cache (readers.py, usage.py). A writer's base needs neither: its writer lock keeps
        evictions away and its commit records the use."""
        filesystems.check_root(self.root)      # cheap after the first call for this mount
        self.gone = None
        if not lease:
            return VersionReader(self).open()
        return readers.open_leased(self, lambda: VersionReader(self).open())

    # ------------------------------------------------------------------ writing
    def staging_parent(self) -> Path:
        """Where runs stage: ``<name>.tmp/``, beside the committed version (the commit is a rename)."""
        return self.paths.tmp

    def retry_when_full(self, fn, **kw):
        """``fn()``; on ENOSPC evict what the budget allows and retry once (evict.py)."""
        return evict.retry_when_full(self, fn, **kw)

    def storage_full(self, exc: OSError, during: str):
        return evict.storage_full(self, exc, during)

    def writer_lock(self, run_id: str) -> Lease:
        """The writer lock of this cache (not yet acquired): held for a commit's critical
        section, a recovery, an eviction."""
        return Lease(LeaseFiles(file_mode=self.file_mode, cache_name=self.name), self.paths.lock, run_id,
                     WRITER_LOCK, lease_s=self.lease_s, heartbeat_s=self.heartbeat_s, cache_name=self.name)

    def carry(self, staged, fname: str, source, src: str) -> dict:
        """A hard link from the source version's pinned directory, or a copy of its pinned file
        when that version was removed meanwhile (reader.py)."""
        return carry(staged, fname, source, src)

    def publish(self, tx) -> str:
        """The commit protocol of a folder (commit.py)."""
        return commit.publish(tx)

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
            tx.lease = run_lease.lease(self, tx.staging_id, run.run_id)
            self.retry_when_full(tx.lease.acquire, during="take the run lease")
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
        """Single flight (store/claim.py): take the claim of this slot key, or wait for the run
        that holds it to publish its encoding; a ``Claim``."""
        return take_claim(self, slot, digest, run_id, wait=wait, on_wait=on_wait)

    def _recover_locked(self) -> list[str]:
        return recovery.recover_locked(self.root, self.name, self.paths, self.lease_s)

    def recover(self, run_id: str | None = None) -> list[str]:
        """Recovery under the writer lock (CacheBusyError while a live writer holds it)."""
        lock = self.writer_lock(run_id or f"recover-{uuid.uuid4().hex}")
        self.retry_when_full(lock.acquire, during="take the writer lock")
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
                strays and (stray_files(self.root, f"{self.name}.lock") or os.path.lexists(rootdirs.evicting_dir(self.root)))):
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
