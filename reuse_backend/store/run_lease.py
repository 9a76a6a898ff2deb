"""Per-run leases: runs stage without the writer lock, each under a lease of its own.

Layout inside ``<root>/<name>.tmp/`` (see docs/ARCHITECTURE.md):

* ``<staging id>/``: the staging directory of one run (staging.py);
* ``<staging id>.lease``: that run's **run lease**, a lease file (lock.py: owner JSON, mtime
  heartbeat, created by link, fenced release), taken *before* the staging
  directory is created and released only *after* it was published or removed;
* ``<slot>-<key digest>.claim``: a single-flight **claim** (single_flight.py), a lease file too;
* ``<slot>-<key digest>.entry/``: the encoding a claim's holder published for the runs waiting
  on it (single_flight.py), removed with the claim;
* lock temp files of those (``.new-``/``.broken.``/``.release.``) and ``.stale-<hex>``
  (a dead run's staging being deleted).

Invariant (staging, enforced by ``remove_dead``): a staging directory is removed only when its
lease is stale or absent, judged exactly like the writer lock (owner provably dead on this host,
or heartbeat older than the lease): a live run's staging is never removed, a dead run's is
by the next recovery (a reader's, a writer's commit, gc, check --repair). A run whose lease
turned stale (paused past it) finds its staging moved away and is fenced (transaction.py).

What this does not guarantee: a lease only says a run is alive; whether its staging is complete
is decided by its commit. The listing of ``.tmp`` must be current on every host (true on the
filesystems probe.py calls safe).
"""
from __future__ import annotations

import errno
import logging
import os
import time
import uuid
from pathlib import Path

from ..errors import TransactionError
from ..storage import fsops
from .lock import RUN_LEASE, LeaseFile, break_stale, lock_status
from .lock_file import BROKEN_TAG, NEW_TAG, RELEASE_TAG

log = logging.getLogger("seedreuse")

LEASE_SUFFIX = ".lease"
CLAIM_SUFFIX = ".claim"
ENTRY_SUFFIX = ".entry"   # <slot>-<digest>.entry/: what the claim's holder encoded (single_flight.py)
ENTRY_PART = ".entry.part-"   # an entry being written (renamed to its name when complete)
STALE_TAG = ".stale-"     # <name>.tmp/.stale-<hex>: staging of a dead run moved aside, being deleted
_TEMP_TAGS = (NEW_TAG, BROKEN_TAG, RELEASE_TAG)


def lease_path(tmp: Path, staging_id: str) -> Path:
    return Path(tmp) / f"{staging_id}{LEASE_SUFFIX}"


def acquire_in_tmp(path: Path, run_id: str, *, role: str, lease_s: float, heartbeat_s: float, cache_name: str,
                   dir_mode: int = 0o755) -> LeaseFile:
    """A lease file in ``.tmp`` (a run lease or a claim, lock.py), creating ``.tmp`` when needed.
    ``.tmp`` is removed whenever it is empty (the last run to finish, recovery), so the create is
    retried (bounded) when it vanished in between. CacheBusyError when another live run holds it."""
    for _ in range(20):
        fsops.mkdir(path.parent, dir_mode, exist_ok=True)
        try:
            return LeaseFile(path, run_id, lease_s=lease_s, heartbeat_s=heartbeat_s,
                             cache_name=cache_name, role=role).acquire()
        except FileNotFoundError:          # the empty .tmp was removed meanwhile: create it again
            continue
    raise TransactionError(f"cannot create {path.name} in {path.parent}", expected="a stable staging folder",
                           actual="removed again and again", fix="rerun; check the cache root's filesystem")


def acquire(cache, staging_id: str, run_id: str) -> LeaseFile:
    """The run lease of one run (its staging id is fresh and random: nobody else holds this name)."""
    return acquire_in_tmp(lease_path(cache.paths.tmp, staging_id), run_id, role=RUN_LEASE, lease_s=cache.lease_s,
                             heartbeat_s=cache.heartbeat_s, cache_name=cache.name, dir_mode=cache.dir_mode)


def _is_temp(entry: str) -> bool:
    return any(t in entry for t in _TEMP_TAGS)


def _listdir(tmp: Path) -> list[str]:
    try:
        return sorted(os.listdir(tmp))
    except (FileNotFoundError, NotADirectoryError):
        return []


def live_runs(paths, lease_s: float) -> list[dict]:
    """Owners of the live run leases of a cache (runs staging now)."""
    out = []
    for entry in _listdir(paths.tmp):
        if entry.endswith(LEASE_SUFFIX) and not _is_temp(entry):
            st = lock_status(paths.tmp / entry, lease_s)
            if st["state"] == "live":
                out.append(st["owner"] or {"path": str(paths.tmp / entry)})
    return out


