"""Per-run leases: runs stage without the writer lock, each under a lease of its own.

Layout inside ``<root>/<name>.tmp/`` (see docs/ARCHITECTURE.md):

* ``<staging id>/``: the staging directory of one run (staging.py);
* ``<staging id>.lease``: that run's **run lease**, a lease file (lease_files.py: owner JSON, mtime
  heartbeat, created by link, fenced release), taken *before* the staging
  directory is created and released only *after* it was published or removed;
* ``<slot>-<key digest>.claim``: a single-flight **claim** (claims.py), a lease file too;
* ``<slot>-<key digest>.entry/``: the encoding a claim's holder published for the runs waiting
  on it (claims.py), removed with the claim;
* lock temp files of those (``.new-``/``.broken.``/``.release.``) and ``.stale-<hex>``
  (a dead run's staging being deleted).

Invariant 6 here (``remove_dead``): a staging directory is removed only when its run lease is
stale or absent (store/lease.py's judge): a live run's staging is never removed, a dead run's is
by the next recovery (a reader's, a writer's commit, gc, check --repair). A run whose lease
turned stale finds its staging moved away and is fenced (Invariant 4).

What this does not guarantee: a lease only says a run is alive; whether its staging is complete
is decided by its commit. The listing of ``.tmp`` must be current on every host (true on the
filesystems probe.py calls safe).
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from pathlib import Path

from ..storage import fsops
from ..store.lease import RUN_LEASE, Lease
from .lease_files import TEMP_TAGS, break_stale, lease_file, status as lock_status

log = logging.getLogger("seedreuse")

LEASE_SUFFIX = ".lease"
CLAIM_SUFFIX = ".claim"
ENTRY_SUFFIX = ".entry"   # <slot>-<digest>.entry/: what the claim's holder encoded (claims.py)
ENTRY_PART = ".entry.part-"   # an entry being written (renamed to its name when complete)
STALE_TAG = ".stale-"     # <name>.tmp/.stale-<hex>: staging of a dead run moved aside, being deleted


def lease_path(tmp: Path, staging_id: str) -> Path:
    return Path(tmp) / f"{staging_id}{LEASE_SUFFIX}"


def in_tmp(path: Path, run_id: str, role: str, cache) -> Lease:
    """A lease file in ``.tmp`` (a run lease or a claim), not yet acquired: ``.tmp`` is created when
    missing and removed whenever it is empty (the last run to finish, recovery, a failed create)."""
    return lease_file(path, run_id, role, lease_s=cache.lease_s, heartbeat_s=cache.heartbeat_s,
                      cache_name=cache.name, file_mode=cache.file_mode, parent_mode=cache.dir_mode, tidy=True)


def lease(cache, staging_id: str, run_id: str) -> Lease:
    """The run lease of one run (its staging id is fresh and random: nobody else holds this name)."""
    return in_tmp(lease_path(cache.paths.tmp, staging_id), run_id, RUN_LEASE, cache)


def _is_temp(entry: str) -> bool:
    return any(t in entry for t in TEMP_TAGS)


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
        # finds nothing to put back: lease_files.py), as for the writer lock's temp files
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
        # an encoding published for waiters lives as long as its claim (claims.py)
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
    if fsops.rmdir_if_empty(tmp) and not done:
        done.append(f"removed unfinished staging {tmp.name}")
    if done:
        fsops.fsync_dir(tmp.parent)
    return done
