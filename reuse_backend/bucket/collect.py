"""What is collected on a bucket, and when: never anything a live run or reader can still use.

A collection of one cache (after each commit, by ``gc`` and ``check --repair``) lists, in this
order: the log (t1), the data objects and the unfinished multipart uploads (t2), the leases of
runs and readers (t3), the log again (t4). Then:

* kept: every record from ``keep_from`` on, where ``keep_from`` is the newest record at t1, or the
  ``since`` of a live lease when that is older (a live run's base, a reader's version); every
  data object that a record someone may still read names (the records from t1's newest on, each
  live lease's base, and every record after a lease that has not yet said its base: ``exact``,
  leases.py); every data object of a run whose lease is live;
* deleted: the records before ``keep_from`` (never the newest: numbering never restarts; at most
  a page of them per collection, the oldest first), the data objects no kept record names whose
  run has no live lease, stale leases, unfinished uploads of runs without a live lease, stale
  single-flight claims with their entries, and entries older than a lease that have no claim
  (an entry goes with its claim, claims.py).

Why the order is safe: a reader or run takes its lease before it reads the log, so one that the
t3 listing missed reads a record at least as new as t1's newest, which is kept; a run that
committed after t1 released its lease after its record existed, so the t4 listing names its
objects; an object uploaded after t2 is not in the listing at all, and an upload listed at t2
belongs to a run whose lease existed before it, so a run without a live lease at t3 has ended
or is fenced (never a live run's upload: a run that began after t3 started its upload after t2).

Invariant (a stalled run publishes nothing of what was collected): before deleting anything of a
run whose lease is stale, the collection creates a ``fence`` record naming those runs at the next
log number (the current version again); a run named by a fence after its base publishes nothing
(commit.py). If that number is taken meanwhile, nothing is deleted this time. A fence names at
most ``records.MAX_FENCED`` runs; the others wait for the next collection. A key under
``leases/``, ``readers/`` or ``claims/`` that is no lease of ours (location.py) is nobody's run.

What this does not guarantee: a stale judgement uses the store's clock against the lease's
LastModified, so a run paused past its lease is fenced even if it would have resumed; it then
fails cleanly and its rerun succeeds. A stale claim is deleted only when its ETag is still the
one listed, but a run taking it over between that look and the delete loses it (a claim only
saves work: that run and a waiter may both encode).
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from ..errors import CacheBusyError, CorruptCacheError
from ..store.lease import stale_reason
from . import leases, log as commit_log, records
from .client import NotFound
from .location import ENTRY_SUFFIX

log = logging.getLogger("seedreuse")

PUBLISH_ATTEMPTS = 32
OLD_RECORDS_PER_COLLECTION = 1000


@dataclass
class Collected:
    done: list = field(default_factory=list)
    deleted: list = field(default_factory=list)       # keys removed (or that would be, dry run)
    fenced: list = field(default_factory=list)
    skipped: str | None = None


def publish_state(cache, kind: str, writer: str, *, fenced=(), at: int | None = None) -> list[str]:
    """Create a ``cleared`` or ``fence`` record at the next number (``at``: only there, the number
    after the record its caller surveyed); returns what was done, [] when ``at`` was taken. A fence
    repeats the current content (so no run has to rebase)."""
    for _ in range(PUBLISH_ATTEMPTS):
        present = commit_log.numbers(cache.client, cache.keys) if at is None else []
        seq = at if at is not None else commit_log.next_number(cache.keys, present[-1] if present else 0)
        rec = commit_log.state_record(cache.client, cache.keys, seq, kind, writer, fenced)
        if commit_log.create(cache.client, cache.keys, rec):
            what = f"fenced run(s) {sorted(fenced)}" if fenced else "cleared the cache" if kind == "cleared" \
                else "repeated the current version"
            return [f"{what} (commit record {seq})"]
        if at is not None:
            return []
    raise CacheBusyError(f"cache '{cache.name}': could not write a {kind} record", expected="a free log number",
                         actual=f"{PUBLISH_ATTEMPTS} lost races", fix="rerun when fewer runs commit at once")


def _since(owner: dict) -> tuple[int, bool]:
    """(since, exact) of a lease's owner (an owner that is not one: 0, keep everything)."""
    s = owner.get("since")
    return (s if isinstance(s, int) and not isinstance(s, bool) and s >= 0 else 0), owner.get("exact") is True


def _newest(client, keys, hint: int | None) -> int | None:
    """The newest record number, listed from ``hint`` (a number known to exist) when given."""
    present = commit_log.numbers(client, keys, hint - 1 if hint and hint > 1 else None)
    if hint and not present:                       # the log went back: list it whole
        present = commit_log.numbers(client, keys)
    return present[-1] if present else None


def _referenced(cache, newest_t1: int | None, newest_t4: int | None, owners: list[dict]) -> set[str] | None:
    """The data keys the records someone may still read name (module docstring); None when one
    of them does not read (then nothing is collected)."""
    client, keys = cache.client, cache.keys
    wanted: set[int] = set()
    loose = [s for s, exact in map(_since, owners) if not exact]
    lo = min([newest_t1 or newest_t4 or 1] + loose)
    if newest_t4:
        wanted |= {s for s in commit_log.numbers(client, keys, lo - 1 if lo > 1 else None) if s <= newest_t4}
    wanted |= {s for s, exact in map(_since, owners) if exact and s}
    out: set[str] = set()
    for s in sorted(wanted):
        try:
            rec = commit_log.read(client, keys, s)
        except CorruptCacheError:
            return None
        if rec is not None:
            out |= set(rec["objects"].values())
    return out


