"""Single flight: one run encodes a slot key; the runs that need the same key wait for that
encoding, not for the rest of its prompt.

A run about to encode slot ``S`` with key digest ``D`` of a cache first takes the **claim**
``<name>.tmp/<S>-<D>.claim`` (a lease file, lock.py: owner, heartbeat, safe breaking). As soon as
its encoder has run and the value is staged, it **publishes the entry** ``<S>-<D>.entry/``: a
one-slot version (manifest + the staged value file, a hard link of it) written under a temp name
and renamed into place, so it appears complete or not at all. A run of another worker that needs
exactly that slot key finds the claim live and waits (``claim``) until the entry exists or the
claim is released, at most ``SEEDREUSE_SINGLE_FLIGHT_S`` (default 300 s; 0 turns single flight
off), and never past the holder's lease (a dead or stalled holder's claim is broken like a stale
lock). With an entry, the waiter uses that value (and stages it as its own: its commit publishes
it too); without one, it takes the claim itself and re-reads the committed version: the slot is
there (the holder committed it), or it encodes (the holder failed before encoding).

Why an entry and not the holder's commit: an encoding is valid whatever happens to the nodes
after it (its key describes it), and the holder's prompt may wait on the waiters themselves (an
orchestrator's collector gathering every worker's image): waiting for its commit stalls them all
until the bound. The entry is read from the holder's own staged file (no second write): it is
durable (fsynced by the stage) and immutable (a staged name is unlinked before it is staged again).
A failed prompt still publishes no version, take or segment: the entry is no version; it is
removed with the claim when the holder's prompt ends, and by recovery once its claim is gone.

What this does not guarantee: it saves work, it is not needed for correctness (every run can
encode and commit; commits are serialized, commit.py). A waiter that gave up (the bound) encodes
too. Waiting happens before the run's encoder runs, holding that worker's executor.
"""
from __future__ import annotations

import logging
import os
import time
import uuid

from ..errors import CacheBusyError, CorruptCacheError
from ..storage import fsops
from .. import settings
from . import manifest as mf, roots, run_lease
from .lock import CLAIM, LeaseFile
from .reader import open_version_dir

log = logging.getLogger("seedreuse")

def _stem(cache, slot: str, digest: str):
    roots.validate_slot_name(slot)
    tail = "".join(c for c in str(digest) if c.isalnum())[:32] or "nokey"
    return cache.paths.tmp / f"{slot}-{tail}"


def claim_path(cache, slot: str, digest: str):
    stem = _stem(cache, slot, digest)
    return stem.with_name(stem.name + run_lease.CLAIM_SUFFIX)


def entry_path(cache, slot: str, digest: str):
    stem = _stem(cache, slot, digest)
    return stem.with_name(stem.name + run_lease.ENTRY_SUFFIX)


def open_entry(cache, slot: str, digest: str):
    """The published entry of (slot, digest) as a one-slot Snapshot, or None (none yet, or broken:
    a broken entry is never used, the waiter encodes)."""
    try:
        return open_version_dir(cache, entry_path(cache, slot, digest), source="entry")
    except CorruptCacheError as e:
        log.warning("seedreuse: single-flight entry of slot '%s' in cache '%s' is unusable: %s",
                    slot, cache.name, e)
        return None


class ClaimOutcome:
    """The outcome of a store's ``claim`` (this folder store's and the bucket's): the claim
    (``lock``, None when another run holds it or the wait ran out), who held it while this run
    waited (None: nobody), for how long it waited, and a published encoding of the key
    (``entry``, a one-slot Snapshot): the live holder's, which ended the wait, or one a holder
    that died after encoding left (then this run holds the claim too). The rules both stores
    keep are here: an entry is published only while the claim is held; a release removes the
    entry before the claim, so a run that takes the claim next never finds a stale entry of ours.
    A store gives ``_publish`` and ``_release`` (both log a failure and never fail the run)."""

    def __init__(self, cache, slot: str, digest: str, lock, waited_for: dict | None, waited_s: float,
                 entry=None):
        self.cache, self.slot, self.digest = cache, slot, digest
        self.lock, self.waited_for, self.waited_s, self.entry = lock, waited_for, waited_s, entry

    def publish(self, tx, slot: str) -> bool:
        """Publish the slot ``tx`` just staged as this claim's entry (only while we hold the
        claim). Never fails the run: a failed publish is logged and the waiters wait on."""
        if self.lock is None or not self.lock.held():
            return False
        return self._publish(tx, slot)

    def close_entry(self) -> None:
        entry, self.entry = self.entry, None
        if entry is not None:
            entry.close()

    def release(self) -> None:
        """The entry first, then the claim (see the class docstring)."""
        self.close_entry()
        lock, self.lock = self.lock, None
        if lock is not None:
            self._release(lock)

    def _publish(self, tx, slot: str) -> bool:
        raise NotImplementedError

    def _release(self, lock) -> None:
        raise NotImplementedError


