"""The commit of a run on a bucket: upload, then one conditional create of the next record.

Steps, each invariant stated where it is enforced:

1. The files this run wrote are uploaded to ``data/<run id>/<sha256>`` (immutable, named by their
   uploader and content). Nothing names them yet: a run killed here publishes nothing, and a
   collection removes them once its lease is gone (collect.py).
2. Read the log after the newest record this run has seen. Invariant (fencing by the log, not by
   clocks): every record between this run's base and the newest must be there and none may name
   this run as fenced; a collection that judged this run dead wrote such a fence *before* deleting
   anything of it, and a gap means records were collected, which a live run's lease forbids. Then
   the run's lease must still be its own (one HEAD).
3. When the newest record holds another version than the one this run staged on, rebase onto it
   (store/rebase.py: its own complete version on top, take lists merged, never overwritten).
   Invariant 3.
4. Create record ``newest + 1`` with If-None-Match: ``*`` (log.py). Invariant (one winner): the
   store's conditional create lets exactly one writer have each number; the loser goes back to 2.
   A version becomes current by this one small PUT.

What this does not guarantee: a run whose lease expired but that no collection fenced (nothing
was collected meanwhile) still publishes its own complete version (Invariant 4): nothing of it was removed,
and readers see it or the next one, never a mix (as on the folder store).
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


def publish(tx) -> str:
    cache, staged = tx.cache, tx.staged
    try:
        with tx.explaining("make the staged files durable"):
            staged.make_durable()
        _upload(tx)
        seen = tx.base_seq
        on = tx.base.version if tx.base is not None else None
        for attempt in range(MAX_ATTEMPTS):
            newest, rec = commit_log.latest(cache.client, cache.keys, after=seen or None)
            if newest is not None and newest != seen:
                rec = _check_range(tx, seen, newest)
                seen = newest
                current = BucketSnapshot(cache, newest, rec) if rec["kind"] != "cleared" else None
                on = rebase_if_changed(tx, current, on)
            if not tx.lease.verify():
                raise _fenced(tx, "its run lease was removed (a collection judged it dead)")
            tx.check_owned("commit")
            m = staged.manifest(tx.run)
            objects = {f: staged.refs[f] for f in staged.files}
            record = records.make(seen + 1, "version", m, objects, tx.run.run_id)
            records.parse(records.dumps(record), cache.keys, cache.keys.log(seen + 1), seen + 1)
            if commit_log.create(cache.client, cache.keys, record):
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
            raise
        raise ObjectStoreError(e.message, expected=e.expected, actual=e.actual,
                               fix=f"{e.fix}. Nothing of this run was published: the last good version of "
                                   f"cache '{cache.name}' stays current",
                               details={**e.details, "published": False}) from e
    except BaseException:
        if tx.state == "open":
            tx.state = "failed"
        raise
    tx.state, tx.version, tx.seq = "committed", m["version"], seen + 1
    for fname, entry in staged.files.items():       # this host holds what it wrote
        if staged.file_path(fname).is_file():
            cache.tier.adopt(staged.file_path(fname), entry["sha256"])
    cache.tier.remember(cache.keys, tx.seq, record)
    try:
        tx.remove_staging()          # uploaded and kept as blobs: the staging is done with
    except OSError as e:
        log.warning("seedreuse: could not remove the local staging of cache '%s': %s", cache.name, e)
    tx.finish()
    cache.after_commit(tx.seq)      # collection and the size budget; never raises
    return tx.version
