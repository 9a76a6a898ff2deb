"""Single flight on a bucket: the claim board (store/claim.py's ``ClaimBoard``) of one cache.

The claim is ``claims/<slot>-<digest>.json``, a lease object (leases.py: created with
``If-None-Match: *``, taken over from a stale holder with ``If-Match``). As soon as the holder has
encoded, it uploads the value (the data object its commit names anyway: no second upload) and
writes the entry ``claims/<slot>-<digest>.entry.json``, a one-slot commit record (records.py's
format); a waiter reads the entry, fetches the value into its local tier, and stages it as its own.
An entry is no version: the holder's failed prompt publishes nothing; the entry goes with the
claim, and its data object is collected with the holder's other objects once its lease is gone
(a waiter that fetches it too late gets a refused load and encodes itself).
"""
from __future__ import annotations

import logging

from ..errors import CorruptCacheError
from ..store import manifest as mf
from ..store.lease import CLAIM, Lease
from . import records
from .client import NotFound, TooLarge
from .leases import ObjectLeases
from .snapshot import BucketSnapshot

log = logging.getLogger("seedreuse")

ENTRY_SEQ = 1        # an entry is a one-slot record; its number means nothing


class BucketClaims:
    """The claims and entries of one cache (``claims/`` under it)."""

    poll_s = 0.2

    def __init__(self, cache):
        self.cache = cache

    def lease(self, slot: str, digest: str, run_id: str) -> Lease:
        c = self.cache
        return Lease(ObjectLeases(c.client), c.keys.claim(slot, digest), run_id, CLAIM, lease_s=c.lease_s,
                     heartbeat_s=c.heartbeat_s, cache_name=c.name)

    def open_entry(self, slot: str, digest: str):
        key = self.cache.keys.entry(slot, digest)
        try:
            obj = self.cache.client.get(key, records.MAX_RECORD_BYTES)
            rec = records.parse(obj.body, self.cache.keys, key, ENTRY_SEQ)
        except (NotFound, TooLarge):
            return None
        except CorruptCacheError as e:
            log.warning("seedreuse: single-flight entry %s is unusable: %s", key, e.message)
            return None
        return BucketSnapshot(self.cache, 0, rec) if rec["kind"] == "version" else None

    def publish_entry(self, slot: str, digest: str, tx, staged_slot: str) -> None:
        cache, staged, fname = self.cache, tx.staged, mf.slot_file(staged_slot)
        entry = staged.files[fname]
        rel = cache.keys.data_rel(tx.run.run_id, entry["sha256"])
        cache.client.upload(str(staged.file_path(fname)), cache.keys.data(rel), entry["bytes"])
        staged.refs[fname] = rel           # uploaded: the commit names this object, uploads it no more
        m = staged.manifest(tx.run, only_slot=staged_slot)
        cache.client.put(cache.keys.entry(slot, digest),
                         records.dumps(records.make(ENTRY_SEQ, "version", m, {fname: rel}, tx.run.run_id)))

    def remove_entry(self, slot: str, digest: str) -> None:
        self.cache.client.delete(self.cache.keys.entry(slot, digest))
