"""The commit log of one cache on a bucket: find the current record, create the next one.

Invariant (one winner per number): a record is written only by ``create``, a single PUT with
``If-None-Match: *`` at a number nobody has used, after it validated (records.parse): the store's
atomic conditional create decides between racing writers (probe.py checks the endpoint honours
it). A number is never reused: the latest record is never deleted (collect.py), so numbering
never restarts under a stalled writer. Numbers are bounded (1..``MAX_SEQ``, location.py): a key
out of range is no record of ours and is ignored (``check`` reports it).

Invariant (a remembered record is checked, not trusted): ``look(known)`` lists the log from the
record a host remembers (its number and ETag, one LIST) and says when that record is gone or
replaced (``known_gone``): the prefix was wiped, the bucket re-created, the endpoint switched, or
a replica is behind. A reader then drops what it remembered and reads the bucket's newest; a
commit whose base is gone publishes nothing (commit.py). Records are contiguous (each is created
at the newest + 1, collections delete only the oldest), so a gap is never filled by guessing.

A create that got no definite answer (a timeout, a dropped connection: the request may still be
in a proxy's or gateway's queue and land later) is resolved before anyone may act on it: the
record is read back (ours: published), and when it is absent the number is taken away from the
late write by creating a ``fence`` record there that repeats the previous one (a stand-in): then
the late PUT can only fail. Only when the endpoint answers none of this is the outcome
unknown (``details["published"]`` None); the run then keeps its lease until it expires, so
nothing of it is collected before a collection's fence takes the number (commit.py).
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from ..errors import CorruptCacheError, ObjectStoreError
from . import records
from .client import Client, NotFound, Precondition, TooLarge
from .location import MAX_SEQ, CacheKeys

READ_RETRIES = 5
MAX_TAKEN = 2          # numbers a commit takes away from its own late writes before it gives up


@dataclass(frozen=True)
class Head:
    """A record as a host remembers it: its number and the ETag it had."""
    seq: int
    etag: str


@dataclass
class Look:
    head: Head | None            # the newest record (None: the log is empty)
    record: dict | None          # its body; None when it is the known record (nothing new)
    known_gone: bool = False     # the remembered record is no longer there as it was
    went_back: bool = False      # ... and nothing newer is: the log restarted or is behind


def _get(client: Client, keys: CacheKeys, seq: int) -> tuple[dict, str] | None:
    key = keys.log(seq)
    try:
        obj = client.get(key, records.MAX_RECORD_BYTES)
    except NotFound:
        return None
    except TooLarge as e:
        raise records.bad(keys, key, "it is too large", expected=f"<= {records.MAX_RECORD_BYTES} bytes",
                          actual=e.size) from None
    return records.parse(obj.body, keys, key, seq), obj.etag


def read(client: Client, keys: CacheKeys, seq: int) -> dict | None:
    """The validated record ``seq`` (None when it does not exist)."""
    got = _get(client, keys, seq)
    return got[0] if got else None


def _present(client: Client, keys: CacheKeys, start_after: str | None = None, limit: int | None = None) -> list[Head]:
    objs, _ = client.list(keys.log_prefix, start_after=start_after, limit=limit)
    return [Head(s, o.etag) for o in objs if (s := keys.seq_of(o.key)) is not None]


def numbers(client: Client, keys: CacheKeys, after: int | None = None, *, limit: int | None = None) -> list[int]:
    """The record numbers present after ``after`` (ascending; the first ``limit`` keys listed
    when given); foreign keys are ignored."""
    return [h.seq for h in _present(client, keys, keys.log(after) if after else None, limit)]


def look(client: Client, keys: CacheKeys, known: Head | None = None) -> Look:
    """The newest record, listed from ``known`` (one LIST when nothing changed); see the module
    docstring. A newest record that is invalid raises CorruptCacheError (nothing older is used
    instead: that would publish an older version as current)."""
    for _ in range(READ_RETRIES):
        start = keys.log(known.seq - 1) if known is not None and known.seq > 1 else None
        present = _present(client, keys, start)
        gone = known is not None and (not present or present[0] != known)
        back = gone and (not present or present[0].seq == known.seq)    # else: superseded, then collected
        if gone and not present:               # nothing at or after it: the log is behind this host
            present = _present(client, keys)
        if not present:
            return Look(None, None, gone, back)
        newest = present[-1]
        if not gone and newest == known:
            return Look(known, None)
        got = _get(client, keys, newest.seq)
        if got is not None:
            return Look(Head(newest.seq, got[1]), got[0], gone, back)
        time.sleep(0.05)        # listed, then gone: a collector removed it as superseded; list again
    raise CorruptCacheError(f"cache '{keys.name}': its commit log keeps changing while being read",
                            expected="a stable newest record", actual=f"{READ_RETRIES} tries",
                            fix="rerun; if it persists, check the bucket's listing consistency "
                                "(python -m reuse_backend probe)")


def newest_head(client: Client, keys: CacheKeys) -> Head | None:
    """The newest record as listed (not read: it may be invalid), or None."""
    present = _present(client, keys)
    return present[-1] if present else None


def latest(client: Client, keys: CacheKeys) -> tuple[int | None, dict | None]:
    """(seq, record) of the newest record, or (None, None) when the log is empty."""
    got = look(client, keys)
    return (got.head.seq, got.record) if got.head is not None else (None, None)


def between(client: Client, keys: CacheKeys, lo: int, hi: int) -> tuple[list[dict], bool]:
    """The records with lo < seq <= hi, and whether the range is complete (no number missing:
    a gap means records were removed there, so nothing can be said about fences in it). Reads
    only what is present: no memory for the numbers of a gap."""
    if hi <= lo:
        return [], True
    have = [s for s in numbers(client, keys, lo) if s <= hi]
    recs = [r for r in (read(client, keys, s) for s in have) if r is not None]
    return recs, len(recs) == hi - lo


def next_number(keys: CacheKeys, newest: int) -> int:
    """The number after ``newest``; a typed error at the last one (a record there was not made by
    SeedReuse: at a million commits a second the pack would need 30,000 years to reach it)."""
    if newest >= MAX_SEQ:
        key = keys.log(newest)
        raise CorruptCacheError(
            f"cache '{keys.name}': its newest commit record s3://{keys.loc.bucket}/{key} has the last number "
            "a record can have, so nothing can follow it", expected=f"record numbers below {MAX_SEQ}",
            actual=newest, fix=f"the object was not written by SeedReuse: python -m reuse_backend --root "
            f"{keys.loc.url} check {keys.name} --repair removes it (or delete it by hand), then rerun",
            details={"cache": keys.name, "key": key})
    return newest + 1


def state_record(client: Client, keys: CacheKeys, seq: int, kind: str, writer: str, fenced=()) -> dict:
    """A ``cleared`` record, or a ``fence`` record that repeats the content of record ``seq - 1``
    (cleared when that one is absent or cleared), to be created at ``seq``."""
    try:
        parent = read(client, keys, seq - 1) if kind == "fence" and seq > 1 else None
    except CorruptCacheError:           # an invalid record has no content to repeat
        parent = None
    if kind == "fence" and parent is not None and parent["kind"] != "cleared":
        return records.make(seq, "fence", parent["manifest"], parent["objects"], writer, fenced)
    return records.make(seq, "cleared", None, {}, writer, fenced)


def _ours(there: dict | None, rec: dict) -> bool:
    return there is not None and there["writer"] == rec["writer"] and \
        (there["manifest"] or {}).get("version") == (rec["manifest"] or {}).get("version")


def _attempts(client: Client, key: str, data: bytes):
    """Create ``key`` one attempt at a time: ("created" | "taken" | "failed", the ETag or the last
    error (its message counting every attempt), whether an attempt went unanswered and may still
    be carried out)."""
    err, unanswered, tries = None, False, max(1, client.attempts)
    for attempt in range(tries):
        try:
            return "created", client.put(key, data, create_only=True, once=True), unanswered
        except Precondition:
            return "taken", None, unanswered
        except ObjectStoreError as e:
            err = e
            unanswered |= not e.details.get("answered", False)
            if attempt + 1 < tries:
                time.sleep(min(2.0, 0.1 * 2 ** attempt))
    if tries > 1:
        err = ObjectStoreError(err.message.replace(" after 1 attempt:", f" after {tries} attempts:"),
                               expected=err.expected, actual=err.actual, fix=err.fix,
                               details={**err.details, "attempts": tries})
    return "failed", err, unanswered


def _failed(e: ObjectStoreError, published, what: str) -> ObjectStoreError:
    return ObjectStoreError(e.message, expected=e.expected, actual=e.actual, fix=f"{e.fix}. {what}",
                            details={**e.details, "published": published})


def create(client: Client, keys: CacheKeys, rec: dict) -> Head | None:
    """Create record ``rec["seq"]`` (validated first): its Head when it is ours, None when another
    writer has that number (the caller re-reads and tries the next one). An ObjectStoreError
    says in ``details["published"]`` whether the record exists: False (it does not and cannot
    appear later), None (unknown: the endpoint stopped answering)."""
    seq = rec["seq"]
    key = keys.log(seq)
    data = records.dumps(rec)
    records.parse(data, keys, key, seq)          # never create what a reader would refuse
    outcome, err, late = _attempts(client, key, data)        # late: an attempt may still land
    if outcome == "created":
        return Head(seq, err)
    err = err if outcome == "failed" else None
    taken = 0
    while True:
        try:
            got = _get(client, keys, seq)
        except CorruptCacheError:
            return None                           # somebody's record, not ours
        except ObjectStoreError as e:
            raise _failed(err or e, None, f"Whether commit record {seq} was created is unknown: readers see "
                          "this run's complete version or the previous one, never a mix (the next run or check "
                          "tells which)") from e
        if got is not None:                       # ours (an answer was lost), or the number is another's
            return Head(seq, got[1]) if _ours(got[0], rec) else None
        if outcome == "taken":                    # 412, then gone: collected; the caller lists again
            return None
        if not late:
            raise _failed(err, False, f"Commit record {seq} was not created: nothing of this run was published")
        if taken >= MAX_TAKEN:
            raise _failed(err, None, f"Whether commit record {seq} will be created is unknown (the endpoint keeps "
                          "dropping requests): readers see this run's version or the previous one, never a mix")
        # absent, and an attempt may still land: take the number away from it
        taken += 1
        stand_in = state_record(client, keys, seq, "fence", f"late-{uuid.uuid4().hex}")
        outcome, _, _ = _attempts(client, key, records.dumps(stand_in))
        if outcome == "created":
            return None                           # the late write can only fail now: try the next number
