"""``check`` of one cache on a bucket, optionally repaired: the folder store's check, for objects.

Found: a newest commit record that does not validate (``invalid_record``); an object of the
current version missing, of the wrong size or of other content (every object is downloaded and
hashed, also one this host holds: the bucket's object is checked, not this host's copy;
``missing_object``, ``bad_object``); a value file of the right hash that does not load as a tensor
file (``unreadable_tensor``: the structure check of a load, nothing is unpickled or executed); a
take index that does not match the version (``bad_take_index``); what a collection would remove
(``collectable``: data objects no kept record names whose runs are gone, superseded records, stale
leases and claims).

Also found: keys under ``log/`` that are no record of ours (a number out of range, a folder
marker: ``foreign_record``, ignored by every reader and writer) and a newest record at the last
number a record can have (``last_number``: nothing can follow it).

Repair runs the collection (collect.py: never anything a live run or reader can use; twice when
the first wrote a fence record, which supersedes the record the first had to keep), removes
foreign keys under ``log/`` and a record at the last number, and, when the newest record does not
validate, publishes over it the newest intact version below it (valid, every object present) or,
when there is none, a cleared state (the next successful run rebuilds the cache). So nothing a
stranger writes into the prefix makes repair discard an intact version, and it never deletes a
valid version: a broken one is reported with the command that clears it.
"""
from __future__ import annotations

import os
import uuid

from ..errors import CorruptCacheError, ReuseError
from ..storage import fsops, serialize
from ..store import take_index
from ..store.file_checks import check_loadable
from ..store.check import Problem
from . import collect, log as commit_log, records
from .client import NotFound
from .location import MAX_SEQ

REPAIRABLE = {"collectable", "invalid_record", "foreign_record", "last_number"}
RESTORE_LOOKBACK = 16       # records below an invalid newest one that repair reads for an intact version


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


def _foreign(cache) -> list[str]:
    objs, _ = cache.client.list(cache.keys.log_prefix)
    return [o.key for o in objs if cache.keys.seq_of(o.key) is None]


def scan(cache, *, verify: bool = True) -> list[Problem]:
    out: list[Problem] = [Problem("foreign_record", _where(cache, k), "not a commit record of SeedReuse (ignored)",
                                  "check --repair removes it") for k in _foreign(cache)]
    try:
        seq, rec = commit_log.latest(cache.client, cache.keys)
    except CorruptCacheError as e:
        key = e.details.get("key", cache.keys.log_prefix)
        return out + [Problem("invalid_record", _where(cache, key), e.message,
                              "check --repair publishes the newest intact version below it again (or a cleared "
                              "state when there is none; the next run rebuilds the cache)")]
    if seq == MAX_SEQ:
        out.append(Problem("last_number", _where(cache, cache.keys.log(seq)),
                           "a record at the last number a record can have: nothing can follow it (not written by "
                           "SeedReuse)", "check --repair removes it"))
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


def _intact(cache, rec: dict) -> bool:
    """Every object the record names is there with the size it says (one HEAD each)."""
    sizes = {rel: rec["manifest"]["files"][f]["bytes"] for f, rel in rec["objects"].items()}
    for rel, size in sizes.items():
        try:
            if cache.client.head(cache.keys.data(rel)).size != size:
                return False
        except NotFound:
            return False
    return True


def _restore(cache) -> None:
    """Over an invalid newest record: the newest intact version below it again (a ``version``
    record of that manifest and objects), else a cleared state."""
    bad = commit_log.newest_head(cache.client, cache.keys)
    seq = bad.seq if bad is not None else 0
    below = [s for s in commit_log.numbers(cache.client, cache.keys) if s < seq][-RESTORE_LOOKBACK:]
    for s in reversed(below):
        try:
            rec = commit_log.read(cache.client, cache.keys, s)
        except CorruptCacheError:
            continue
        if rec is None or rec["kind"] == "cleared":
            break
        if _intact(cache, rec):
            again = records.make(commit_log.next_number(cache.keys, seq), "version", rec["manifest"], rec["objects"],
                                 f"repair-{uuid.uuid4().hex}")
            if commit_log.create(cache.client, cache.keys, again) is not None:
                return
            break
    collect.publish_state(cache, "cleared", f"repair-{uuid.uuid4().hex}")


def check(cache, *, repair: bool = False) -> list[Problem]:
    try:
        found = scan(cache)
    except ReuseError as e:
        return [Problem("unreachable", cache.root, e.message, e.fix)]
    if not repair or not any(p.code in REPAIRABLE for p in found):
        return found
    doomed = _foreign(cache)
    if any(p.code == "last_number" for p in found):
        doomed.append(cache.keys.log(MAX_SEQ))
    cache.client.delete_many(doomed)
    if any(p.code == "invalid_record" for p in found):
        _restore(cache)
    rep = collect.collect(cache)
    if rep.fenced and not rep.skipped:   # its fence record supersedes the record it had to keep
        collect.collect(cache)
    after = scan(cache)
    left = {(p.code, p.path) for p in after}
    return [Problem(p.code, p.path, p.message, p.fix, True) for p in found if (p.code, p.path) not in left] + after
