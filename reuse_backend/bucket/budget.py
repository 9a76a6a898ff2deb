"""The caches of one namespace on a bucket, their sizes and last uses, and the size budget on a
bucket (the policy, which and in which order, is store/budget.py's).

After every commit the namespace's caches are surveyed (one LIST of the namespace, the newest
record and the ``used/`` markers of each cache) and the least recently used are cleared until the
namespace is within budget: a ``cleared`` record, then a collection. Last use = the newest
record's time or a host's last hit (``used/<host id>``, written at most once a minute per host).
In use (the policy skips it): a live run or reader lease. Clearing is a record like any other, so a
run that commits over it rebases onto "nothing" and publishes its own complete version.

What this does not guarantee (besides store/budget.py's): sizes count each data object a newest
record names once per cache, and objects waiting for collection are not counted.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from ..errors import CorruptCacheError, ReuseError
from ..store import roots
from ..store.budget import Entry, Report, budget_for, make_room
from ..store.lease import describe
from . import collect, leases, log as commit_log

log = logging.getLogger("seedreuse")


@dataclass
class CacheInfo:
    name: str
    seq: int | None
    committed: bool
    bytes: int
    last_use: float | None
    error: str | None = None


def list_caches(client, loc) -> list[str]:
    """Names of the caches of the namespace at ``loc`` (anything with a log, staging or lease)."""
    _, prefixes = client.list(loc.prefix, delimiter="/")
    names = [p[len(loc.prefix):].rstrip("/") for p in prefixes]
    return sorted(n for n in names if roots.is_valid_cache_name(n))


def deleted(cache) -> bool:
    """A cleared cache that holds nothing else: what a deleted cache is on a folder (gone), so the
    store does not name it (store.py ``names``). Its log stays because numbering never restarts
    (records.py); anything else under it (a run's lease or data, a claim, a reader) keeps it named,
    as a folder's ``.tmp`` does, so gc still collects it. A log that does not read is named (its
    error is shown). One LIST for a cache with data (every version has some); the log is read only
    when nothing else is there."""
    _, folders = cache.client.list(cache.keys.base, delimiter="/")
    if not set(folders) <= {cache.keys.log_prefix, cache.keys.used_prefix}:
        return False
    try:
        _, rec = commit_log.latest(cache.client, cache.keys)
    except CorruptCacheError:
        return False
    return rec is not None and rec["kind"] == "cleared"


def info(cache) -> CacheInfo:
    try:
        seq, rec = commit_log.latest(cache.client, cache.keys)
    except CorruptCacheError as e:
        return CacheInfo(cache.name, None, False, 0, None, error=e.message)
    if rec is None or rec["kind"] == "cleared":
        return CacheInfo(cache.name, seq, False, 0, rec["created_at"] if rec else None)
    files = rec["manifest"]["files"]
    size = sum(files[f]["bytes"] for f in {r: f for f, r in rec["objects"].items()}.values())
    used, _ = cache.client.list(cache.keys.used_prefix)
    last = max([rec["created_at"]] + [o.modified for o in used])
    return CacheInfo(cache.name, seq, True, size, last)


def survey(open_cache, client, loc) -> list[CacheInfo]:
    return [info(open_cache(n)) for n in list_caches(client, loc)]


def in_use(cache) -> str | None:
    """Why the cache is in use now (a live run or reader lease), in the folder store's words
    (folder/evict.py ``in_use``), or None. A look, not a hold: a run may begin right after it."""
    runs, _ = leases.live(cache.client, cache.keys.lease_prefix, cache.lease_s)
    if runs:
        return f"being written by {describe(runs[0])}"
    readers, _ = leases.live(cache.client, cache.keys.reader_prefix, cache.lease_s)
    if not readers:
        return None
    return f"read by {len(readers)} reader(s) (host {readers[0].get('host')} pid {readers[0].get('pid')})"


def enforce(open_cache, client, loc, budget: int | None, *, exclude=(), dry_run: bool = False) -> Report:
    """Clear least recently used caches until the namespace is within ``budget`` (store/budget.py's
    policy); a cache is cleared by a record, then collected."""
    entries = [Entry(r.name, r.bytes, r.last_use, "error" if r.error else "keep", r.error or "")
               for r in survey(open_cache, client, loc) if r.committed or r.error]
    total = sum(e.bytes for e in entries)

    def evict(name: str) -> tuple[bool, str]:
        cache = open_cache(name)
        busy = in_use(cache)
        if busy:
            return False, busy
        collect.publish_state(cache, "cleared", f"evict-{uuid.uuid4().hex}")
        cache.tier.forget(cache.keys)
        collect.collect(cache)
        return True, "cleared"

    return make_room(Report(loc.url, budget, total, total, dry_run), entries, exclude=exclude,
                     in_use=lambda name: in_use(open_cache(name)), evict=evict)


def after_commit(cache, open_cache) -> None:
    """The budget of the namespace ``cache`` just committed to (``open_cache(name)``: a handle
    on another cache of the namespace)."""
    try:
        budget = budget_for(cache.root)
    except ReuseError as e:
        log.warning("seedreuse: %s", e.message)
        return
    if budget is None:
        return
    evicted = enforce(open_cache, cache.client, cache.loc, budget, exclude={cache.name}).evicted
    if evicted:
        log.info("seedreuse: namespace %s over its budget of %d bytes: evicted %s", cache.root, budget, evicted)
