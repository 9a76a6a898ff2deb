"""The transaction of one run, on either medium: stage, check ownership before every write, commit
or discard. The engine half of the store's transaction (interface.Transaction); the medium gives
where to stage, how to carry, how to publish and what a full disk is (the cache's methods).

A run stages into its own fresh staging directory on this host (a folder: ``<root>/<name>.tmp/<id>/``
beside the committed version; a bucket: the local tier) under its **run lease**; the records of
what it staged are a public :class:`~.staged.StagedVersion` (``tx.staged``) that the commit and the
rebase (rebase.py) work on. Runs stage side by side; a folder's commit takes the **writer lock** for
its critical section only (``tx.writer_lock``). Nobody else ever writes into a run's staging.

Fencing (a run that lost its run lease, e.g. stopped past it, is **fenced**: it publishes nothing
and touches nobody's staging), the rules this engine keeps on both media:

* every staging write goes to this run's own directory, by a path under it;
* before every write and in the commit the run checks that its run lease is still its own, that
  its staging directory is still in place and, during a folder's commit, that the writer lock is
  its own (``check_owned``); a write that fails because a recovery moved its staging away is
  reported the same way (``explain``): "was fenced ... it lost its run lease";
* what a fenced run leaves is removed by whoever judges its lease stale (a folder's recovery, a
  bucket's collection), never by a live run's cleanup of someone else's.

What this does not guarantee: see Invariant 4 (interface.py).
"""
from __future__ import annotations

import contextlib
import logging

from ..errors import NoCommittedCacheError, TransactionError
from ..storage import fsops
from . import manifest as mf
from . import roots
from .file_checks import is_full
from .lease import RUN_LEASE, Lease
from .owner import owner_record
from .run_info import RunInfo, jsonable
from .snapshot import Snapshot
from .staged import StagedVersion
from .staging import StagingDir

log = logging.getLogger("seedreuse")


