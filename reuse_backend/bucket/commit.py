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
4. Create record ``newest + 1`` with If-None-Match: ``*`` (log.py). Invariant (one winner): the
   store's conditional create lets exactly one writer have each number; the loser goes back to 2.
   A version becomes current by this one small PUT.
5. This host keeps what the run wrote (hard links into the local tier), then the run's local
   staging is removed (a committed run leaves nothing on the host; a killed one's staging is
   removed by the next run of the cache on that host, local_tier.sweep_staging).

What this does not guarantee: a run whose lease expired but that no collection fenced (nothing
was collected meanwhile) still publishes its own complete version: nothing of it was removed,
and readers see it or the next one, never a mix (as on the folder store).
"""
from __future__ import annotations

import logging
import time

from ..errors import CacheBusyError, TransactionError
from ..store import rebase
from . import log as commit_log, records
from .snapshot import BucketSnapshot

log = logging.getLogger("seedreuse")

MAX_ATTEMPTS = 64


def _upload(tx) -> None:
    cache, staged = tx.cache, tx.staged
    done: dict[str, str] = {}
    for fname, entry in staged.local_files().items():
        rel = cache.keys.data_rel(tx.run.run_id, entry["sha256"])
        if rel not in done.values() and staged.uploaded.get(fname) != rel:   # a published entry is uploaded
            tx.fence(f"upload {fname}")
            with tx.explaining(f"upload {fname}"):
                cache.client.upload(str(staged.file_path(fname)), cache.keys.data(rel), entry["bytes"])
        done[fname] = rel
    staged.uploaded = done


def _fenced(tx, why: str) -> TransactionError:
    tx.state = "fenced"
    return TransactionError(
        f"run {tx.run.run_id} was fenced on cache '{tx.cache.name}': {why}; nothing it wrote is used",
        expected="this run's lease kept and no fence naming it", actual=why,
        fix=f"the run stopped heartbeating for longer than the lease ({tx.cache.lease_s:g} s): a paused or "
            "overloaded worker, or an unreachable object store. Rerun it; raise SEEDREUSE_LEASE_S if "
            "workers are paused that long on purpose", details={"cache": tx.cache.name, "lost": "run lease"})


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
                now = (rec["manifest"] or {}).get("version") if rec["kind"] != "cleared" else None
                if now != on:
                    current = BucketSnapshot(cache, newest, rec) if now is not None else None
                    tx.rebased = rebase.rebase(tx, current)
                    tx.warnings.append(tx.rebased)
                    log.info("cache '%s', run %s: %s", cache.name, tx.run.run_id, tx.rebased)
                    on = now
            if not tx.lease.verify():
                raise _fenced(tx, "its run lease was removed (a collection judged it dead)")
            tx.fence("commit")
            m = staged.manifest(tx.run)
            objects = {f: staged.refs.get(f) or staged.uploaded[f] for f in staged.files}
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
    except BaseException:
        if tx.state == "open":
            tx.state = "failed"
        raise
    tx.state, tx.version, tx.seq = "committed", m["version"], seen + 1
    for fname, entry in staged.local_files().items():   # this host holds what it wrote
        cache.tier.adopt(staged.file_path(fname), entry["sha256"])
    cache.tier.remember(cache.keys, tx.seq, record)
    try:       # its files are in the bucket and the tier now: the local staging goes (nobody else's)
        tx.remove_staging()
    except OSError as e:    # only this process could remove it; a restarted worker's sweep does
        log.warning("seedreuse: could not remove the local staging of cache '%s': %s", cache.name, e)
    tx.finish()
    cache.after_commit(tx.seq)      # collection and the size budget; never raises
    return tx.version
