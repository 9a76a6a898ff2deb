"""The usage index of one namespace on a bucket: which caches live there, their size, newest
record and last commit, kept in ``SHARDS`` small objects so that a commit, the size budget and
the browser's list never survey the namespace.

``<namespace prefix>.seedreuse-usage/<shard>.json`` (a name no cache can have: cache names start
with a letter or digit), one shard per cache name's hash::

    {"schema": "seedreuse-usage/1", "caches": {name: [seq, bytes, last commit, committed]}}

* a commit sets its cache's row (``seq`` only ever grows), a clear or an eviction removes it (only
  when no newer commit set it meanwhile), a first run adds an uncommitted row (the cache is
  named while it runs, as a folder's staging is);
* every change is a compare-and-swap of one shard (If-Match on the ETag read, If-None-Match on a
  shard that does not exist yet), retried a bounded number of times;
* a shard that is absent or does not validate is rebuilt from a survey of the namespace (the
  caches whose name hashes to it: their newest record), once; so is every shard by ``gc``.

Invariant (the index is a summary, never the truth): the commit log of each cache decides what is
current; the index only says which caches to look at and how big they were at their last commit.
What it can miss: a cache whose commit died between its record and its row (it appears at its
next commit or the next gc), and hits since the last commit (the ``used/`` markers: budget.py reads
them for the caches it is about to evict). A hostile or damaged shard costs one rebuild, never a
refused commit.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time

from ..errors import ObjectStoreError
from ..storage import strict_json
from ..store import roots
from .client import NotFound, Precondition, TooLarge
from .location import MAX_SEQ

log = logging.getLogger("seedreuse")

SCHEMA = "seedreuse-usage/1"
FOLDER = ".seedreuse-usage"
SHARDS = 8
MAX_SHARD_BYTES = 32 << 20
MAX_ROWS = 250_000
CAS_ATTEMPTS = 16


def shard_of(name: str) -> int:
    return hashlib.sha256(name.encode()).digest()[0] % SHARDS


def key(loc, shard: int) -> str:
    return f"{loc.prefix}{FOLDER}/{shard}.json"


def _row_ok(name, row) -> bool:
    return roots.is_valid_cache_name(name) and type(row) is list and len(row) == 4 \
        and isinstance(row[0], int) and not isinstance(row[0], bool) and 0 <= row[0] <= MAX_SEQ \
        and isinstance(row[1], int) and not isinstance(row[1], bool) and 0 <= row[1] < 1 << 62 \
        and isinstance(row[2], (int, float)) and not isinstance(row[2], bool) and math.isfinite(row[2]) \
        and 0 <= row[2] < 1e11 and isinstance(row[3], bool)


def parse(data: bytes) -> dict | None:
    """The rows of a shard body, or None when it is not a valid shard (then it is rebuilt)."""
    try:
        body = strict_json.loads(data, max_depth=4)
    except (ValueError, RecursionError):
        return None
    if type(body) is not dict or set(body) != {"schema", "caches"} or body["schema"] != SCHEMA \
            or type(body["caches"]) is not dict or len(body["caches"]) > MAX_ROWS:
        return None
    rows = body["caches"]
    return rows if all(_row_ok(n, r) for n, r in rows.items()) else None


def dumps(rows: dict) -> bytes:
    return json.dumps({"schema": SCHEMA, "caches": rows}, sort_keys=True, separators=(",", ":")).encode()


def read(client, loc, shard: int) -> tuple[dict | None, str | None]:
    """(rows or None when absent or invalid, ETag or None when absent)."""
    k = key(loc, shard)
    try:
        obj = client.get(k, MAX_SHARD_BYTES)
    except NotFound:
        return None, None
    except TooLarge:
        return None, client.head(k).etag
    rows = parse(obj.body)
    if rows is None:
        log.warning("seedreuse: the usage index s3://%s/%s is not valid; rebuilding it", client.bucket, k)
    return rows, obj.etag


def _write(client, loc, shard: int, rows: dict, etag: str | None) -> None:
    client.put(key(loc, shard), dumps(rows), create_only=etag is None, if_match=etag)


def change_shard(client, loc, shard: int, fn, survey) -> bool:
    """Apply ``fn(rows) -> bool`` (True: changed) to one shard by compare-and-swap;
    ``survey(shard) -> rows`` rebuilds a shard that is absent or invalid. False when it kept
    losing races or the store refused (logged: the index is a summary, gc rebuilds it)."""
    for attempt in range(CAS_ATTEMPTS):
        rows, etag = read(client, loc, shard)
        rebuilt = rows is None
        if rebuilt:
            rows = survey(shard)
        if not fn(rows) and not rebuilt:
            return True
        try:
            _write(client, loc, shard, rows, etag)
            return True
        except (Precondition, NotFound):          # another writer changed it: read it again
            time.sleep(random.uniform(0, min(0.5, 0.01 * 2 ** attempt)))
        except ObjectStoreError as e:
            log.warning("seedreuse: could not update the usage index of %s: %s", loc.url, e.message)
            return False
    log.warning("seedreuse: the usage index of %s (shard %d) kept changing; left to the next commit or gc",
                loc.url, shard)
    return False


def change(client, loc, name: str, fn, survey) -> bool:
    """``change_shard`` on the shard of cache ``name``."""
    return change_shard(client, loc, shard_of(name), fn, survey)


def rows_all(client, loc, survey) -> dict:
    """Every row of the namespace (one GET per shard; an absent or invalid shard is rebuilt and
    written, its write may lose a race: then what was rebuilt is used as it is)."""
    out = {}
    for shard in range(SHARDS):
        rows, etag = read(client, loc, shard)
        if rows is None:
            rows = survey(shard)
            try:
                _write(client, loc, shard, rows, etag)
            except (Precondition, NotFound):
                pass
            except ObjectStoreError as e:
                log.warning("seedreuse: could not write the usage index of %s: %s", loc.url, e.message)
        out.update(rows)
    return out


def replace_all(client, loc, live: dict, dead: dict) -> None:
    """``gc``: every shard set to what a full survey found: ``live`` rows, ``dead`` {name: newest
    record number} (cleared, or nothing but a log). A row a commit set since the survey (a newer
    number, or a cache the survey's listing did not see yet) is kept."""
    for shard in range(SHARDS):
        mine = {n: r for n, r in live.items() if shard_of(n) == shard}

        def merge(rows, mine=mine):
            new = {n: r for n, r in rows.items()
                   if not (n in dead and r[0] <= dead[n]) and not (n in mine and r[0] <= mine[n][0])}
            new.update({n: r for n, r in mine.items() if n not in new})
            changed = new != rows
            rows.clear()
            rows.update(new)
            return changed
        change_shard(client, loc, shard, merge, lambda _s, mine=mine: dict(mine))
