"""Crash recovery of one cache: decided from what exists on disk, run under the writer lock.

The commit window has two renames (``current -> .old``, ``staging -> current``), so after a
crash at most these states exist, and each has one safe repair:

* ``.old`` without ``current``: the crash came between the renames; the previous version
  goes back to ``current`` (the new one never became visible).
* ``.old`` and ``current``: the new version stands; ``.old`` is garbage.
* under ``<name>.tmp/``: the staging of runs that are gone (dead owner, or lease expired), their
  stale leases and single-flight claims (run_lease.py). Runs stage without the writer lock, so
  ``.tmp`` also holds the staging of live runs: it is never touched (judged by each run's lease).
  Each dead staging directory is first *moved aside* under a fresh name and only then deleted,
  so a writer that lost its lease but still runs gets ENOENT on its next write (fencing; see
  transaction.py).
* stray ``<name>.lock.new-*`` / ``.broken.*`` / ``.release.*`` files of crashed lock attempts and releases.
* ``.evicting/<name>.*``: a version of this cache an eviction moved out of the namespace and
  did not finish deleting (evict.py); and stale reader leases of the cache (readers.py).
"""
from __future__ import annotations

import logging
import os

from ..storage import fsops
from . import readers, rootdirs, run_lease
from .lease_files import stray_files

log = logging.getLogger("seedreuse")


def recover_locked(root, name: str, paths, lease_s: float = 120.0) -> list[str]:
    """Crash recovery; the caller holds the writer lock. Returns what was done, one line each."""
    done: list[str] = []
    cur, old = os.path.lexists(paths.current), os.path.lexists(paths.old)
    if not cur and old:
        # the crash hit the commit window after current -> .old: the previous version is back
        fsops.rename(paths.old, paths.current)
        fsops.fsync_dir(root)
        done.append(f"restored previous version from {paths.old.name}")
    elif cur and old:
        # the crash hit after staging -> current: the new version stands, .old is garbage
        fsops.rmtree(paths.old)
        fsops.fsync_dir(root)
        done.append(f"removed leftover {paths.old.name}")
    done += run_lease.remove_dead(paths, lease_s)
    for f in stray_files(root, f"{name}.lock"):
        fsops.unlink(f, missing_ok=True)
        done.append(f"removed stray lock file {f.name}")
    # a half-deleted eviction of this cache (out of the namespace already) and stale reader
    # leases of it: garbage that anyone may remove (rootdirs.py, readers.py)
    done += rootdirs.finish_evictions(root, name)
    done += readers.remove_stale(root, name, lease_s)
    return done


def has_leftovers(paths) -> bool:
    """Anything a crashed writer can leave behind (cheap: three lstat calls)."""
    return os.path.lexists(paths.tmp) or os.path.lexists(paths.old) or os.path.lexists(paths.lock)
