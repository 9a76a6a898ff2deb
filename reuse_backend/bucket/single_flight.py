"""Single flight on a bucket: the same promise as store/single_flight.py, with objects.

The claim is ``claims/<slot>-<digest>.json``, created with ``If-None-Match: *`` (one holder), kept
by rewrites with ``If-Match`` on its own ETag, taken over from a stale holder with ``If-Match`` on
the stale ETag (one taker; leases.py). As soon as the holder has encoded, it uploads the value
(the data object its commit will name anyway: no second upload) and writes the entry
``claims/<slot>-<digest>.entry.json``, a one-slot commit record (records.py's format); a waiter
reads the entry, fetches the value into its local tier, and stages it as its own.

An entry is no version: the holder's failed prompt publishes nothing; the entry goes with the
claim, and its data object is collected with the holder's other objects once its lease is gone
(a waiter that fetches it too late gets a refused load and encodes itself).
"""
from __future__ import annotations

import logging
import time
import uuid

from ..errors import CorruptCacheError, ReuseError
from ..store import manifest as mf
from .. import settings
from ..store.single_flight import ClaimOutcome
from . import leases, records
from .client import NotFound, Precondition, TooLarge
from .snapshot import BucketSnapshot

log = logging.getLogger("seedreuse")

ENTRY_SEQ = 1        # an entry is a one-slot record; its number means nothing


def open_entry(cache, slot: str, digest: str):
    key = cache.keys.entry(slot, digest)
    try:
        obj = cache.client.get(key, records.MAX_RECORD_BYTES)
        rec = records.parse(obj.body, cache.keys, key, ENTRY_SEQ)
    except (NotFound, TooLarge):
        return None
    except CorruptCacheError as e:
        log.warning("seedreuse: single-flight entry %s is unusable: %s", key, e.message)
        return None
    return BucketSnapshot(cache, 0, rec) if rec["kind"] == "version" else None


class Claimed(ClaimOutcome):
    """A claim on a bucket (store/single_flight.ClaimOutcome: the rules both stores keep): the
    entry is a one-slot record object beside the claim object."""

    def _publish(self, tx, slot: str) -> bool:
        cache, staged, fname = self.cache, tx.staged, mf.slot_file(slot)
        try:
            entry = staged.files[fname]
            rel = cache.keys.data_rel(tx.run.run_id, entry["sha256"])
            cache.client.upload(str(staged.file_path(fname)), cache.keys.data(rel), entry["bytes"])
            staged.uploaded[fname] = rel
            m = {"schema": mf.SCHEMA, "name": cache.name, "version": uuid.uuid4().hex,
                 "created_at": time.time(), "run": tx.run.to_dict(), "slots": {slot: staged.slots[slot]},
                 "boundaries": {}, "sections": {}, "files": {fname: entry}}
            rec = records.make(ENTRY_SEQ, "version", m, {fname: rel}, tx.run.run_id)
            cache.client.put(cache.keys.entry(self.slot, self.digest), records.dumps(rec))
            return True
        except (ReuseError, OSError, KeyError) as e:
            log.warning("seedreuse: could not publish the encoding of slot '%s' of cache '%s' for waiting "
                        "runs (%s); they wait for the claim instead", slot, cache.name, e)
            return False

    def _release(self, lock) -> None:
        try:
            self.cache.client.delete(self.cache.keys.entry(self.slot, self.digest))
            lock.release()
        except ReuseError as e:      # a stale claim is taken over; a stale entry is harmless
            log.warning("seedreuse: could not release single-flight claim %s: %s", lock.key, e)


def _take(cache, key: str, run_id: str):
    """Our claim, or (None, holder) while a live run holds it."""
    owner = leases.body(run_id, "claim", cache.lease_s)
    lease = leases.RemoteLease(cache.client, key, owner, lease_s=cache.lease_s, heartbeat_s=cache.heartbeat_s)
    try:
        return lease.create(exclusive=True), None
    except Precondition:
        pass
    holder, obj = leases.read(cache.client, key)
    if obj is None:
        return None, {"run_id": "unknown (released just now)"}
    why = leases.stale_reason(holder, obj.modified, cache.client.server_now(), cache.lease_s)
    if why is None:
        return None, holder or {"run_id": "unknown"}
    who = f"run {(holder or {}).get('run_id')} on host {(holder or {}).get('host')}"
    try:
        return lease.take_over(obj.etag, why, who), None
    except (Precondition, NotFound):
        return None, holder or {"run_id": "unknown"}


def claim(cache, slot: str, digest: str, run_id: str, *, wait: float | None = None,
          poll_s: float = 0.2, on_wait=None) -> Claimed:
    wait = settings.single_flight_s() if wait is None else wait
    key = cache.keys.claim(slot, digest)
    deadline, t0, holder = time.monotonic() + wait, time.monotonic(), None
    while True:
        lock, busy = _take(cache, key, run_id)
        if lock is not None:
            return Claimed(cache, slot, digest, lock, holder, time.monotonic() - t0, open_entry(cache, slot, digest))
        holder = holder or busy
        entry = open_entry(cache, slot, digest)
        if entry is not None:
            return Claimed(cache, slot, digest, None, holder, time.monotonic() - t0, entry)
        if time.monotonic() >= deadline:
            log.info("seedreuse: cache '%s' slot '%s': gave up waiting %.0f s for run %s; encoding",
                     cache.name, slot, wait, holder.get("run_id"))
            return Claimed(cache, slot, digest, None, holder, time.monotonic() - t0)
        if on_wait is not None:
            on_wait()
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
