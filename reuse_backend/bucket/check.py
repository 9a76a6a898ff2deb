"""``check`` of one cache on a bucket, optionally repaired: the folder store's check, for objects.

Found: a newest commit record that does not validate (``invalid_record``); an object of the
current version missing, of the wrong size or of other content (every object is downloaded and
hashed, also one this host holds: the bucket's object is checked, not this host's copy;
``missing_object``, ``bad_object``); a value file of the right hash that does not load as a tensor
file (``unreadable_tensor``: the structure check of a load, nothing is unpickled or executed); a
take index that does not match the version (``bad_take_index``); what a collection would remove
(``collectable``: data objects no kept record names whose runs are gone, superseded records, stale
leases and claims).

Repair runs the collection (collect.py: never anything a live run or reader can use; twice when
the first wrote a fence record, which supersedes the record the first had to keep) and, when
the newest record does not validate, publishes a cleared state over it (the next successful run
rebuilds the cache). It never deletes a valid version: a broken one is reported with the
command that clears it.
"""
from __future__ import annotations

import os
import uuid

from ..errors import CorruptCacheError, ReuseError
from ..storage import fsops, serialize
from ..store import take_index
from ..store.file_checks import check_loadable
from ..store.check import Problem
from . import collect, log as commit_log
from .client import NotFound

REPAIRABLE = {"collectable", "invalid_record"}


def _clear_fix(cache) -> str:
    return f"python -m reuse_backend --root {cache.root} clear {cache.name} --yes (the next successful run rebuilds it)"


def _where(cache, key: str) -> str:
    return f"s3://{cache.loc.bucket}/{key}"


def _tensor_files(m: dict) -> set[str]:
    return {e["file"] for e in m["slots"].values()} | {e["file"] for e in m["boundaries"].values()} \
        | {f for f in m["files"] if f.endswith(".safetensors")}


def _unloadable(name: str, fname: str, path, size: int) -> str | None:
    """Why the fetched value file at ``path`` would not load (as store/check.py asks of a
    folder version's files), or None."""
    fd = os.open(path, fsops.O_READ)
    try:
        check_loadable(name, fname, os.fstat(fd))
        with os.fdopen(fd, "rb", closefd=False) as f:
            serialize.load_value(f, max_bytes=size, validate_only=True)
    except ReuseError as e:
        return str(e).replace("\n", "; ")
    finally:
        fsops.close_read_only(fd)
    return None


def scan(cache, *, verify: bool = True) -> list[Problem]:
    out: list[Problem] = []
    try:
        seq, rec = commit_log.latest(cache.client, cache.keys)
    except CorruptCacheError as e:
        key = e.details.get("key", cache.keys.log_prefix)
        return [Problem("invalid_record", _where(cache, key), e.message,
                        "check --repair publishes a cleared state over it (the next run rebuilds the cache)")]
    if rec is not None and rec["kind"] != "cleared":
        m = rec["manifest"]
        for p in take_index.problems(m):
            out.append(Problem("bad_take_index", _where(cache, cache.keys.log(seq)), p, _clear_fix(cache)))
        for fname, rel in sorted(rec["objects"].items()):
            key, entry = cache.keys.data(rel), m["files"][fname]
            try:
                head = cache.client.head(key)
            except NotFound:
                out.append(Problem("missing_object", _where(cache, key), f"{fname} of version {seq} is missing",
                                   _clear_fix(cache)))
                continue
            if head.size != entry["bytes"]:
                out.append(Problem("bad_object", _where(cache, key),
                                   f"{fname} has {head.size} bytes, its record says {entry['bytes']}", _clear_fix(cache)))
                continue
            if verify:
                try:
                    path = cache.tier.fetch(cache.client, cache.keys, fname, rel, entry, again=True)
                except CorruptCacheError as e:
                    out.append(Problem("bad_object", _where(cache, key), e.message, _clear_fix(cache)))
                    continue
                why = _unloadable(cache.name, fname, path, entry["bytes"]) if fname in _tensor_files(m) else None
                if why:
                    out.append(Problem("unreadable_tensor", _where(cache, key), why, _clear_fix(cache)))
    rep = collect.collect(cache, dry_run=True)
    for key in rep.deleted:
        out.append(Problem("collectable", _where(cache, key),
                           "left by a run that is gone, superseded, or a stale lease",
                           "check --repair removes it (the next commit's collection also does)"))
    return out


def check(cache, *, repair: bool = False) -> list[Problem]:
    try:
        found = scan(cache)
    except ReuseError as e:
        return [Problem("unreachable", cache.root, e.message, e.fix)]
    if not repair or not any(p.code in REPAIRABLE for p in found):
        return found
    if any(p.code == "invalid_record" for p in found):
        collect.publish_state(cache, "cleared", f"repair-{uuid.uuid4().hex}")
    rep = collect.collect(cache)
    if rep.fenced and not rep.skipped:   # its fence record supersedes the record it had to keep
        collect.collect(cache)
    after = scan(cache)
    left = {(p.code, p.path) for p in after}
    return [Problem(p.code, p.path, p.message, p.fix, True) for p in found if (p.code, p.path) not in left] + after
