"""Crash recovery of one cache: decided from what exists on disk, run under the writer lock.

The commit window has two renames (``current -> .old``, ``staging -> current``), so after a
crash at most these states exist, and each has one safe repair:

* ``.old`` without ``current``: the crash came between the renames; the previous version
  goes back to ``current`` (the new one never became visible).
* ``.old`` and ``current``: the new version stands; ``.old`` is garbage.
* anything under ``<name>.tmp/``: staging of runs that never committed (every one of them is
  stale: the caller holds the lock and has not created its own staging yet). Each staging
  directory is first *moved aside* under a fresh name and only then deleted, so a writer that
  lost its lock but still runs gets ENOENT on its next write instead of writing into the new
  owner's staging (fencing; see transaction.py). A directory that cannot be deleted yet (the
  stale writer is still creating files in it) is left for the next recovery.
* stray ``<name>.lock.new-*`` / ``.broken.*`` / ``.release.*`` files of crashed lock attempts and releases.
* ``.evicting/<name>.*``: a version of this cache an eviction moved out of the namespace and
  did not finish deleting (evict.py); and stale reader leases of the cache (readers.py).
"""
from __future__ import annotations

import errno
import logging
import os
import uuid

from ..storage import fsops
from . import readers, rootdirs
from .lock import stray_lock_files

log = logging.getLogger("seedreuse")

STALE_TAG = ".stale-"     # <name>.tmp/.stale-<hex>: staging moved aside, being deleted


def _remove_staging(paths) -> list[str]:
    tmp = paths.tmp
    if not os.path.lexists(tmp):
        return []
    if os.path.islink(tmp) or not os.path.isdir(tmp):
        fsops.unlink(tmp, missing_ok=True)
        return [f"removed unfinished staging {tmp.name}"]
    leftovers = 0
    for entry in sorted(os.listdir(tmp)):
        path = tmp / entry
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
            leftovers += 1
            log.warning("could not remove stale staging %s yet (%s); the next recovery retries", path, e)
    if not leftovers:
        try:
            fsops.rmdir(tmp)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST, errno.EBUSY):
                raise
    fsops.fsync_dir(tmp.parent)
    return [f"removed unfinished staging {tmp.name}"]


def recover_locked(root, name: str, paths) -> list[str]:
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
    done += _remove_staging(paths)
    for f in stray_lock_files(root, name):
        fsops.unlink(f, missing_ok=True)
        done.append(f"removed stray lock file {f.name}")
    # a half-deleted eviction of this cache (out of the namespace already) and stale reader
    # leases of it: garbage that anyone may remove (rootdirs.py, readers.py)
    done += rootdirs.finish_evictions(root, name)
    done += readers.remove_stale(root, name)
    return done


def has_leftovers(paths) -> bool:
    """Anything a crashed writer can leave behind (cheap: three lstat calls)."""
    return os.path.lexists(paths.tmp) or os.path.lexists(paths.old) or os.path.lexists(paths.lock)
