"""Commit records: the objects ``log/<seq>.json`` that make a version current on a bucket.

A record is created once, with ``If-None-Match: *``, at the next sequence number; the highest
number is the cache's state. Schema (exact keys, strict JSON, at most ``MAX_RECORD_BYTES``)::

    {"schema": "seedreuse-bucket/1", "seq": n, "kind": "version" | "cleared" | "fence",
     "manifest": <the folder store's manifest of the version> | null,
     "objects": {file name: "data/<run id>/<sha256>"},
     "fenced": [run ids], "writer": run id, "created_at": unix time}

* ``version``: a commit; ``manifest`` is exactly the folder store's manifest (store/manifest.py),
  so readers, media and checks see one format whichever store serves them; ``objects`` names the
  data object of every file, relative to the cache (location.py), its sha256 the file's own.
* ``cleared``: the cache was cleared or evicted (no manifest, no objects); numbering goes on, so
  a stalled writer can never publish at a number below it.
* ``fence``: written by the collector (collect.py) before it deletes what stalled runs uploaded:
  the current version again, plus the ids of the runs whose leases were stale. A run named in a
  fence after its base publishes nothing (commit.py).

Invariant (a record is used only when valid): ``parse`` refuses a record whose sequence is not its
key's, whose manifest is not valid for this cache, whose objects are not this cache's data keys or
disagree with the manifest's hashes: a record written by someone else causes a refused load,
never a read outside the cache.
"""
from __future__ import annotations

import json
import math
import time

from ..errors import CorruptCacheError
from ..storage import strict_json
from ..store import manifest as mf
from .location import DATA_REL, RUN_ID, CacheKeys

SCHEMA = "seedreuse-bucket/1"
KINDS = ("version", "cleared", "fence")
KEYS = frozenset({"schema", "seq", "kind", "manifest", "objects", "fenced", "writer", "created_at"})
MAX_RECORD_BYTES = mf.MAX_MANIFEST_BYTES + (2 << 20)
MAX_FENCED = 1000


def bad(keys: CacheKeys, key: str, what: str, *, expected=None, actual=None) -> CorruptCacheError:
    return CorruptCacheError(
        f"cache '{keys.name}': the object s3://{keys.loc.bucket}/{key} is not a valid commit record: {what}",
        expected=expected, actual=actual,
        fix=f"nothing from it was used; if it was not written by SeedReuse, remove it (python -m "
            f"reuse_backend --root {keys.loc.url} check {keys.name} --repair publishes a cleared state "
            f"over it), then rerun", details={"cache": keys.name, "key": key})


def make(seq: int, kind: str, manifest: dict | None, objects: dict, writer: str,
         fenced: list | tuple = ()) -> dict:
    return {"schema": SCHEMA, "seq": int(seq), "kind": kind, "manifest": manifest,
            "objects": dict(objects), "fenced": sorted(set(fenced)), "writer": writer,
            "created_at": time.time()}


def dumps(rec: dict) -> bytes:
    return json.dumps(rec, sort_keys=True, allow_nan=False, separators=(",", ":")).encode()


def parse(data: bytes, keys: CacheKeys, key: str, seq: int) -> dict:
    """The validated record read from ``key`` (sequence ``seq``) of the cache ``keys``."""
    if len(data) > MAX_RECORD_BYTES:
        raise bad(keys, key, "it is too large", expected=f"<= {MAX_RECORD_BYTES} bytes", actual=len(data))
    try:
        rec = strict_json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise bad(keys, key, f"not valid JSON ({str(e)[:120]})", expected="a JSON object",
                  actual=strict_json.brief(data[:60])) from None
    if type(rec) is not dict or set(rec) != KEYS:
        have = set(rec) if type(rec) is dict else set()
        raise bad(keys, key, "wrong keys", expected=sorted(KEYS),
                  actual=f"missing {sorted(KEYS - have)}, unknown {sorted(have - KEYS)}")
    if rec["schema"] != SCHEMA:
        raise bad(keys, key, "unsupported schema", expected=SCHEMA, actual=strict_json.brief(rec["schema"]))
    if rec["seq"] != seq or isinstance(rec["seq"], bool):
        raise bad(keys, key, "its sequence is not its key's", expected=seq, actual=strict_json.brief(rec["seq"]))
    if rec["kind"] not in KINDS:
        raise bad(keys, key, "unknown kind", expected=" | ".join(KINDS), actual=strict_json.brief(rec["kind"]))
    ts = rec["created_at"]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
        raise bad(keys, key, "created_at out of range", expected="a unix time", actual=strict_json.brief(ts))
    if not isinstance(rec["writer"], str) or not RUN_ID.fullmatch(rec["writer"]):
        raise bad(keys, key, "writer is not a run id", expected=RUN_ID.pattern, actual=strict_json.brief(rec["writer"]))
    fenced = rec["fenced"]
    if type(fenced) is not list or len(fenced) > MAX_FENCED or \
            not all(isinstance(r, str) and RUN_ID.fullmatch(r) for r in fenced):
        raise bad(keys, key, "fenced is not a list of run ids", expected=f"<= {MAX_FENCED} run ids",
                  actual=strict_json.brief(fenced))
    objects = rec["objects"]
    if type(objects) is not dict:
        raise bad(keys, key, "objects is not an object", expected="{file: data key}", actual=type(objects).__name__)
    if rec["kind"] == "cleared":
        if rec["manifest"] is not None or objects:
            raise bad(keys, key, "a cleared record holds a version", expected="manifest null, no objects",
                      actual="a manifest or objects")
        return rec
    try:
        m = mf.validate(rec["manifest"], name=keys.name)
    except CorruptCacheError as e:
        raise bad(keys, key, f"its manifest: {e.message}", expected=e.expected, actual=e.actual) from None
    files = m["files"]
    if set(objects) != set(files):
        raise bad(keys, key, "objects do not match the manifest's files", expected=sorted(files)[:20],
                  actual=sorted(objects)[:20])
    for fname, rel in objects.items():
        match = DATA_REL.fullmatch(rel) if isinstance(rel, str) else None
        if match is None:
            raise bad(keys, key, f"file {fname!r} names an object outside this cache's data",
                      expected="data/<run id>/<sha256> under the cache", actual=strict_json.brief(rel))
        if match["sha"] != files[fname]["sha256"]:
            raise bad(keys, key, f"file {fname!r} names an object of other content",
                      expected=files[fname]["sha256"], actual=match["sha"])
    return rec