def collect(cache, *, dry_run: bool = False, hint: int | None = None) -> Collected:
    """Collect what dead runs left in one cache (module docstring). ``hint``: a record number
    known to exist (a commit's own), so the log is listed from there."""
    client, keys, out = cache.client, cache.keys, Collected()
    newest_t1 = _newest(client, keys, hint)                                         # t1
    data, _ = client.list(keys.data_prefix)                                         # t2
    uploads = client.multipart_uploads(keys.data_prefix)
    runs, stale_runs = leases.live(client, keys.lease_prefix, cache.lease_s, keys.parse_lease)      # t3
    readers, stale_readers = leases.live(client, keys.reader_prefix, cache.lease_s, keys.parse_reader)
    newest_t4 = _newest(client, keys, newest_t1)                                    # t4
    dead_claims = _dead_claims(cache)
    if not newest_t4 and not data and not uploads and not stale_runs and not stale_readers and not dead_claims:
        return out
    owners = runs + readers
    keep_from = min([newest_t1 or newest_t4 or 1] + [_since(o)[0] for o in owners])
    referenced = _referenced(cache, newest_t1, newest_t4, owners)
    if referenced is None:                        # a damaged record names nothing we may rely on:
        out.skipped = "a record that must be kept is unreadable; nothing was collected"
        return out                                # collect nothing rather than guess
    live_runs = {keys.parse_lease(o["key"]) for o in runs}
    stale_ids = sorted({keys.parse_lease(k) for k, _, _ in stale_runs})[:records.MAX_FENCED]
    fenced_now = set(stale_ids)
    keep_runs = live_runs | ({keys.parse_lease(k) for k, _, _ in stale_runs} - fenced_now)
    dead_data = []
    for o in data:
        parts = keys.parse_data(o.key)
        if parts is None:
            continue                             # not ours: never deleted by us
        run_id, sha = parts
        if f"data/{run_id}/{sha}" not in referenced and run_id not in keep_runs:
            dead_data.append(o.key)
    old = [s for s in commit_log.numbers(client, keys, limit=OLD_RECORDS_PER_COLLECTION)
           if s < keep_from and s != newest_t4] if newest_t4 and keep_from > 1 else []
    old_records = [keys.log(s) for s in old]
    gone_leases = [k for k, _, _ in stale_runs if keys.parse_lease(k) in fenced_now]
    dead_uploads = [(k, u) for k, u, _ in uploads
                    if (p := keys.parse_data(k)) is not None and p[0] not in keep_runs]
    deletions = old_records + dead_data + gone_leases + [k for k, _, _ in stale_readers] + [k for k, _ in dead_claims]
    if not deletions and not dead_uploads:
        return out
    out.fenced = stale_ids
    if dry_run:
        out.deleted = deletions + [k for k, _ in dead_uploads]
        return out
    if stale_ids:
        fenced = publish_state(cache, "fence", f"collect-{uuid.uuid4().hex}", fenced=stale_ids,
                               at=commit_log.next_number(keys, newest_t4 or 0))
        if not fenced:
            out.skipped = "another run committed during the collection; nothing was collected"
            return out
        out.done += fenced
    listed = dict(dead_claims)
    plain = [k for k in deletions if k not in listed]
    client.delete_many(plain)
    out.deleted += plain
    for k in listed:
        try:
            if client.head(k).etag != listed[k]:
                continue                         # taken over since the listing: live again
            client.delete(k)
            out.deleted.append(k)
        except NotFound:
            pass
    for key, upload_id in dead_uploads:
        client.abort_upload(key, upload_id)
        out.done.append(f"aborted the unfinished upload of {key}")
    if out.deleted:
        out.done.append(f"collected {len(dead_data)} unused data object(s), {len(old_records)} old record(s), "
                        f"{len(gone_leases) + len(stale_readers)} stale lease(s), {len(dead_claims)} "
                        "single-flight claim(s) and entries of dead runs")
    return out


def _dead_claims(cache) -> list[tuple[str, str]]:
    """(key, ETag) of the stale claims and of their entries, and of the entries older than a
    lease that have no claim (their holder died or failed to release them)."""
    client, keys = cache.client, cache.keys
    objs, _ = client.list(keys.claim_prefix)
    objs = [o for o in objs if keys.parse_claim(o.key)]
    now = client.server_now()
    entries = [o for o in objs if o.key.endswith(ENTRY_SUFFIX)]
    live, dead = set(), []
    for o in objs:
        if o.key.endswith(ENTRY_SUFFIX):
            continue
        try:
            owner, _ = leases.read(client, o.key)
        except Exception as e:  # noqa: BLE001 - an unreadable claim is judged by its age alone
            log.debug("claim %s unreadable: %s", o.key, e)
            owner = None
        if stale_reason(owner, o.modified, now, cache.lease_s) is None:
            live.add(o.key)
        else:
            dead.append((o.key, o.etag))
    stale = {k for k, _ in dead}
    for o in entries:            # a holder writes its claim before its entry, deletes it after
        claim = o.key[:-len(ENTRY_SUFFIX)] + ".json"
        if claim in stale or (claim not in live and stale_reason(None, o.modified, now, cache.lease_s)):
            dead.append((o.key, o.etag))
    return dead


def after_commit(cache, seq: int | None = None) -> None:
    rep = collect(cache, hint=seq)
    if rep.done:
        log.info("seedreuse: cache '%s': %s", cache.name, "; ".join(rep.done))
