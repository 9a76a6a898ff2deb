"""The commit log of one cache on a bucket: find the current record, create the next one.

Invariant (one winner per number): a record is written only by ``create``, a single PUT with
``If-None-Match: *`` at a number nobody has used; the store's atomic conditional create decides
between racing writers (probe.py checks the endpoint honours it). A number is never reused: the
latest record is never deleted (collect.py), so numbering never restarts under a stalled writer.

``latest(after=s)`` is one LIST of the keys after ``s``: the cheap "is my version still current?"
of the local tier. A create whose answer was lost (a timeout, then botocore's retry saw 412) is
told apart from a lost race by reading the record back: it is ours when it names our writer and
version (``create`` returns True then). A create that failed (refused past the retries, or
unanswered) is read back too: ours (the answer was lost), absent (nothing was published), or
unknown when the endpoint stopped answering (the error says so: readers then see this run's
complete version or the previous one, never a mix).
"""
from __future__ import annotations

import time

from ..errors import CorruptCacheError, ObjectStoreError
from . import records
from .client import Client, NotFound, Precondition, TooLarge
from .location import CacheKeys

READ_RETRIES = 5


def _get(client: Client, keys: CacheKeys, seq: int) -> dict | None:
    key = keys.log(seq)
    try:
        obj = client.get(key, records.MAX_RECORD_BYTES)
    except NotFound:
        return None
    except TooLarge as e:
        raise records.bad(keys, key, "it is too large", expected=f"<= {records.MAX_RECORD_BYTES} bytes",
                          actual=e.size) from None
    return records.parse(obj.body, keys, key, seq)


def read(client: Client, keys: CacheKeys, seq: int) -> dict | None:
    """The validated record ``seq`` (None when it does not exist)."""
    return _get(client, keys, seq)


def numbers(client: Client, keys: CacheKeys, after: int | None = None) -> list[int]:
    """The sequence numbers present after ``after`` (ascending); foreign keys are ignored."""
    start = keys.log(after) if after else None
    objs, _ = client.list(keys.log_prefix, start_after=start)
    return sorted(s for s in (keys.seq_of(o.key) for o in objs) if s is not None)


def latest(client: Client, keys: CacheKeys, after: int | None = None) -> tuple[int | None, dict | None]:
    """(seq, record) of the current record; (``after``, None) when nothing is newer than
    ``after`` (the caller's record is still current); (None, None) when the log is empty.
    A newest record that is invalid raises CorruptCacheError (nothing older is used instead:
    that would publish an older version as current)."""
    for _ in range(READ_RETRIES):
        present = numbers(client, keys, after)
        if not present:
            return (after, None) if after else (None, None)
        rec = _get(client, keys, present[-1])
        if rec is not None:
            return present[-1], rec
        time.sleep(0.05)        # listed, then gone: a collector removed it as superseded; list again
    raise CorruptCacheError(f"cache '{keys.name}': its commit log keeps changing while being read",
                            expected="a stable newest record", actual=f"{READ_RETRIES} tries",
                            fix="rerun; if it persists, check the bucket's listing consistency "
                                "(python -m reuse_backend probe)")


def between(client: Client, keys: CacheKeys, lo: int, hi: int) -> tuple[list[dict], bool]:
    """The records with lo < seq <= hi, and whether the range is complete (no number missing:
    a gap means a collector removed records there, so nothing can be said about fences in it)."""
    if hi <= lo:
        return [], True
    have = [s for s in numbers(client, keys, lo) if s <= hi]
    recs = [r for r in (_get(client, keys, s) for s in have) if r is not None]
    return recs, [r["seq"] for r in recs] == list(range(lo + 1, hi + 1))


def _ours(there: dict | None, rec: dict) -> bool:
    return there is not None and there["writer"] == rec["writer"] and \
        (there["manifest"] or {}).get("version") == (rec["manifest"] or {}).get("version")


def create(client: Client, keys: CacheKeys, rec: dict) -> bool:
    """Create record ``rec["seq"]``: True when it is ours, False when another writer has that
    number (the caller re-reads and tries the next one). An ObjectStoreError says in
    ``details["published"]`` whether the record exists: False (it does not), None (unknown:
    the endpoint stopped answering after the create may have been carried out)."""
    data = records.dumps(rec)
    key = keys.log(rec["seq"])
    try:
        client.put(key, data, create_only=True)
        return True
    except Precondition:
        try:
            there = _get(client, keys, rec["seq"])
        except CorruptCacheError:
            return False
        return _ours(there, rec)
    except ObjectStoreError as e:
        failed = e
    try:                      # refused or unanswered: was it carried out all the same?
        there = _get(client, keys, rec["seq"])
    except (ObjectStoreError, CorruptCacheError):
        raise ObjectStoreError(
            failed.message, expected=failed.expected, actual=failed.actual,
            fix=f"{failed.fix}. Whether commit record {rec['seq']} was created is unknown: readers see this "
                "run's complete version or the previous one, never a mix (the next run or check tells which)",
            details={**failed.details, "published": None}) from failed
    if _ours(there, rec):
        return True
    raise ObjectStoreError(failed.message, expected=failed.expected, actual=failed.actual,
                           fix=f"{failed.fix}. Commit record {rec['seq']} was not created: nothing of this run "
                               "was published", details={**failed.details, "published": False}) from failed
