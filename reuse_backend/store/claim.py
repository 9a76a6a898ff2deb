"""Single flight: one run encodes a slot key; the runs that need the same key wait for that
encoding, not for the rest of its prompt. The claim loop and its rules, written once for both media.

A run about to encode slot ``S`` with key digest ``D`` first takes the **claim** of (S, D): a lease
(lease.py) in the role "claim". As soon as its encoder has run and the value is staged, it
**publishes the entry**: a one-slot version holding that value, complete or not at all. A run of
another worker that needs exactly that slot key finds the claim live and waits (``claim``) until
the entry exists or the claim is released, at most ``SEEDREUSE_SINGLE_FLIGHT_S`` (default 300 s;
0 turns single flight off) and never past the holder's lease (a dead or stalled holder's claim is
taken over like any stale lease). With an entry, the waiter uses that value (and stages it as its
own: its commit publishes it too); without one, it holds the claim itself and re-reads the
committed version: the slot is there (the holder committed it), or it encodes.

Why an entry and not the holder's commit: an encoding is valid whatever happens to the nodes
after it (its key describes it), and the holder's prompt may wait on the waiters themselves (an
orchestrator's collector gathering every worker's image): waiting for its commit stalls them all.

The rules, enforced here: an entry is published only while the claim is held; a release removes
the entry before the claim, so a run that takes the claim next never finds a stale entry of ours;
a failure to publish or release is logged and never fails the run. A medium gives the claim's
lease, and opens, publishes and removes its entry (``ClaimBoard``).

What this does not guarantee: it saves work, it is not needed for correctness (every run can
encode and commit; commits are serialized). A waiter that gave up (the bound) encodes too; a name
that can never be a claim (refused by the medium) turns single flight off for that key. Waiting
happens before the run's encoder runs, holding that worker's executor.
"""
from __future__ import annotations

import logging
import time
from typing import Protocol

from .. import settings
from ..errors import CacheBusyError, CorruptCacheError, ReuseError
from .lease import Lease

log = logging.getLogger("seedreuse")


class ClaimBoard(Protocol):
    """What a medium gives for single flight (folder/claims.py, bucket/claims.py)."""

    poll_s: float        # how often a waiter looks again
    def lease(self, slot: str, digest: str, run_id: str) -> Lease:
        """The claim of (slot, digest) as a lease, not yet acquired."""

    def open_entry(self, slot: str, digest: str):
        """The published entry as a one-slot snapshot, or None (none yet, or unusable)."""

    def publish_entry(self, slot: str, digest: str, tx, staged_slot: str) -> None:
        """Publish the slot ``tx`` just staged as the entry (raises on failure)."""

    def remove_entry(self, slot: str, digest: str) -> None:
        """Remove the entry (raises on failure)."""


class Claim:
    """The outcome of ``claim``: the claim's lease when this run holds it (``held``), who held it
    while this run waited (None: nobody), for how long it waited, and a published encoding of the
    key (``entry``, a one-slot snapshot): the live holder's, which ended the wait, or one that a
    holder who died after encoding left (then this run holds the claim too)."""

    def __init__(self, board: ClaimBoard, slot: str, digest: str, lease: Lease | None, waited_for: dict | None,
                 waited_s: float, entry=None):
        self.board, self.slot, self.digest = board, slot, digest
        self.lease, self.waited_for, self.waited_s, self.entry = lease, waited_for, waited_s, entry

    @property
    def held(self) -> bool:
        return self.lease is not None

    def publish(self, tx, slot: str) -> bool:
        """Publish the slot ``tx`` just staged as this claim's entry (only while we hold the claim).
        Never fails the run: a failed publish is logged and the waiters wait on."""
        if self.lease is None or not self.lease.held():
            return False
        try:
            self.board.publish_entry(self.slot, self.digest, tx, slot)
            return True
        except (ReuseError, OSError, KeyError) as e:
            log.warning("seedreuse: could not publish the encoding of slot '%s' for waiting runs (%s); they "
                        "wait for the claim instead", slot, e)
            return False

    def close_entry(self) -> None:
        entry, self.entry = self.entry, None
        if entry is not None:
            entry.close()

    def release(self) -> None:
        """The entry first, then the claim (the rules above)."""
        self.close_entry()
        lease, self.lease = self.lease, None
        if lease is None:
            return
        try:
            self.board.remove_entry(self.slot, self.digest)
        except (ReuseError, OSError) as e:       # removed with the claim by the next recovery
            log.warning("seedreuse: could not remove the single-flight entry of slot '%s': %s", self.slot, e)
        try:
            lease.release()
        except (ReuseError, OSError) as e:       # it turns stale and is removed by the next recovery
            log.warning("seedreuse: could not release the single-flight claim %s: %s", lease.path, e)


def claim(cache, slot: str, digest: str, run_id: str, *, wait: float | None = None, on_wait=None) -> Claim:
    """Take the claim of (slot, key digest), waiting while a live run of another worker holds it and
    has not published its encoding yet (bounded, see the module docstring). ``on_wait()`` runs at
    every poll (an interrupt check). A full disk or store is the cache's StorageFullError."""
    board: ClaimBoard = cache.claims
    wait = settings.single_flight_s() if wait is None else wait
    deadline, t0, holder = time.monotonic() + wait, time.monotonic(), None
    while True:
        lease = board.lease(slot, digest, run_id)
        try:
            cache.retry_when_full(lease.acquire, during=f"take the single-flight claim of slot '{slot}'")
            # an entry left by a holder that died after encoding is still this key's encoding
            return Claim(board, slot, digest, lease, holder, time.monotonic() - t0, board.open_entry(slot, digest))
        except CacheBusyError as e:
            holder = holder or (e.details.get("owner") or {"run_id": "unknown"})
        except CorruptCacheError as e:            # a name that can never be a claim: no single flight
            log.warning("seedreuse: %s; encoding without single flight", e.message)
            return Claim(board, slot, digest, None, None, time.monotonic() - t0)
        entry = board.open_entry(slot, digest)
        if entry is not None:
            return Claim(board, slot, digest, None, holder, time.monotonic() - t0, entry)
        if time.monotonic() >= deadline:
            log.info("seedreuse: cache '%s' slot '%s': gave up waiting %.0f s for run %s (%s); encoding",
                     cache.name, slot, wait, holder.get("run_id"), settings.SINGLE_FLIGHT_S)
            return Claim(board, slot, digest, None, holder, time.monotonic() - t0)
        if on_wait is not None:
            on_wait()
        time.sleep(min(board.poll_s, max(0.0, deadline - time.monotonic())))
