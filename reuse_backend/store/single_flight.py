"""Single flight: one run encodes a slot key, the runs that need the same key wait for its commit.

A run that is about to encode slot ``S`` with key digest ``D`` of a cache first takes the claim
``<name>.tmp/<S>-<D>.claim`` (run_lease.py's layout; a file in the writer lock's format: owner,
heartbeat, safe breaking, fenced release, lock.py). The run holds it until its prompt has
committed or failed. A run of another worker that needs exactly that slot key finds the claim
live and waits (``claim``) until it is released, at most ``SEEDREUSE_SINGLE_FLIGHT_S`` seconds
(default 300; 0 turns single flight off), and never past the holder's lease: a holder that died
or stalled has its claim broken like a stale lock. The waiter then takes the claim itself and
re-reads the committed version: the slot is there (the holder committed it: reuse it), or it is
not (the holder failed or died, or committed something else: the waiter encodes, holding the
claim, so the next waiters wait for it in turn).

What this does not guarantee: it saves work, it is not needed for correctness (every run can
encode and commit; commits are serialized, commit.py). A waiter that gave up (the bound) encodes
too. Waiting happens before the run's encoder runs, holding that worker's executor.
"""
from __future__ import annotations

import logging
import time

from ..errors import CacheBusyError
from . import env_settings, roots, run_lease
from .lock import WriterLock

log = logging.getLogger("seedreuse")

ENV_WAIT = "SEEDREUSE_SINGLE_FLIGHT_S"
DEFAULT_WAIT_S = 300.0


def wait_s() -> float:
    """The longest wait for another run's commit of the same slot key (0: no single flight)."""
    return env_settings.seconds(ENV_WAIT, DEFAULT_WAIT_S, allow_zero=True)


def claim_path(cache, slot: str, digest: str):
    roots.validate_slot_name(slot)
    tail = "".join(c for c in str(digest) if c.isalnum())[:32] or "nokey"
    return cache.paths.tmp / f"{slot}-{tail}{run_lease.CLAIM_SUFFIX}"


class Claimed:
    """The outcome of ``claim``: the claim (None when the wait ran out: encode without it), who
    held it while this run waited (None: nobody), and for how long it waited."""

    def __init__(self, lock: WriterLock | None, waited_for: dict | None, waited_s: float):
        self.lock, self.waited_for, self.waited_s = lock, waited_for, waited_s

    def release(self) -> None:
        lock, self.lock = self.lock, None
        if lock is not None:
            try:
                lock.release()
                run_lease.remove_if_empty(lock.path.parent)
            except OSError as e:      # it turns stale and is removed by the next recovery
                log.warning("could not release single-flight claim %s: %s", lock.path, e)


def claim(cache, slot: str, digest: str, run_id: str, *, wait: float | None = None,
          poll_s: float = 0.1, on_wait=None) -> Claimed:
    """Take the claim of (slot, key digest), waiting while a live run of another worker holds
    it (bounded, see the module docstring). ``on_wait()`` runs at every poll (an interrupt check)."""
    wait = wait_s() if wait is None else wait
    path = claim_path(cache, slot, digest)
    deadline, t0, holder = time.monotonic() + wait, time.monotonic(), None
    while True:
        try:
            lock = run_lease.acquire_file_lock(path, run_id, lease_s=cache.lease_s, heartbeat_s=cache.heartbeat_s,
                                               cache_name=cache.name, dir_mode=cache.dir_mode)
            return Claimed(lock, holder, time.monotonic() - t0)
        except CacheBusyError as e:
            holder = holder or (e.details.get("owner") or {"run_id": "unknown"})
            if time.monotonic() >= deadline:
                log.info("seedreuse: cache '%s' slot '%s': gave up waiting %.0f s for run %s (%s); encoding",
                         cache.name, slot, wait, holder.get("run_id"), ENV_WAIT)
                return Claimed(None, holder, time.monotonic() - t0)
        if on_wait is not None:
            on_wait()
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
