"""The caches of one namespace on a bucket, their sizes and last uses, and the size budget.

``SEEDREUSE_MAX_BYTES`` applies to each namespace on its own, as on a folder (automatic caches
always have one, store/budget.py). A commit costs the budget a bounded number of requests however
many caches the namespace has or ever had: it sets its cache's row in the namespace's usage index
(usage_index.py: one shard read and one conditional write), reads the index's shards for the
namespace's total, and only when the total is over the budget does it look at caches: the least
recently committed rows first, each one's hits refreshed from its ``used/<host id>`` markers (one
LIST), at most ``MAX_LOOKS`` per commit (the next commit or ``gc`` goes on). An evicted or cleared
cache leaves the index, so dead caches cost nothing after. ``gc`` surveys the whole namespace
(every cache folder, dead ones too), collects each, rebuilds the index from what it found, and
applies the budget with the survey's exact last uses.

Invariant (never under a user): a cache with a live run or reader lease is skipped, and so is the
cache that just committed; clearing is a record like any other, created at the number after the
record the evictor looked at or not at all (a commit that landed since the look is never cleared
unseen), so a run that commits over it rebases onto "nothing" and publishes its own complete
version.

What this does not guarantee: the budget is a target (what is in flight or in use can keep a
namespace over it, and a commit evicts at most ``MAX_LOOKS`` caches' worth); sizes count each
data object a newest record names once per cache, and objects waiting for collection are not
counted; the order between caches is their last commit or hit as the index and the markers say
(markers are written at most once a minute per host and cache).
"""
from __future__ import annotations

import heapq
import logging
import time
import uuid
from dataclasses import dataclass

from ..errors import CorruptCacheError, ReuseError
from ..store import roots
from ..store.budget import budget_for
from ..store.owner import describe
from . import collect, leases, log as commit_log, usage_index

log = logging.getLogger("seedreuse")

MAX_LOOKS = 16          # caches an over-budget commit may look at (and evict) before it returns


@dataclass
class CacheInfo:
    name: str
    seq: int | None
    committed: bool
    bytes: int
    last_use: float | None
    error: str | None = None
    action: str = "keep"
    why: str = ""

    def row(self) -> list:
        return [self.seq or 0, self.bytes, float(self.last_use or 0.0), self.committed]


def list_caches(client, loc) -> list[str]:
    """Names of every cache folder of the namespace at ``loc``, dead ones too (gc's survey)."""
    _, prefixes = client.list(loc.prefix, delimiter="/")
    names = [p[len(loc.prefix):].rstrip("/") for p in prefixes]
    return sorted(n for n in names if roots.is_valid_cache_name(n))


def record_bytes(rec: dict) -> int:
    """A version's size: the bytes of each data object its record names, once."""
    files = rec["manifest"]["files"]
    return sum(files[f]["bytes"] for f in {r: f for f, r in rec["objects"].items()}.values())


def vacant(cache) -> int | None:
    """When nothing lives in the cache, the number of its newest record (0: none), else None:
    no version (never committed, or cleared), and nothing but its log and use markers under it
    (no run's lease or data, no claim, no reader). What a deleted cache is on a folder (gone), so
    the store does not name it; its log stays because numbering never restarts (records.py). One
    LIST for a cache with data; the log is read only when nothing else is there."""
    _, folders = cache.client.list(cache.keys.base, delimiter="/")
    if not set(folders) <= {cache.keys.log_prefix, cache.keys.used_prefix}:
        return None
    try:
        seq, rec = commit_log.latest(cache.client, cache.keys)
    except CorruptCacheError:
        return None
    return (seq or 0) if rec is None or rec["kind"] == "cleared" else None


def last_use(cache, rec: dict) -> float:
    used, _ = cache.client.list(cache.keys.used_prefix)
    return max([rec["created_at"]] + [o.modified for o in used])


def info(cache) -> CacheInfo:
    try:
        seq, rec = commit_log.latest(cache.client, cache.keys)
    except CorruptCacheError as e:
        return CacheInfo(cache.name, None, False, 0, None, error=e.message)
    if rec is None or rec["kind"] == "cleared":
        return CacheInfo(cache.name, seq, False, 0, rec["created_at"] if rec else None)
    return CacheInfo(cache.name, seq, True, record_bytes(rec), last_use(cache, rec))


def survey(open_cache, client, loc) -> tuple[dict, dict, list[CacheInfo]]:
    """(live rows, dead {name: newest number}, infos) of every cache folder of the namespace: the
    usage index's rebuild and gc (one look at each dead cache, three requests at each live one)."""
    live, dead, infos = {}, {}, []
    for n in list_caches(client, loc):
        cache = open_cache(n)
        seq = vacant(cache)
        if seq is not None:
            dead[n] = seq
            continue
        inf = info(cache)
        infos.append(inf)
        if not inf.error:
            live[n] = inf.row()
    return live, dead, infos


def _rebuild(open_cache, client, loc):
    """``rebuild(shard) -> rows`` from one survey of the namespace, made at the first call (an
    index that is absent is usually absent whole: a namespace an older pack wrote)."""
    memo: dict = {}

    def rebuild(shard: int) -> dict:
        if "rows" not in memo:
            memo["rows"] = survey(open_cache, client, loc)[0]
        return {n: r for n, r in memo["rows"].items() if usage_index.shard_of(n) == shard}
    return rebuild


def rows(open_cache, client, loc) -> dict:
    """Every row of the namespace's usage index (usage_index.py)."""
    return usage_index.rows_all(client, loc, _rebuild(open_cache, client, loc))


