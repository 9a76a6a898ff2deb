"""One named cache on a bucket: the object store's side of the store interface (interface.Cache).

``BucketCache`` answers what a folder's cache answers (snapshot, begin, claim, clear,
recover_leftovers, and the primitives the engine uses), so nodes/, media/ and the cache tool never
know which medium serves them (reuse_backend/stores.py picks it from the location). Its keys are in
location.py, its commit log in log.py/records.py, its commit in commit.py, its leases in leases.py,
its claims in claims.py, what is collected and when in collect.py, the local tier in local_tier.py.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid

from .. import settings
from ..errors import CacheBusyError, CorruptCacheError, ReuseError, StorageFullError
from ..storage import fsops
from ..store import file_checks, roots
from ..store.claim import claim as take_claim
from ..store.lease import READER_LEASE, RUN_LEASE, Lease
from ..store.owner import hostname
from ..store.run_info import RunInfo
from ..store.transaction import Transaction
from . import budget, client as clients, collect, commit, location, log as commit_log, probe
from .claims import BucketClaims
from .leases import ObjectLeases
from .local_tier import LocalTier
from .snapshot import BucketSnapshot

log = logging.getLogger("seedreuse")

USE_EVERY_S = 60.0          # a host records a hit on a cache at most this often (the budget's LRU)
_USED: dict[str, float] = {}
_USED_GUARD = threading.Lock()


class BucketCache:
    """interface.Cache on a bucket. Invariant by invariant (docs/ARCHITECTURE.md, "Invariants"):
    1: data objects are named by nothing until one conditional create of the commit record (commit.py, log.py);
    2: a record names every object; objects are immutable, content-addressed, checked on fetch (local_tier.py);
    3: If-None-Match on the next record number; the loser rebases and tries the next one (commit.py);
    4: a collection writes a fence record naming stale runs before deleting anything of theirs (collect.py);
    5: the claim is a lease object, its entry a one-slot record beside it (claims.py);
    6: a collection keeps every version from the oldest live lease's base on, and what live runs uploaded;
    7: keys parsed back into their parts (location.py), records and leases validated, reads bounded."""

    staging_is_shared = False     # the local staging is this host's run's alone, even once it is fenced

    def __init__(self, url: str, name: str, *, local_root=None, lease_s: float | None = None,
                 heartbeat_s: float | None = None):
        self.name = roots.validate_cache_name(name)
        self.loc = location.parse(url)
        self.root = self.loc.url
        self.keys = self.loc.cache(self.name)
        self.client = clients.for_bucket(self.loc.bucket)
        probe.ensure(self.client, self.loc)          # at first use: the endpoint keeps the promises
        self.local_root = roots.resolve_root(local_root)
        self.tier = LocalTier(self.local_root, self.loc.store_id())
        self.lease_s = float(lease_s) if lease_s is not None else settings.lease_s()
        self.heartbeat_s = float(heartbeat_s) if heartbeat_s is not None else min(10.0, self.lease_s / 4)
        self.dir_mode, self.file_mode = 0o755, 0o644
        self.gone: str | None = None
        self.claims = BucketClaims(self)

    def __repr__(self) -> str:
        return f"BucketCache({self.root!r}, {self.name!r})"

    # ------------------------------------------------------------------ reading
    def _lease(self, key: str, role: str, since: int | None, run_id: str, *, exact: bool = False) -> Lease:
        return Lease(ObjectLeases(self.client), key, run_id, role, lease_s=self.lease_s,
                     heartbeat_s=self.heartbeat_s, cache_name=self.name, extra={"since": since, "exact": exact})

    def reader_lease(self, since: int) -> Lease:
        """A reader lease (before any download of version ``since``: snapshot.py)."""
        rid = uuid.uuid4().hex
        return self._lease(self.keys.reader(rid), READER_LEASE, since, rid, exact=True).acquire(exclusive=False)

    def current(self, *, lease: bool = True):
        """(head, record, reader lease or None) of the newest record; (None, None, None) when the
        cache was never committed. One LIST when this host holds the newest version entirely and
        the record it remembers is still there as it was (log.py: a wiped prefix, a re-created
        bucket, another endpoint or a replica that is behind is noticed, and what this host
        remembered is dropped); otherwise (``lease``) a reader lease is taken and the record
        confirmed newest after it exists (snapshot.py's invariant), retried when a commit lands
        in between."""
        head, rec = self.tier.record(self.keys)
        for _ in range(8):
            seen = commit_log.look(self.client, self.keys, head)
            if seen.went_back:
                log.warning("seedreuse: cache '%s': commit record %s that this host remembered is no longer in "
                            "%s (the prefix was wiped or the store changed); using what the bucket holds",
                            self.name, head.seq, self.root)
            if seen.known_gone:
                self.tier.forget(self.keys)
                head, rec = None, None
            if seen.head is None:
                return None, None, None
            if seen.record is not None:
                head, rec = seen.head, seen.record
                self.tier.remember(self.keys, head, rec)
            if rec["kind"] == "cleared" or not lease or self.tier.holds(rec["manifest"]):
                return head, rec, None
            reader = self.reader_lease(head.seq)
            try:
                again = commit_log.look(self.client, self.keys, head)
            except BaseException:
                reader.release()
                raise
            if not again.known_gone and again.record is None:
                return head, rec, reader
            reader.release()          # superseded between the two looks: look again
        raise CacheBusyError(f"cache '{self.name}' changed at every look", expected="a stable newest version",
                             actual="8 new commits while opening it", fix="rerun")

    def snapshot(self, *, lease: bool = True):
        """The committed version as a Snapshot (None: never committed, or cleared)."""
        self.gone = None
        head, rec, reader = self.current(lease=lease)
        if rec is None or rec["kind"] == "cleared":
            if reader is not None:
                reader.release()
            if rec is not None:
                self.gone = f"it was cleared (commit record {head.seq})"
            return None
        return BucketSnapshot(self, head.seq, rec, reader)

    def record_use(self) -> None:
        """A hit: the cache's last use for the size budget (one small PUT per host and minute)."""
        k = self.keys.used(_host_id())
        with _USED_GUARD:
            if time.monotonic() - _USED.get(k, -1e9) < USE_EVERY_S:
                return
            _USED[k] = time.monotonic()
        try:
            self.client.put(k, b"")
        except ReuseError as e:
            log.debug("seedreuse: could not record the use of cache '%s': %s", self.name, e)

    # ------------------------------------------------------------------ writing
    def carry(self, staged, fname: str, source, src: str) -> dict:
        """A carry is a reference: the new version names the committed data object of the file, so
        nothing is downloaded, and a file is renamed (``result.mp4`` -> ``take-<k>.result.mp4``) at
        no cost."""
        rel = source.objects.get(src)
        if rel is None:
            raise CorruptCacheError(f"cache '{self.name}': {src} has no object to carry", expected="a file of a "
                                    "bucket version", actual="none", fix="rerun without reuse")
        staged.dir.drop(fname)
        return staged.add_carried(fname, source.manifest["files"][src], ref=rel)

    def publish(self, tx) -> str:
        """The commit protocol of a bucket (commit.py)."""
        return commit.publish(tx)

    def staging_parent(self):
        parent = self.tier.staging_parent(self.keys)
        fsops.mkdir(parent.parent, parents=True, exist_ok=True)
        return parent

    def retry_when_full(self, fn, **kw):
        """``fn()``; on ENOSPC of the local tier, trim it and retry once (store/file_checks.py)."""
        return file_checks.retry_when_full(fn, free=self.tier.trim, full_error=self.storage_full, **kw)

    def storage_full(self, exc: OSError, during: str):
        return StorageFullError(
            f"the local tier of {self.root} ({self.tier.root}) is full: cannot {during} for cache "
            f"'{self.name}' ({exc.strerror}); the bucket's last good version is untouched",
            expected="free space on SEEDREUSE_CACHE_ROOT", actual=str(exc),
            fix="free space on this host's SEEDREUSE_CACHE_ROOT, lower SEEDREUSE_LOCAL_TIER_BYTES, or point "
                "SEEDREUSE_CACHE_ROOT at a larger local disk, then rerun",
            details={"root": str(self.tier.root), "cache": self.name, "errno": exc.errno})

    def begin(self, run: RunInfo | None = None) -> Transaction:
        """Begin a run: its lease first (``since`` 0: it keeps everything until it has read its
        base), then the base (the newest record), the lease narrowed to that base (``exact``),
        then local staging."""
        run = run or RunInfo()
        recovered = self.tier.sweep_staging(self.keys)
        lease = self._lease(self.keys.lease(run.run_id), RUN_LEASE, 0, run.run_id)
        lease.acquire(exclusive=False)
        tx = None
        try:
            base, base_error, head = None, None, None
            try:
                head, rec, _ = self.current(lease=False)
                if rec is not None and rec["kind"] != "cleared":
                    base = BucketSnapshot(self, head.seq, rec)
            except CorruptCacheError as e:     # a broken newest record cannot be a base; it gets replaced
                log.warning("%s", e)
                base_error = e
                head = commit_log.newest_head(self.client, self.keys)
            lease.update(since=head.seq if head else 0, exact=True)
            tx = Transaction(self, run, base, base_error, recovered, head)
            tx.lease = lease
            self.retry_when_full(tx.create_staging, during="create its staging directory")
            if base is None:
                budget.note_run(self)            # a first run (or one after a clear) names the cache
            return tx
        except BaseException:
            if tx is not None:
                tx.state = "failed"
                tx.discard()
            else:
                lease.release()
            raise

    def claim(self, slot: str, digest: str, run_id: str, *, wait: float | None = None, on_wait=None):
        """Single flight (store/claim.py)."""
        return take_claim(self, slot, digest, run_id, wait=wait, on_wait=on_wait)

    def after_commit(self, seq: int, record: dict) -> None:
        """What a commit triggers: the collection of this cache, its row in the namespace's usage
        index and the namespace's budget (budget.py: a bounded number of requests however many
        caches the namespace has); never raises (the commit stands)."""
        try:
            collect.after_commit(self, seq)
            budget.after_commit(self, seq, record, self.sibling)
        except Exception as e:  # noqa: BLE001 - Invariant: cleanup never fails a commit
            log.warning("seedreuse: collection after the commit of cache '%s' failed: %s", self.name, e)

    def sibling(self, name: str) -> "BucketCache":
        """Another cache of the same namespace, with this one's settings."""
        return BucketCache(self.root, name, local_root=self.local_root, lease_s=self.lease_s,
                           heartbeat_s=self.heartbeat_s)

    def recover_leftovers(self, run_id: str | None = None) -> list[str]:
        """The local staging of this host's dead runs; what dead runs left in the bucket is
        collected after commits, by gc and by check --repair (collect.py)."""
        return self.tier.sweep_staging(self.keys)

    def recover(self, run_id: str | None = None) -> list[str]:
        return self.recover_leftovers(run_id) + collect.collect(self).done

    def clear(self, run_id: str | None = None) -> list[str]:
        """Publish a cleared record (then collect), refused while a live run or reader uses it
        (CacheBusyError with the folder store's reason, budget.in_use). What this does not
        guarantee: the look and the record are two steps; a reader that opens in between reads
        the version it leased (collect.py keeps it), and a run that began in between rebases onto
        the cleared state. A commit that lands in between is never cleared unseen: the cleared
        record is created at the number after the surveyed one or not at all (CacheBusyError)."""
        seq, _ = commit_log.latest(self.client, self.keys)
        why = budget.in_use(self)
        if why:
            raise CacheBusyError(f"cache '{self.name}' was not cleared: it is {why}",
                                 expected="no live writer and no open reader of the cache", actual=why,
                                 fix="wait for that run or reader to finish (a worker serving a prompt from this "
                                     "cache), then clear again", details={"cache": self.name})
        # the cleared record goes right after the version surveyed, or nowhere: a commit that landed
        # since the look is not cleared unseen
        done = collect.publish_state(self, "cleared", run_id or f"clear-{uuid.uuid4().hex}",
                                     at=commit_log.next_number(self.keys, seq or 0))
        if not done:
            raise CacheBusyError(f"cache '{self.name}' was not cleared: a run committed to it while it was being "
                                 "cleared", expected=f"commit record {seq} still the newest",
                                 actual="a newer commit record", fix="clear again if the new version is to go too",
                                 details={"cache": self.name})
        self.tier.forget(self.keys)
        budget.forget(self, (seq or 0) + 1)
        return done + collect.collect(self, hint=(seq or 0) + 1).done


def _host_id() -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in f"{hostname()}-{os.getuid()}")[:64]
