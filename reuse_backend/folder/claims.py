"""Single flight on a folder: the claim board (store/claim.py's ``ClaimBoard``) of one cache.

The claim of slot ``S`` with key digest ``D`` is the lease file ``<name>.tmp/<S>-<D>.claim``; its
entry is ``<S>-<D>.entry/``, a one-slot version (manifest + the staged value file, a hard link of
it) written under a temp name and renamed into place, so it appears complete or not at all. The
entry is read from the holder's own staged file (no second write): it is durable (fsynced by the
stage) and immutable (a staged name is unlinked before it is staged again). A failed prompt still
publishes no version: the entry is no version; it is removed with the claim, and by recovery once
its claim is gone (run_lease.py).
"""
from __future__ import annotations

import logging
import os
import uuid

from ..errors import CorruptCacheError, ReuseError
from ..storage import fsops
from ..store import manifest as mf, roots
from ..store.lease import CLAIM, Lease
from . import run_lease
from .reader import open_version_dir

log = logging.getLogger("seedreuse")


class FolderClaims:
    """The claims and entries of one cache, beside its runs' staging in ``<name>.tmp/``."""

    poll_s = 0.1

    def __init__(self, cache):
        self.cache = cache

    def _stem(self, slot: str, digest: str):
        roots.validate_slot_name(slot)
        tail = "".join(c for c in str(digest) if c.isalnum())[:32] or "nokey"
        return self.cache.paths.tmp / f"{slot}-{tail}"

    def claim_path(self, slot: str, digest: str):
        stem = self._stem(slot, digest)
        return stem.with_name(stem.name + run_lease.CLAIM_SUFFIX)

    def entry_path(self, slot: str, digest: str):
        stem = self._stem(slot, digest)
        return stem.with_name(stem.name + run_lease.ENTRY_SUFFIX)

    def lease(self, slot: str, digest: str, run_id: str) -> Lease:
        return run_lease.in_tmp(self.claim_path(slot, digest), run_id, CLAIM, self.cache)

    def open_entry(self, slot: str, digest: str):
        """The published entry as a one-slot snapshot, or None (none yet, or broken: a broken entry
        is never used, the waiter encodes)."""
        try:
            return open_version_dir(self.cache, self.entry_path(slot, digest), source="entry")
        except CorruptCacheError as e:
            log.warning("seedreuse: single-flight entry of slot '%s' in cache '%s' is unusable: %s",
                        slot, self.cache.name, e)
            return None

    def publish_entry(self, slot: str, digest: str, tx, staged_slot: str) -> None:
        staged, fname = tx.staged, mf.slot_file(staged_slot)
        final = self.entry_path(slot, digest)
        part = final.with_name(f"{final.name[:-len(run_lease.ENTRY_SUFFIX)]}{run_lease.ENTRY_PART}{uuid.uuid4().hex}")
        try:
            fsops.mkdir(part, self.cache.dir_mode)
            fsops.link_or_copy(staged.file_path(fname), part / fname)
            data = mf.dumps(staged.manifest(tx.run, only_slot=staged_slot))
            fsops.write_file_atomic(part / mf.MANIFEST, data, self.cache.file_mode)
            fsops.fsync_dir(part)
            fsops.rename(part, final)
            fsops.fsync_dir(final.parent)
        except (OSError, ReuseError):
            try:
                fsops.rmtree(part)
            except OSError:
                pass                    # recovery removes it (an entry part whose claim is gone)
            raise

    def remove_entry(self, slot: str, digest: str) -> None:
        """The entry moved aside, then deleted (a waiter that opened it keeps its pinned files)."""
        final = self.entry_path(slot, digest)
        if os.path.lexists(final):
            aside = final.with_name(f"{run_lease.STALE_TAG}{uuid.uuid4().hex}")
            fsops.rename(final, aside)
            fsops.rmtree(aside)
