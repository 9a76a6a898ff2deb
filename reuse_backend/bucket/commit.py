"""The commit of a run on a bucket: upload, then one conditional create of the next record.

Steps, each invariant stated where it is enforced:

1. The files this run wrote are uploaded to ``data/<run id>/<sha256>`` (immutable, named by their
   uploader and content). Nothing names them yet: a run killed here publishes nothing, and a
   collection removes them once its lease is gone (collect.py).
2. List the log from the newest record this run has seen (its base at first). Invariant (a
   base is checked, not trusted): that record must still be there with the ETag it had, else the
   log was reset under the run (a wiped prefix, a re-created bucket, another endpoint, a replica
   behind) and it publishes nothing. Invariant (fencing by the log, not by clocks): every record
   between this run's base and the newest must be there and none may name this run as fenced; a
   collection that judged this run dead wrote such a fence *before* deleting anything of it, and a
   gap means records were collected, which a live run's lease forbids. Then the run's lease must
   still be its own (one HEAD).
3. When the newest record holds another version than the one this run staged on, rebase onto it
   (store/rebase.py: its own complete version on top, take lists merged, never overwritten).
   Invariant 3.
4. Create record ``newest + 1`` with If-None-Match: ``*`` (log.py). Invariant (one winner): the
   store's conditional create lets exactly one writer have each number; the loser goes back to 2.
   A version becomes current by this one small PUT. A create that got no definite answer is
   resolved by log.py (read back, or the number taken away from the late write); when even that
   is unknown the run keeps its lease until it expires (it is abandoned, never released), so a
   collection fences the number before it removes anything of this run.

What this does not guarantee: Invariant 4's window (a paused writer, store/interface.py); on a
bucket it closes once a collection fenced the run (step 2).
"""
from __future__ import annotations

import logging
import time

from ..errors import CacheBusyError, ObjectStoreError, TransactionError
from ..store.rebase import rebase_if_changed
from . import log as commit_log, records
from .snapshot import BucketSnapshot

log = logging.getLogger("seedreuse")

MAX_ATTEMPTS = 64


def _upload(tx) -> None:
    """The files this run wrote (not carried, not uploaded already by a single-flight entry),
    each uploaded once, then named by reference (``staged.refs``)."""
    cache, staged = tx.cache, tx.staged
    done: dict[str, str] = {}
    for fname, entry in staged.local_files().items():
        rel = cache.keys.data_rel(tx.run.run_id, entry["sha256"])
        if rel not in done.values():
            tx.check_owned(f"upload {fname}")
            with tx.explaining(f"upload {fname}"):
                cache.client.upload(str(staged.file_path(fname)), cache.keys.data(rel), entry["bytes"])
        done[fname] = rel
    staged.refs.update(done)


def _fenced(tx, why: str) -> TransactionError:
    return tx.fenced_error("commit", why)


def _check_range(tx, seen: int, newest: int) -> dict | None:
    """Fencing (step 2) over the records (seen, newest]; returns the newest of them."""
    recs, complete = commit_log.between(tx.cache.client, tx.cache.keys, seen, newest)
    if not complete:
        raise _fenced(tx, f"records {seen + 1}..{newest} of its log were collected while it staged")
    for r in recs:
        if tx.run.run_id in r["fenced"]:
            raise _fenced(tx, f"record {r['seq']} fences it (its lease had expired)")
    return recs[-1] if recs else None


def _named_by_a_fence(tx, seen: int) -> None:
    """Fencing over whatever records are there after ``seen`` (its base is gone: the range cannot
    be complete, but a fence naming this run says why)."""
    for s in commit_log.numbers(tx.cache.client, tx.cache.keys, seen):
        r = commit_log.read(tx.cache.client, tx.cache.keys, s)
        if r is not None and tx.run.run_id in r["fenced"]:
            raise _fenced(tx, f"record {s} fences it (its lease had expired)")


def _base_gone(tx, known) -> TransactionError:
    tx.state = "failed"
    cache = tx.cache
    return TransactionError(
        f"run {tx.run.run_id} did not commit to cache '{cache.name}': commit record {known.seq} that it read is no "
        f"longer in {cache.root} as it was (the prefix was wiped or expired, the bucket re-created, the endpoint "
        "switched, or a replica is behind); nothing it wrote is used",
        expected=f"commit record {known.seq} (ETag {known.etag}) still there", actual="gone or replaced",
        fix="rerun: the run starts from what the bucket holds now. If this was not expected, check that no "
            "lifecycle rule expires objects under the prefix and that every worker uses the same endpoint "
            "(docs/OBJECT_STORAGE.md)", details={"cache": cache.name, "lost": "base record", "seq": known.seq})


def publish(tx) -> str:
    cache, staged = tx.cache, tx.staged
    try:
        with tx.explaining("make the staged files durable"):
            staged.make_durable()
        _upload(tx)
        known = tx.base_head
        seen = known.seq if known is not None else 0
        on = tx.base.version if tx.base is not None else None
        for attempt in range(MAX_ATTEMPTS):
            got = commit_log.look(cache.client, cache.keys, known)
            if got.known_gone:
                _named_by_a_fence(tx, seen)     # a collection fenced it, then removed its base: say so
                raise _base_gone(tx, known)
            if got.record is not None:
                newest = got.head.seq
                rec = _check_range(tx, seen, newest) or got.record
                seen, known = newest, got.head
                current = BucketSnapshot(cache, newest, rec) if rec["kind"] != "cleared" else None
                on = rebase_if_changed(tx, current, on)
            if not tx.lease.verify():
                raise _fenced(tx, "its run lease was removed (a collection judged it dead)")
            tx.check_owned("commit")
            m = staged.manifest(tx.run)
            objects = {f: staged.refs[f] for f in staged.files}
            record = records.make(commit_log.next_number(cache.keys, seen), "version", m, objects, tx.run.run_id)
            head = commit_log.create(cache.client, cache.keys, record)
            if head is not None:
                break
            time.sleep(min(0.5, 0.01 * 2 ** min(attempt, 6)))   # another run took the number
        else:
            raise CacheBusyError(
                f"cache '{cache.name}': run {tx.run.run_id} lost the race for the next commit record "
                f"{MAX_ATTEMPTS} times", expected="a free log number", actual=f"{MAX_ATTEMPTS} lost races",
                fix="rerun; other runs keep committing to this cache at a very high rate")
    except ObjectStoreError as e:
        if tx.state == "open":
            tx.state = "failed"
        if "published" in e.details:       # the record create says what happened (log.py)
            if e.details["published"] is None:
                tx.lease.abandon()         # unknown: a collection fences this run before removing its objects
            raise
        raise ObjectStoreError(e.message, expected=e.expected, actual=e.actual,
                               fix=f"{e.fix}. Nothing of this run was published: the last good version of "
                                   f"cache '{cache.name}' stays current",
                               details={**e.details, "published": False}) from e
    except BaseException:
        if tx.state == "open":
            tx.state = "failed"
        raise
    tx.state, tx.version, tx.seq = "committed", m["version"], head.seq
    for fname, entry in staged.files.items():       # this host holds what it wrote
        if staged.file_path(fname).is_file():
            cache.tier.adopt(staged.file_path(fname), entry["sha256"])
    cache.tier.remember(cache.keys, head, record)
    try:
        tx.remove_staging()          # uploaded and kept as blobs: the staging is done with
    except OSError as e:
        log.warning("seedreuse: could not remove the local staging of cache '%s': %s", cache.name, e)
    tx.finish()
    cache.after_commit(tx.seq, record)      # collection and the size budget; never raises
    return tx.version