def _index_change(cache, fn) -> None:
    """A change of the cache's row that never fails what asked for it (the index is a summary)."""
    try:
        usage_index.change(cache.client, cache.loc, cache.name, fn, _rebuild(cache.sibling, cache.client, cache.loc))
    except ReuseError as e:
        log.warning("seedreuse: the usage index of %s was not updated for cache '%s': %s", cache.root,
                    cache.name, e.message)


def note_run(cache) -> None:
    """A run began on a cache that holds no version: the cache is named while it runs."""
    def add(rows):
        if cache.name in rows:
            return False
        rows[cache.name] = [0, 0, time.time(), False]
        return True
    _index_change(cache, add)


def forget(cache, cleared_at: int, *, newest: int | None = None) -> None:
    """The cache was cleared at record ``cleared_at``: its row goes, unless a commit set it since.
    ``newest``: the log was seen to hold no version up to that number, so a row naming a later
    one names nothing (a row nobody's commit wrote) and goes too."""
    def drop(rows):
        row = rows.get(cache.name)
        if row is None or row[0] >= cleared_at and (newest is None or row[0] <= newest):
            return False
        del rows[cache.name]
        return True
    _index_change(cache, drop)


def in_use(cache) -> str | None:
    """Why the cache is in use now (a live run or reader lease), in the folder store's words
    (folder/evict.py ``in_use``), or None. A look, not a hold: a run may begin right after it."""
    runs, _ = leases.live(cache.client, cache.keys.lease_prefix, cache.lease_s, cache.keys.parse_lease)
    if runs:
        return f"being written by {describe(runs[0])}"
    readers, _ = leases.live(cache.client, cache.keys.reader_prefix, cache.lease_s, cache.keys.parse_reader)
    if not readers:
        return None
    return f"read by {len(readers)} reader(s) (host {readers[0].get('host')} pid {readers[0].get('pid')})"


def _evict(cache, seq: int, why: str, dry_run: bool) -> tuple[str, str]:
    """(action, why) of evicting ``cache`` whose newest record ``seq`` was looked at."""
    busy = in_use(cache)
    if busy:
        return "skipped", busy
    if dry_run:
        return "would_evict", why
    done = collect.publish_state(cache, "cleared", f"evict-{uuid.uuid4().hex}",
                                 at=commit_log.next_number(cache.keys, seq))
    if not done:
        return "skipped", "a run committed to it during the eviction"
    cache.tier.forget(cache.keys)
    forget(cache, seq + 1)
    collect.collect(cache, hint=seq + 1)
    return "evicted", why


def enforce(open_cache, index: dict, budget: int | None, *, exclude=(), dry_run: bool = False,
            exact: bool = False) -> list[CacheInfo]:
    """Clear least recently used caches of ``index`` (name -> row) until their total is within
    ``budget``. ``exact``: the rows' last uses are a survey's (gc); else each candidate's newest
    record and hits are looked up first (at most MAX_LOOKS candidates)."""
    infos = {n: CacheInfo(n, r[0], r[3], r[1], r[2]) for n, r in index.items()}
    total = sum(c.bytes for c in infos.values() if c.committed)
    if budget is None or total <= budget:
        return list(infos.values())
    heap = [(c.last_use or 0.0, n) for n, c in infos.items() if c.committed]
    heapq.heapify(heap)
    looks = 0
    while heap and total > budget and (exact or looks < MAX_LOOKS):
        _, name = heapq.heappop(heap)
        c = infos[name]
        if name in exclude:
            c.action, c.why = "skipped", "just committed"
            continue
        cache = open_cache(name)
        if not exact:
            looks += 1
            fresh = info(cache)
            if fresh.error or not fresh.committed:
                total -= c.bytes
                infos[name] = fresh
                if not fresh.error:
                    forget(cache, (fresh.seq or 0) + 1, newest=fresh.seq or 0)
                continue
            total += fresh.bytes - c.bytes
            infos[name] = c = fresh
            if heap and (c.last_use or 0.0) > heap[0][0]:       # used since its row says: not the oldest
                heapq.heappush(heap, (c.last_use or 0.0, name))
                continue
        c.action, c.why = _evict(cache, c.seq or 0, f"least recently used; {total} > {budget} bytes", dry_run)
        if c.action in ("evicted", "would_evict"):
            total -= c.bytes
    return list(infos.values())


def after_commit(cache, seq: int, record: dict, open_cache) -> None:
    """The commit's row in the usage index, then the budget of its namespace (``open_cache(name)``:
    a handle on another cache of the namespace)."""
    row = [seq, record_bytes(record), float(record["created_at"]), True]

    def put(rows):
        old = rows.get(cache.name)
        if old is not None and old[0] > seq:
            return False
        rows[cache.name] = row
        return True
    rebuild = _rebuild(open_cache, cache.client, cache.loc)
    usage_index.change(cache.client, cache.loc, cache.name, put, rebuild)
    try:
        budget = budget_for(cache.root)
    except ReuseError as e:
        log.warning("seedreuse: %s", e.message)
        return
    if budget is None:
        return
    index = usage_index.rows_all(cache.client, cache.loc, rebuild)
    index[cache.name] = row
    done = enforce(open_cache, index, budget, exclude={cache.name})
    evicted = [c.name for c in done if c.action == "evicted"]
    if evicted:
        log.info("seedreuse: namespace %s over its budget of %d bytes: evicted %s", cache.root, budget, evicted)
