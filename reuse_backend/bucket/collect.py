"""What is collected on a bucket, and when: never anything a live run or reader can still use.

A collection of one cache (after each commit, by ``gc`` and ``check --repair``) lists, in this
order: the log (t1), the data objects (t2), the leases of runs and readers (t3), the log again
(t4). Then:

* kept: every record from ``keep_from`` on, where ``keep_from`` is the newest record at t1, or the
  ``since`` of a live lease when that is older (a live run's base, a reader's version); every
  data object such a record names; every data object of a run whose lease is live;
* deleted: the records before ``keep_from`` (never the newest: numbering never restarts), the data
  objects no kept record names whose run has no live lease, stale leases, incomplete uploads of
  runs without a live lease, stale single-flight claims with their entries, and entries older
  than a lease that have no claim (an entry goes with its claim, claims.py).

Why the order is safe: a reader or run takes its lease before it reads the log, so one that the
t3 listing missed reads a record at least as new as t1's newest, which is kept; a run that
committed after t1 released its lease after its record existed, so the t4 listing names its
objects; an object uploaded after t2 is not in the listing at all.

Invariant (a stalled run publishes nothing of what was collected): before deleting anything
while a run lease is stale, the collection creates a ``fence`` record naming those runs at the next
log number (the current version again); a run named by a fence after its base publishes nothing
(commit.py). If that number is taken meanwhile, nothing is deleted this time.

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


@dataclass
class Collected:
    done: list = field(default_factory=list)
    deleted: list = field(default_factory=list)       # keys removed (or that would be, dry run)
    fenced: list = field(default_factory=list)
    skipped: str | None = None


def publish_state(cache, kind: str, writer: str, *, fenced=(), at: int | None = None) -> list[str]:
    """Create a ``cleared`` or ``fence`` record at the next number (``at``: only there);
    returns what was done. A fence repeats the current content (so no run has to rebase)."""
    for _ in range(PUBLISH_ATTEMPTS):
        present = commit_log.numbers(cache.client, cache.keys)
        newest = present[-1] if present else 0
        if at is not None and newest + 1 != at:
            return []
        parent = commit_log.read(cache.client, cache.keys, newest) if newest and kind == "fence" else None
        if kind == "fence" and parent is not None and parent["kind"] != "cleared":
            rec = records.make(newest + 1, "fence", parent["manifest"], parent["objects"], writer, fenced)
        else:
            rec = records.make(newest + 1, "cleared", None, {}, writer, fenced)
        if commit_log.create(cache.client, cache.keys, rec):
            what = f"fenced run(s) {sorted(fenced)}" if fenced else "cleared the cache"
            return [f"{what} (commit record {newest + 1})"]
        if at is not None:
            return []
    raise CacheBusyError(f"cache '{cache.name}': could not write a {kind} record", expected="a free log number",
                         actual=f"{PUBLISH_ATTEMPTS} lost races", fix="rerun when fewer runs commit at once")


def _since(owner: dict) -> int:
    s = owner.get("since")
    return s if isinstance(s, int) and not isinstance(s, bool) and s >= 0 else 0


def collect(cache, *, dry_run: bool = False) -> Collected:
    client, keys, out = cache.client, cache.keys, Collected()
    first = commit_log.numbers(client, keys)                                        # t1
    data, _ = client.list(keys.data_prefix)                                         # t2
    runs, stale_runs = leases.live(client, keys.lease_prefix, cache.lease_s)        # t3
    readers, stale_readers = leases.live(client, keys.reader_prefix, cache.lease_s)
    now = commit_log.numbers(client, keys)                                          # t4
    dead_claims = _dead_claims(cache)
    if not first and not now and not data and not stale_runs and not stale_readers and not dead_claims:
        return out
    keep_from = min([first[-1] if first else (now[-1] if now else 1)]
                    + [_since(o) for o in runs + readers])
    kept, referenced = [s for s in now if s >= keep_from], set()
    for s in kept:
        try:
            rec = commit_log.read(client, keys, s)
        except CorruptCacheError as e:            # a damaged record names nothing we may rely on:
            out.skipped = f"record {s} is unreadable ({e.message}); nothing was collected"
            return out                           # collect nothing rather than guess
        if rec is not None:
            referenced |= set(rec["objects"].values())
    live_runs = {o.get("run_id") for o in runs}
    dead_data = []
    for o in data:
        parts = keys.parse_data(o.key)
        if parts is None:
            continue                             # not ours: never deleted by us
        run_id, sha = parts
        if f"data/{run_id}/{sha}" not in referenced and run_id not in live_runs:
            dead_data.append(o.key)
    old_records = [keys.log(s) for s in now if s < keep_from and s != now[-1]]
    deletions = old_records + dead_data + [k for k, _, _ in stale_runs] + [k for k, _, _ in stale_readers] \
        + [k for k, _ in dead_claims]
    if not deletions:
        return out
    stale_ids = sorted({k.rsplit("/", 1)[1][:-len(".json")] for k, _, _ in stale_runs})
    out.fenced = stale_ids
    if dry_run:
        out.deleted = deletions
        return out
    if stale_ids:
        fenced = publish_state(cache, "fence", f"collect-{uuid.uuid4().hex}", fenced=stale_ids,
                               at=(now[-1] if now else 0) + 1)
        if not fenced:
            out.skipped = "another run committed during the collection; nothing was collected"
            return out
        out.done += fenced
    listed = dict(dead_claims)
    for k in deletions:
        try:
            if k in listed and client.head(k).etag != listed[k]:
                continue                         # taken over since the listing: live again
            client.delete(k)
            out.deleted.append(k)
        except NotFound:
            pass
    out.done += _abort_uploads(cache, live_runs)
    if out.deleted:
        out.done.append(f"collected {len(dead_data)} unused data object(s), {len(old_records)} old record(s), "
                        f"{len(stale_runs) + len(stale_readers)} stale lease(s), {len(dead_claims)} "
                        "single-flight claim(s) and entries of dead runs")
    return out


def _dead_claims(cache) -> list[tuple[str, str]]:
    """(key, ETag) of the stale claims and of their entries, and of the entries older than a
    lease that have no claim (their holder died or failed to release them)."""
    client, keys = cache.client, cache.keys
    objs, _ = client.list(keys.claim_prefix)
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


def _abort_uploads(cache, live_runs: set) -> list[str]:
    done = []
    for key, upload_id, _initiated in cache.client.multipart_uploads(cache.keys.data_prefix):
        parts = cache.keys.parse_data(key)
        if parts is not None and parts[0] not in live_runs:
            cache.client.abort_upload(key, upload_id)
            done.append(f"aborted the unfinished upload of {key}")
    return done


def after_commit(cache) -> None:
    rep = collect(cache)
    if rep.done:
        log.info("seedreuse: cache '%s': %s", cache.name, "; ".join(rep.done))