class Transaction:
    """Staging of one run. Single use: commit() publishes it, discard() drops it.

    The cache handle gives what differs between media (interface.Cache): ``staging_parent()``,
    ``carry`` (a hard link or a reference), ``publish`` (the commit protocol), ``retry_when_full``
    / ``storage_full`` (a full disk), ``staging_is_shared`` (may a fenced run's staging be another
    run's business now: a folder's yes, a bucket's local staging no)."""

    def __init__(self, cache, run: RunInfo, base: Snapshot | None, base_error, recovered: list[str],
                 base_head=None):
        self.cache, self.run = cache, run
        self.lease: Lease | None = None              # this run's run lease, set by begin()
        self.writer_lock: Lease | None = None        # a folder's writer lock, during commit() only
        self.base: Snapshot | None = base
        self.base_error = base_error
        # where the base and this run's commit stand in the cache's numbered commits, on a medium
        # that numbers them (a bucket's log head and record number; None on a folder)
        self.base_head, self.seq = base_head, None
        self.recovered: list[str] = list(recovered)
        self.rebased: str | None = None              # what the commit did when the base had changed
        self.keep_takes: int | None = None           # a segment run's take limit (rebase.py)
        self.state = "open"          # open | failed | committed | discarded | fenced
        self.version: str | None = None
        self.warnings: list[str] = []
        self._dir = StagingDir(cache.staging_parent(), dir_mode=cache.dir_mode, file_mode=cache.file_mode)
        self.staged = StagedVersion(self._dir, cache.name)
        self.staging_id, self.staging = self._dir.id, self._dir.path

    def _misuse(self, what: str) -> TransactionError:
        return TransactionError(f"transaction of cache '{self.cache.name}' is {self.state}: cannot {what}",
                                expected="an open transaction", actual=self.state, fix="begin() a new transaction")

    def create_staging(self) -> None:
        self._dir.create(owner_record(self.run.run_id, RUN_LEASE, self.cache.lease_s))

    def remove_staging(self) -> None:
        self._dir.remove()

    def staging_owner(self) -> dict:
        return self._dir.owner()

    def owned(self) -> bool:
        """Our run lease is still ours, our staging directory is still in place, and during the
        commit the writer lock is ours."""
        return self._lost() is None

    def _lost(self) -> str | None:
        """What this run no longer owns ("run lease", "staging directory", "writer lock"), or None."""
        if self.lease is None or not self.lease.held():
            return "run lease"
        if not self._dir.in_place():
            return "staging directory"
        if self.writer_lock is not None and not self.writer_lock.held():
            return "writer lock"
        return None

    def fenced_error(self, during: str, why: str | None = None) -> TransactionError:
        """The one error of a fenced run, on either medium: what it lost and why."""
        self.state = "fenced"
        lost = self._lost() or "run lease"
        beat = self.writer_lock if lost == "writer lock" else self.lease
        why = why or f"its {lost} was taken over (a recovery or collection judged it stale)"
        return TransactionError(
            f"run {self.run.run_id} was fenced on cache '{self.cache.name}' while trying to {during}: it lost "
            f"its {lost} ({why}); nothing it wrote is used",
            expected=f"the {lost} of this run", actual="taken over by another run",
            fix=f"the run stopped heartbeating for longer than the lease ({self.cache.lease_s:g} s): a paused or "
                "overloaded worker, a stalled shared filesystem or an unreachable object store. Rerun it; raise "
                "SEEDREUSE_LEASE_S if workers are paused that long on purpose",
            details={"lost": lost, "lease": str(self.lease.path) if self.lease is not None else None,
                     "cache": self.cache.name,
                     "heartbeat_error": repr(beat.heartbeat_error)
                     if beat is not None and beat.heartbeat_error else None})

    def check_owned(self, what: str) -> None:
        """The fencing check, before every staging write and in the commit."""
        if self.state != "open":
            raise self._misuse(what)
        if not self.owned():
            raise self.fenced_error(what)

    def explain(self, exc: BaseException, during: str) -> BaseException:
        """The error to report for ``exc`` raised while writing into staging: fenced when the run no
        longer owns its staging, a StorageFullError for ENOSPC/EDQUOT, else ``exc`` itself."""
        if self.state in ("open", "fenced") and not self.owned():
            return self.fenced_error(during)
        if is_full(exc):
            return self.cache.storage_full(exc, during)
        return exc

    @contextlib.contextmanager
    def writing(self, during: str):
        """Fence, then run a caller's own write into staging (e.g. a video encode at a
        stage_path() path); its failure is reported through explain()."""
        self.check_owned(during)
        with self.explaining(during):
            yield

    @contextlib.contextmanager
    def explaining(self, during: str):
        """A write of this module (already fenced by its caller), its failure through explain()."""
        try:
            yield
        except Exception as e:
            err = self.explain(e, during)
            if err is e:
                raise
            raise err from e

    def _write_value(self, fname: str, value) -> dict:
        # a full disk: what the medium frees (a folder's budget, a bucket's local tier), retried once
        with self.explaining(f"write {fname}"):
            return self.cache.retry_when_full(lambda: self.staged.write_value(fname, value))

    def carry_from(self, fname: str, src: str | None, source: Snapshot | None) -> None:
        """Make ``src`` of ``source`` (default: the base version) the file ``fname`` of this
        version (the medium's carry: a hard link or a copy on a folder, a reference on a bucket)."""
        source = source if source is not None else self.base
        if source is None:
            raise NoCommittedCacheError(
                f"cache '{self.cache.name}' has no committed version to carry '{fname}' from",
                expected="a committed base version", actual="none", fix="run without reuse first")
        with self.explaining(f"carry {fname}"):
            self.cache.carry(self.staged, fname, source, src or fname)

    def stage_slot(self, slot: str, value, *, key: dict, meta: dict | None = None) -> dict:
        self.check_owned("stage a slot")
        roots.validate_slot_name(slot)
        key, meta = jsonable(key, "slot key"), jsonable(meta or {}, "slot meta")
        fname = mf.slot_file(slot)
        entry = self._write_value(fname, value)
        self.staged.slots[slot] = {"file": fname, "key": key, "meta": meta}
        return entry

    def carry_slot(self, slot: str) -> None:
        """Keep the base version's slot (hard link; key and meta kept)."""
        self.check_owned("carry a slot")
        e = self.base.slot_entry(slot) if self.base is not None else None
        if e is None and self.base is not None:
            raise NoCommittedCacheError(f"cache '{self.cache.name}' has no slot '{slot}' to carry",
                                        expected=f"slot '{slot}'", actual=sorted(self.base.manifest["slots"]),
                                        fix="encode the slot instead")
        self.carry_from(mf.slot_file(roots.validate_slot_name(slot)), None, None)
        self.staged.slots[slot] = e

    def _boundary_index(self, i) -> str:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i <= mf.MAX_BOUNDARY:
            raise TransactionError("invalid boundary index", expected=f"int 0..{mf.MAX_BOUNDARY}",
                                   actual=repr(i), fix="pass the segment boundary number")
        return str(i)

    def stage_boundary(self, i: int, value, meta: dict | None = None) -> dict:
        self.check_owned("stage a boundary")
        idx = self._boundary_index(i)
        meta = jsonable(meta or {}, "boundary meta")
        entry = self._write_value(mf.boundary_file(i), value)
        self.staged.boundaries[idx] = {"file": mf.boundary_file(i), "meta": meta}
        return entry

    def carry_boundary(self, i: int, src: str | None = None, meta: dict | None = None) -> None:
        """Keep boundary ``i`` of the base version, or (``src``) make the base's plain value
        file ``src`` (e.g. a kept take's boundary) boundary ``i`` of the new version."""
        self.check_owned("carry a boundary")
        idx = self._boundary_index(i)
        e = self.base.manifest["boundaries"].get(idx) if self.base is not None and src is None else \
            {"file": mf.boundary_file(i), "meta": jsonable(meta or {}, "boundary meta")}
        if self.base is not None and (e is None or src is not None and not self.base.has_file(src)):
            raise NoCommittedCacheError(f"cache '{self.cache.name}' has no boundary {i} to carry", expected=f"boundary "
                                        f"{i}", actual=self.base.boundary_indices(), fix="reuse fewer prefix segments")
        self.carry_from(mf.boundary_file(i), src, None)
        self.staged.boundaries[idx] = jsonable(e, "boundary")

    def carry_file(self, fname: str, src: str | None = None) -> None:
        """Keep a plain file (e.g. result.mp4) of the base version (``src``: under another name)."""
        self.check_owned("carry a file")
        roots.validate_file_name(fname)
        if self.base is not None and not self.base.has_file(src or fname):
            raise NoCommittedCacheError(f"cache '{self.cache.name}' has no file '{src or fname}' to carry",
                                        expected=src or fname, actual=sorted(self.base.manifest["files"]),
                                        fix="produce the file in this run")
        self.carry_from(fname, src, None)

    def stage_path(self, fname: str) -> str:
        """A fresh path inside staging for the caller to write; then call add_file(fname)."""
        self.check_owned("stage a file")
        roots.validate_file_name(fname)
        if fname in mf.RESERVED:
            raise TransactionError(f"'{fname}' is reserved", expected="another file name",
                                   actual=fname, fix="pick another name")
        with self.explaining(f"stage {fname}"):
            return self.staged.reserve(fname)

    def discard_file(self, fname: str) -> None:
        """Remove a scratch file written at stage_path() that is not to be published."""
        self.check_owned("discard a file")
        roots.validate_file_name(fname)
        with self.explaining(f"discard {fname}"):
            self.staged.drop(fname)

    def add_file(self, fname: str) -> dict:
        """Record a file written at stage_path(fname): fsync it, record bytes and sha256."""
        self.check_owned("add a file")
        try:
            return self.staged.record(fname)
        except OSError as e:
            err = self.explain(e, f"add {fname}")
            if err is not e:
                raise err from None
            raise TransactionError(f"staged file '{fname}' cannot be opened ({e.strerror})",
                                   expected="a regular file at stage_path()", actual="missing or symlink",
                                   fix="write the file before add_file()") from None

    def set_section(self, name: str, body: dict) -> None:
        self.check_owned("set a section")
        roots.validate_slot_name(name)
        self.staged.sections[name] = jsonable(body, f"section '{name}'")

    def commit(self) -> str:
        """Publish the staging as the new committed version (the medium's commit protocol); returns
        its version id."""
        self.check_owned("commit")
        return self.cache.publish(self)

    def release_writer_lock(self) -> None:
        lock, self.writer_lock = self.writer_lock, None
        if lock is not None:
            try:
                lock.release()
            except OSError as e:
                self.warnings.append(f"lock release: {e}")
                log.warning("could not release the writer lock of cache '%s': %s", self.cache.name, e)

    def finish(self) -> None:
        """Base closed, writer lock released, then the run lease (after the staging was published
        or removed: a staging without a live run lease belongs to a dead run), then the staging's
        parent when nothing else is in it."""
        if self.base is not None:
            self.base.close()
        self.release_writer_lock()
        try:
            if self.lease is not None:
                self.lease.release()
            self._dir.remove_parent()
        except OSError as e:
            self.warnings.append(f"lease release: {e}")
            log.warning("could not release the run lease of cache '%s': %s", self.cache.name, e)

    def discard(self) -> bool:
        """Drop the staging and release the run lease; the committed version is untouched.

        Safe to call after a failure or twice; a no-op after commit.  Returns False when
        cleanup was incomplete (recovery at the next begin finishes it).
        """
        if self.state in ("committed", "discarded"):
            return True
        fenced = self.state == "fenced" or self.lease is None or not self.lease.held()
        self.state = "discarded"
        ok = True
        if not fenced or not self.cache.staging_is_shared:   # else the new owner's recovery cleans up
            try:
                self._dir.remove()
                fsops.fsync_dir(self._dir.parent.parent)
            except OSError as e:
                ok = False
                self.warnings.append(f"discard: {e}")
                log.warning("could not remove staging of cache '%s': %s", self.cache.name, e)
        self.finish()
        return ok

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.discard()