class Claimed(ClaimOutcome):
    """A claim on a folder: the entry is ``<S>-<D>.entry/`` beside the claim file."""

    lock: LeaseFile | None

    def _publish(self, tx, slot: str) -> bool:
        fname = mf.slot_file(slot)
        final = entry_path(self.cache, self.slot, self.digest)
        part = final.with_name(f"{final.name[:-len(run_lease.ENTRY_SUFFIX)]}{run_lease.ENTRY_PART}"
                               f"{uuid.uuid4().hex}")
        body = {"schema": mf.SCHEMA, "name": self.cache.name, "version": uuid.uuid4().hex,
                "created_at": time.time(), "run": tx.run.to_dict(),
                "slots": {slot: tx.staged.slots[slot]}, "boundaries": {}, "sections": {},
                "files": {fname: tx.staged.files[fname]}}
        try:
            fsops.mkdir(part, self.cache.dir_mode)
            fsops.link_or_copy(tx.staged.file_path(fname), part / fname)
            fsops.write_file_atomic(part / mf.MANIFEST, mf.dumps(body), self.cache.file_mode)
            fsops.fsync_dir(part)
            fsops.rename(part, final)
            fsops.fsync_dir(final.parent)
            return True
        except (OSError, CorruptCacheError) as e:
            log.warning("seedreuse: could not publish the encoding of slot '%s' of cache '%s' for "
                        "waiting runs (%s); they wait for the claim instead", slot, self.cache.name, e)
            try:
                fsops.rmtree(part)
            except OSError:
                pass                    # recovery removes it (an entry part older than the lease)
            return False

    def _release(self, lock: LeaseFile) -> None:
        """The entry moved aside and deleted, then the claim file released."""
        final = entry_path(self.cache, self.slot, self.digest)
        try:
            if os.path.lexists(final):
                aside = final.with_name(f"{run_lease.STALE_TAG}{uuid.uuid4().hex}")
                fsops.rename(final, aside)
                fsops.rmtree(aside)
        except OSError as e:          # recovery removes it once the claim is gone
            log.warning("could not remove single-flight entry %s: %s", final, e)
        try:
            lock.release()
            run_lease.remove_if_empty(lock.path.parent)
        except OSError as e:      # it turns stale and is removed by the next recovery
            log.warning("could not release single-flight claim %s: %s", lock.path, e)


def claim(cache, slot: str, digest: str, run_id: str, *, wait: float | None = None,
          poll_s: float = 0.1, on_wait=None) -> Claimed:
    """Take the claim of (slot, key digest), waiting while a live run of another worker holds it
    and has not published its encoding yet (bounded, see the module docstring). ``on_wait()``
    runs at every poll (an interrupt check)."""
    wait = settings.single_flight_s() if wait is None else wait
    path = claim_path(cache, slot, digest)
    deadline, t0, holder = time.monotonic() + wait, time.monotonic(), None
    while True:
        try:
            lock = run_lease.acquire_in_tmp(path, run_id, role=CLAIM, lease_s=cache.lease_s,
                                            heartbeat_s=cache.heartbeat_s, cache_name=cache.name,
                                            dir_mode=cache.dir_mode)
            # an entry left by a holder that died after encoding is still this key's encoding
            return Claimed(cache, slot, digest, lock, holder, time.monotonic() - t0,
                           open_entry(cache, slot, digest))
        except CacheBusyError as e:
            holder = holder or (e.details.get("owner") or {"run_id": "unknown"})
            entry = open_entry(cache, slot, digest)
            if entry is not None:
                return Claimed(cache, slot, digest, None, holder, time.monotonic() - t0, entry)
            if time.monotonic() >= deadline:
                log.info("seedreuse: cache '%s' slot '%s': gave up waiting %.0f s for run %s (%s); encoding",
                         cache.name, slot, wait, holder.get("run_id"), settings.SINGLE_FLIGHT_S)
                return Claimed(cache, slot, digest, None, holder, time.monotonic() - t0)
        if on_wait is not None:
            on_wait()
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))

