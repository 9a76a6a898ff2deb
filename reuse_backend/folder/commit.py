"""The commit of a run on a folder (``FolderCache.publish``): the writer lock for the critical section only.

Runs stage side by side under their own leases (run_lease.py); a commit takes the writer lock,
waiting at most ``SEEDREUSE_COMMIT_WAIT_S`` (default: the lease plus 60 s: another commit takes
seconds, a dead committer's lock is broken once its owner is provably dead or past its lease),
finishes a crashed commit (recovery), rebases onto what committed meanwhile (store/rebase.py),
then publishes: the manifest written last, the previous version moved aside whole and the staging
renamed into place, ``.old`` removed last. The lock is released in any case. How each step keeps
the invariants of docs/ARCHITECTURE.md is said where it is enforced (Invariant 1-4 below).
"""
from __future__ import annotations

import logging
import os
import time

from .. import settings
from ..errors import CacheBusyError, CorruptCacheError, TransactionError
from ..storage import fsops
from ..store import manifest as mf
from ..store.rebase import rebase_if_changed
from . import evict, recovery

log = logging.getLogger("seedreuse")

def take_lock(tx) -> None:
    """The writer lock, waiting at most settings.commit_wait_s(): a commit of another run takes
    seconds; a dead committer's lock is broken once provably dead or past its lease. What was
    broken on the way, by this run or by another one meanwhile, goes to ``tx.recovered``."""
    wait = settings.commit_wait_s(tx.cache.lease_s)
    deadline, delay = time.monotonic() + wait, 0.02
    while True:
        lock = tx.cache.writer_lock(tx.run.run_id)
        try:
            tx.writer_lock = evict.retry_when_full(tx.cache, lock.acquire, during="take the writer lock")
            return
        except CacheBusyError as e:
            if time.monotonic() >= deadline:
                raise CacheBusyError(
                    f"cache '{tx.cache.name}': run {tx.run.run_id} waited {wait:g} s to commit and the "
                    f"writer lock is still held: {e.message}", expected="the writer lock within the wait",
                    actual=e.actual, fix=f"raise {settings.COMMIT_WAIT_S} (seconds) if commits take that long; "
                    f"{e.fix}", details=e.details) from None
        finally:
            tx.recovered += [b for b in lock.broke if b not in tx.recovered]
        if not tx.owned():
            raise tx.fenced_error("wait for the writer lock")
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, 0.5)


def rebase_on_current(tx) -> None:
    """Under the writer lock: finish a crashed commit (recovery), then, when another run committed
    since this one began, rebase onto the current version (Invariant 3)."""
    tx.recovered += recovery.recover_locked(tx.cache.root, tx.cache.name, tx.cache.paths, tx.cache.lease_s)
    try:
        current = tx.cache.snapshot(lease=False)
    except CorruptCacheError as e:      # a broken version is replaced, never merged
        log.warning("%s", e)
        current = None
    try:
        rebase_if_changed(tx, current, tx.base.version if tx.base is not None else None)
    finally:
        if current is not None:
            current.close()


def publish(tx) -> str:
    """The commit of ``tx`` after its first fencing check (Transaction.commit): staged files
    durable, writer lock, recovery, rebase when the base changed, publish. The writer lock is
    released in any case."""
    try:
        return _publish(tx)
    except BaseException:
        tx.release_writer_lock()     # never an exception that leaves the lock held
        raise


def _publish(tx) -> str:
    staged = tx.staged
    try:
        # Invariant 1: every file the manifest names is durable before the manifest exists. The
        # staged files are fsynced before the writer lock is taken (the lock is held for the
        # critical section only); what a rebase adds under the lock is a hard link of a
        # committed (durable) file or a copy fsynced when written (staged.py), and the names
        # are made durable by the directory fsync after the manifest.
        with tx.explaining("make the staged files durable"):
            staged.make_durable()
        take_lock(tx)
        tx.check_owned("commit")
        rebase_on_current(tx)
        m = staged.manifest(tx.run)
        data = mf.dumps(m)
        # Invariant 1: the manifest is written last, atomically (temp + fsync + rename + fsync).
        with tx.explaining("write the manifest"):
            evict.retry_when_full(tx.cache, lambda: fsops.write_file_atomic(
                staged.file_path(mf.MANIFEST), data, tx.cache.file_mode))
            fsops.fsync_dir(staged.path)
        # Invariant 4 (fencing): run lease and writer lock still ours, our staging still in place.
        tx.check_owned("commit")
        owner = tx.staging_owner()
        if owner.get("run_id") != tx.run.run_id:
            tx.state = "fenced"
            raise TransactionError("staging belongs to another run", expected=tx.run.run_id,
                                   actual=owner.get("run_id"), fix="rerun")
    except BaseException:
        if tx.state == "open":
            tx.state = "failed"
        raise
    p, moved, prev_id = tx.cache.paths, False, None
    try:
        if os.path.lexists(p.current):
            st = os.lstat(p.current)
            prev_id = (st.st_dev, st.st_ino)
            # Invariant 2: the previous version moves aside whole; readers fall back to .old.
            fsops.rename(p.current, p.old)
            moved = True
        # Invariant 4: our staging has a name only we use; if the next owner moved it away,
        # this rename fails (ENOENT) instead of publishing somebody else's staging.
        fsops.rename(staged.path, p.current)
    except BaseException as e:
        err = tx.explain(e, "commit") if isinstance(e, OSError) else e   # fenced / full
        tx.state = "fenced" if tx.state == "fenced" else "failed"
        if moved:
            try:   # Invariant 1: a commit that fails between the renames restores the previous
                fsops.rename(p.old, p.current)
            except OSError as e2:   # recovery restores it (current missing + .old present)
                log.warning("could not restore %s: %s", p.old, e2)
        if err is not e:
            raise err from e
        raise
    # Invariant 1: from here the new version is current; cleanup failures cannot unpublish it.
    tx.state, tx.version = "committed", m["version"]
    steps = [lambda: fsops.fsync_dir(tx.cache.root)]
    if moved:   # Invariant 2: .old is removed last, only once the new version is durable,
        # and only when it is still the directory this commit moved there
        steps += [lambda: _remove_old(tx, prev_id), lambda: fsops.fsync_dir(tx.cache.root)]
    for step in steps:
        try:
            step()
        except OSError as e:
            tx.warnings.append(f"commit cleanup: {e}")
            log.warning("cache '%s' committed; cleanup failed (recovery finishes it): %s",
                        tx.cache.name, e)
    tx.finish()
    evict.after_commit(tx.cache)   # the size budget; never raises, never undoes this commit
    return tx.version


def _remove_old(tx, prev_id) -> None:
    try:
        st = os.lstat(tx.cache.paths.old)
    except FileNotFoundError:
        return
    if (st.st_dev, st.st_ino) != prev_id:
        log.warning("cache '%s': %s is not the version this commit moved aside; left to recovery",
                    tx.cache.name, tx.cache.paths.old)
        return
    fsops.rmtree(tx.cache.paths.old)
