"""The staging of one run and its commit: only a fully successful run replaces the last good version.

Layout: ``<root>/<name>.tmp/<staging id>/`` is the staging directory of exactly one run (a
fresh random id per transaction), under that run's lease ``<staging id>.lease`` (run_lease.py).
Runs stage side by side without the writer lock; the lock (``<name>.lock``) is taken only for
the commit's critical section, waiting for it at most ``SEEDREUSE_COMMIT_WAIT_S`` (default:
the lease plus 60 s, so a dead committer's lock is broken first; commit.py). Nobody else ever writes into
a run's staging, so a writer that lost its lease (paused past it, say) cannot reach anyone's:

* fencing, 1: every staging write goes to this run's own directory, by a path under it;
* fencing, 2: recovery moves the staging of a run whose lease is stale away before deleting it,
  so that run's next create, rename or unlink fails (ENOENT) and is reported as "lost the
  writer lock";
* fencing, 3: before every write and at commit the run checks that its lease is still its own
  (same inode, same run id) and that its staging directory is still in place; during the
  commit also that the writer lock is its own.

Commit order (each step durable before the next; see the numbered invariants in commit()):
files fsynced -> writer lock -> recovery -> base changed? rebase (rebase.py) -> manifest written
last -> fence -> ``current -> .old`` -> ``staging -> current`` -> ``.old`` removed last -> lock
released -> lease released. Concurrent successes all commit, one after the other; the last one
is current, and a segment cache's take list is merged, never overwritten (rebase.py).
Correctness never depends on the lock alone: readers pin one directory, recovery decides from
what exists on disk.

What this does not guarantee: a writer paused for longer than its lease *between* its last
fence check and its commit renames (a window of two system calls) still publishes its own
staging, which is complete and consistent; readers then see that version or the next one,
never a mix. A commit that waited longer than SEEDREUSE_COMMIT_WAIT_S fails (CacheBusyError,
naming the holder); nothing of it is published.
"""
from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import time
import uuid
from pathlib import Path

from ..errors import NoCommittedCacheError, StorageFullError, TransactionError
from ..storage import fsops
from . import commit as committing, evict, manifest as mf
from . import roots
from .lock import WriterLock
from .reader import Snapshot, corrupt
from .run_info import RunInfo, jsonable
from .staging import StagingDir

# what a link from a version that was removed meanwhile fails with (store/transaction._carry)
_GONE = {errno.ENOENT, errno.ESTALE}

log = logging.getLogger("seedreuse")


_is_full = evict.is_full      # ENOSPC / EDQUOT
def storage_full(cache, exc: OSError, during: str) -> StorageFullError:
    """ENOSPC/EDQUOT as a typed error naming the root, its size, free space, budget and the fix
    (evict.py); the committed version is untouched (nothing of a failed run is published)."""
    return evict.storage_full(cache, exc, during)