def dead_entries(paths, lease_s: float) -> list[tuple[Path, str]]:
    """What ``remove_dead`` would remove now: (path, why), read-only (check)."""
    out = []
    names = _listdir(paths.tmp)
    for entry in names:
        why = _why_dead(paths.tmp, entry, lease_s)
        if why:
            out.append((paths.tmp / entry, why))
    if not names and os.path.lexists(paths.tmp):
        out.append((paths.tmp, "empty staging folder" if os.path.isdir(paths.tmp) else "not a folder"))
    return out


def _why_dead(tmp: Path, entry: str, lease_s: float) -> str | None:
    path = tmp / entry
    if entry.startswith(STALE_TAG):
        return "staging of a dead run being deleted"
    if _is_temp(entry):
        # removing one under a live acquirer, breaker or releaser is harmless (it retries or
        # finds nothing to put back: lock.py), as for the writer lock's temp files
        return "leftover lock temp file"
    if entry.endswith((LEASE_SUFFIX, CLAIM_SUFFIX)):
        st = lock_status(path, lease_s)
        kind = "run lease" if entry.endswith(LEASE_SUFFIX) else "single-flight claim"
        return f"stale {kind}: {st['reason']}" if st["state"] == "stale" else None
    if ENTRY_PART in entry:
        # an entry is written only while its claim is held (single_flight.Claimed.publish): a part
        # whose claim is not live belongs to a holder that died (or was fenced) while writing it
        st = lock_status(tmp / (entry.split(ENTRY_PART)[0] + CLAIM_SUFFIX), lease_s)
        if st["state"] != "live":
            return "unfinished single-flight entry of a claim that is gone"
    if not os.path.isdir(path) or os.path.islink(path) or ENTRY_PART in entry:
        try:
            age = time.time() - os.lstat(path).st_mtime
        except FileNotFoundError:
            return None
        return f"stray file ({age:.0f}s old)" if age > lease_s else None
    if entry.endswith(ENTRY_SUFFIX):
        # an encoding published for waiters lives as long as its claim (single_flight.py)
        st = lock_status(tmp / (entry[:-len(ENTRY_SUFFIX)] + CLAIM_SUFFIX), lease_s)
        return None if st["state"] == "live" else "single-flight entry of a claim that is gone"
    st = lock_status(lease_path(tmp, entry), lease_s)
    if st["state"] == "live":
        return None
    # the lease is taken before the staging directory exists and released after it is gone:
    # a staging directory without a live lease belongs to a dead (or fenced) run
    return "staging of a run that is gone" if st["state"] == "free" else f"staging of a dead run: {st['reason']}"


def remove_dead(paths, lease_s: float) -> list[str]:
    """Remove the staging of dead runs, stale leases and claims, old lock temp files; never
    anything of a live run (the invariant above). Each staging directory is first *moved aside*
    under a fresh name and only then deleted, so a fenced writer that still runs gets ENOENT on
    its next write instead of writing into anything else. A directory that cannot be deleted yet
    (the stale writer is still creating files in it) is left for the next recovery."""
    tmp = paths.tmp
    if not os.path.lexists(tmp):
        return []
    if os.path.islink(tmp) or not os.path.isdir(tmp):
        fsops.unlink(tmp, missing_ok=True)
        return [f"removed unfinished staging {tmp.name}"]
    done: list[str] = []
    for entry in _listdir(tmp):
        path = tmp / entry
        why = _why_dead(tmp, entry, lease_s)
        if why is None:
            continue
        if entry.endswith((LEASE_SUFFIX, CLAIM_SUFFIX)) and not _is_temp(entry):
            reason = break_stale(path, lease_s)      # safe breaking: never a lease that turned fresh
            if reason:
                done.append(f"removed {why.split(':')[0]} {entry}: {reason}")
            continue
        if not os.path.isdir(path) or os.path.islink(path):
            fsops.unlink(path, missing_ok=True)
            done.append(f"removed {why.split(' (')[0]} {entry}")
            continue
        if not entry.startswith(STALE_TAG):
            aside = tmp / f"{STALE_TAG}{uuid.uuid4().hex}"
            try:
                fsops.rename(path, aside)
            except FileNotFoundError:
                continue
            path = aside
        try:
            fsops.rmtree(path)
        except OSError as e:     # e.g. ENOTEMPTY: a fenced writer still creates files in it
            log.warning("could not remove stale staging %s yet (%s); the next recovery retries", path, e)
        done.append(f"removed unfinished staging {tmp.name}/{entry}")
    if remove_if_empty(tmp) and not done:
        done.append(f"removed unfinished staging {tmp.name}")
    if done:
        fsops.fsync_dir(tmp.parent)
    return done


def remove_if_empty(tmp: Path) -> bool:
    """``<name>.tmp`` goes once nothing is in it (a run creating its lease meanwhile retries);
    True when it was removed."""
    try:
        fsops.rmdir(tmp)
        return True
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST, errno.EBUSY, errno.ENOTDIR):
            raise
        return False