class Transaction:
    """Staging of one run. Single use: commit() publishes it, discard() drops it."""

    def __init__(self, cache, run: RunInfo, base: Snapshot | None, base_error, recovered: list[str]):
        self.cache, self.run = cache, run
        self.lock: WriterLock | None = None          # this run's lease (run_lease.py), set by begin()
        self.commit_lock: WriterLock | None = None   # the writer lock, during commit() only
        self.base: Snapshot | None = base
        self.base_error = base_error
        self.recovered: list[str] = list(recovered)
        self.rebased: str | None = None              # what the commit did when the base had changed
        self.keep_takes: int | None = None           # a segment run's take limit (rebase.py)
        self.state = "open"          # open | failed | committed | discarded | fenced
        self.version: str | None = None
        self.warnings: list[str] = []
        self._files: dict[str, dict] = {}
        self._slots: dict[str, dict] = {}
        self._boundaries: dict[str, dict] = {}
        self._sections: dict[str, dict] = {}
        self._pending: set[str] = set()
        self._dir = StagingDir(cache.paths.tmp, dir_mode=cache.dir_mode, file_mode=cache.file_mode)
        self.staging_id, self.staging = self._dir.id, self._dir.path

    def _misuse(self, what: str) -> TransactionError:
        return TransactionError(f"transaction of cache '{self.cache.name}' is {self.state}: cannot {what}",
                                expected="an open transaction", actual=self.state, fix="begin() a new transaction")

    def _create_staging(self) -> None:
        self._dir.create({"run_id": self.run.run_id, "host": self.run.host, "pid": self.run.pid})

    def owned(self) -> bool:
        """Our lease is still ours, our staging directory is still in place, and during the
        commit the writer lock is ours."""
        return (self.lock is not None and self.lock.held() and self._dir.in_place()
                and (self.commit_lock is None or self.commit_lock.held()))

    def _fenced_error(self, during: str) -> TransactionError:
        self.state = "fenced"
        lease = f"{self.cache.lease_s:g} s"
        return TransactionError(
            f"run {self.run.run_id} lost the writer lock of cache '{self.cache.name}' "
            f"(while trying to {during}); nothing it wrote is used",
            expected="the lock and staging of this run", actual="taken over by another run",
            fix=f"the run stopped heartbeating for longer than the lease ({lease}): a paused or "
                "overloaded worker, or a stalled shared filesystem. Rerun it; raise "
                "SEEDREUSE_LEASE_S if workers are paused that long on purpose",
            details={"lock": str(self.cache.paths.lock), "cache": self.cache.name,
                     "heartbeat_error": repr(self.lock.heartbeat_error)
                     if self.lock is not None and self.lock.heartbeat_error else None})

    def _fence(self, what: str) -> None:
        """Fencing, 3: checked before every staging write and twice in commit()."""
        if self.state != "open":
            raise self._misuse(what)
        if not self.owned():
            raise self._fenced_error(what)

    def explain(self, exc: BaseException, during: str) -> BaseException:
        """The error to report for ``exc`` raised while writing into staging: a lost writer
        lock when the run no longer owns its staging (fencing, 2), a StorageFullError for
        ENOSPC/EDQUOT, else ``exc`` itself."""
        if self.state in ("open", "fenced") and not self.owned():
            return self._fenced_error(during)
        if _is_full(exc):
            return storage_full(self.cache, exc, during)
        return exc

    @contextlib.contextmanager
    def writing(self, during: str):
        """Fence, then run a caller's own write into staging (e.g. a video encode at a
        stage_path() path); its failure is reported through explain()."""
        self._fence(during)
        try:
            yield
        except Exception as e:
            err = self.explain(e, during)
            if err is e:
                raise
            raise err from e

    def _path(self, fname: str) -> Path:
        return self._dir.file(fname)

    def _write_value(self, fname: str, value) -> dict:
        self._files.pop(fname, None)
        try:
            # ENOSPC: evict what the budget allows, retry once (evict.py)
            entry = evict.retry_when_full(self.cache, lambda: self._dir.write_value(fname, value))
        except OSError as e:          # ENOENT: our staging was moved away (fenced); ENOSPC
            err = self.explain(e, f"write {fname}")
            if err is e:
                raise
            raise err from e
        self._files[fname] = entry
        return entry

    def _carry(self, fname: str, src: str | None = None, source: Snapshot | None = None) -> None:
        """Hard-link the file ``src`` (default: the same name) of the base version (or of
        ``source``, rebase.py) as ``fname``. When that version was removed meanwhile (another
        run's commit replaced it, an eviction), the file is copied from the snapshot's pinned
        descriptor: the run's version stays complete whatever happened to its base."""
        source = source if source is not None else self.base
        if source is None:
            raise NoCommittedCacheError(
                f"cache '{self.cache.name}' has no committed version to carry '{fname}' from",
                expected="a committed base version", actual="none", fix="run without reuse first")
        src = src or fname
        entry = dict(source.manifest["files"][src])
        fd = source._fd(src)
        self._files.pop(fname, None)
        try:
            try:
                size = self._dir.link_from(fname, source._dfd, src)
            except OSError as e:
                # the version is gone: ENOENT here, ESTALE on a network filesystem whose other
                # client removed it (seen on GlusterFS); our own staging gone is fencing instead
                if e.errno not in _GONE or not self._dir.in_place():
                    raise
                size = self._dir.copy_from_fd(fname, fd)
        except OSError as e:
            err = self.explain(e, f"carry {fname}")
            if err is e:
                raise
            raise err from e
        if size != entry["bytes"]:
            raise corrupt(self.cache.name, f"carried {fname} has the wrong size",
                           expected=entry["bytes"], actual=size)
        self._files[fname] = entry

    def stage_slot(self, slot: str, value, *, key: dict, meta: dict | None = None) -> dict:
        self._fence("stage a slot")
        roots.validate_slot_name(slot)
        key, meta = jsonable(key, "slot key"), jsonable(meta or {}, "slot meta")
        fname = mf.slot_file(slot)
        entry = self._write_value(fname, value)
        self._slots[slot] = {"file": fname, "key": key, "meta": meta}
        return entry

    def carry_slot(self, slot: str) -> None:
        """Keep the base version's slot (hard link; key and meta kept)."""
        self._fence("carry a slot")
        e = self.base.slot_entry(slot) if self.base is not None else None
        if e is None and self.base is not None:
            raise NoCommittedCacheError(f"cache '{self.cache.name}' has no slot '{slot}' to carry",
                                        expected=f"slot '{slot}'", actual=sorted(self.base.manifest["slots"]),
                                        fix="encode the slot instead")
        self._carry(mf.slot_file(roots.validate_slot_name(slot)))
        self._slots[slot] = e

    def _boundary_index(self, i) -> str:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i <= mf.MAX_BOUNDARY:
            raise TransactionError("invalid boundary index", expected=f"int 0..{mf.MAX_BOUNDARY}",
                                   actual=repr(i), fix="pass the segment boundary number")
        return str(i)

    def stage_boundary(self, i: int, value, meta: dict | None = None) -> dict:
        self._fence("stage a boundary")
        idx = self._boundary_index(i)
        meta = jsonable(meta or {}, "boundary meta")
        entry = self._write_value(mf.boundary_file(i), value)
        self._boundaries[idx] = {"file": mf.boundary_file(i), "meta": meta}
        return entry

    def carry_boundary(self, i: int, src: str | None = None, meta: dict | None = None) -> None:
        """Keep boundary ``i`` of the base version, or (``src``) make the base's plain value
        file ``src`` (e.g. a kept take's boundary) boundary ``i`` of the new version."""
        self._fence("carry a boundary")
        idx = self._boundary_index(i)
        e = self.base.manifest["boundaries"].get(idx) if self.base is not None and src is None else \
            {"file": mf.boundary_file(i), "meta": jsonable(meta or {}, "boundary meta")}
        if self.base is not None and (e is None or src is not None and not self.base.has_file(src)):
            raise NoCommittedCacheError(f"cache '{self.cache.name}' has no boundary {i} to carry", expected=f"boundary "
                                        f"{i}", actual=self.base.boundary_indices(), fix="reuse fewer prefix segments")
        self._carry(mf.boundary_file(i), src)
        self._boundaries[idx] = json.loads(json.dumps(e))

    def carry_file(self, fname: str, src: str | None = None) -> None:
        """Keep a plain file (e.g. result.mp4) of the base version (``src``: under another name)."""
        self._fence("carry a file")
        roots.validate_file_name(fname)
        if self.base is not None and not self.base.has_file(src or fname):
            raise NoCommittedCacheError(f"cache '{self.cache.name}' has no file '{src or fname}' to carry",
                                        expected=src or fname, actual=sorted(self.base.manifest["files"]),
                                        fix="produce the file in this run")
        self._carry(fname, src)

    def stage_path(self, fname: str) -> str:
        """A fresh path inside staging for the caller to write; then call add_file(fname)."""
        self._fence("stage a file")
        roots.validate_file_name(fname)
        if fname in mf.RESERVED:
            raise TransactionError(f"'{fname}' is reserved", expected="another file name",
                                   actual=fname, fix="pick another name")
        self._files.pop(fname, None)
        self._dir.drop(fname)
        self._pending.add(fname)
        return str(self._path(fname))

    def discard_file(self, fname: str) -> None:
        """Remove a scratch file written at stage_path() that is not to be published."""
        self._fence("discard a file")
        roots.validate_file_name(fname)
        self._pending.discard(fname)
        self._files.pop(fname, None)
        self._dir.drop(fname)

    def add_file(self, fname: str) -> dict:
        """Record a file written at stage_path(fname): fsync it, record bytes and sha256."""
        self._fence("add a file")
        if fname not in self._pending:
            raise TransactionError(f"add_file('{fname}') without stage_path('{fname}')",
                                   expected="stage_path first", actual=fname,
                                   fix="write the file at the path stage_path() returned")
        try:
            entry = self._dir.record(fname)
        except OSError as e:
            err = self.explain(e, f"add {fname}")
            if err is not e:
                raise err from None
            raise TransactionError(f"staged file '{fname}' cannot be opened ({e.strerror})",
                                   expected="a regular file at stage_path()", actual="missing or symlink",
                                   fix="write the file before add_file()") from None
        self._pending.discard(fname)
        self._files[fname] = entry
        return entry

    def set_section(self, name: str, body: dict) -> None:
        self._fence("set a section")
        roots.validate_slot_name(name)
        self._sections[name] = jsonable(body, f"section '{name}'")

    def _manifest(self) -> dict:
        return {"schema": mf.SCHEMA, "name": self.cache.name, "version": uuid.uuid4().hex,
                "created_at": time.time(), "run": self.run.to_dict(),
                "slots": self._slots, "boundaries": self._boundaries, "sections": self._sections,
                "files": self._files}

    def commit(self) -> str:
        """Publish the staging as the new committed version; returns its version id. Takes the
        writer lock for the critical section only (bounded wait), and releases it in any case."""
        self._fence("commit")
        try:
            return committing.publish(self)
        except BaseException:
            committing.release_lock(self)     # never an exception that leaves the lock held
            raise

    def _finish(self) -> None:
        """Base closed, writer lock released, then the lease (after the staging was published
        or removed: run_lease.py's invariant), then ``.tmp`` when nothing else is in it."""
        if self.base is not None:
            self.base.close()
        committing.release_lock(self)
        try:
            if self.lock is not None:
                self.lock.release()
            self._dir.remove_parent()
        except OSError as e:
            self.warnings.append(f"lease release: {e}")
            log.warning("could not release the run lease of cache '%s': %s", self.cache.name, e)

    def discard(self) -> bool:
        """Drop the staging and release the lock; the committed version is untouched.

        Safe to call after a failure or twice; a no-op after commit.  Returns False when
        cleanup was incomplete (recovery at the next begin finishes it).
        """
        if self.state in ("committed", "discarded"):
            return True
        fenced = self.state == "fenced" or self.lock is None or not self.lock.held()
        self.state = "discarded"
        ok = True
        if not fenced:        # a fenced run leaves cleanup to the new owner's recovery
            try:
                self._dir.remove()
                fsops.fsync_dir(self.cache.root)
            except OSError as e:
                ok = False
                self.warnings.append(f"discard: {e}")
                log.warning("could not remove staging of cache '%s': %s", self.cache.name, e)
        self._finish()
        return ok

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.discard()
