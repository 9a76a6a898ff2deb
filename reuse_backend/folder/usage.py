"""What a cache root costs and when each cache was last used: the inputs of the size budget.

Sizes are *allocated* bytes (``st_blocks * 512``, what the disk really spends: a sparse file
counts what it holds, a directory its own blocks), and a file with several hard links (a slot
carried from the previous version into staging, ``current`` and ``.old`` inside a commit
window) counts once: one walk keeps a set of (device, inode) it has seen.

Last use of a cache = the modification time of its committed version directory
``<root>/<name>/``:

* a commit sets it: the manifest is the last entry created in the staging directory, just
  before it is renamed to ``current`` (so the commit time is the floor of the record);
* a reader whose load served a hit sets it to now, once per snapshot, through the pinned
  directory fd (``futimens``: the exact version it read, no path lookup, no new file, the
  content of the version is never touched), see ``touch_version``.

What this does not guarantee: a reader that may not set times on the directory (another
user without group write, a read-only mount) records nothing, so for it the last use stays
the commit time; it never fails the read. On network filesystems with attribute caching
another host may see a last use up to its attribute cache timeout late (about a minute on
NFS), so the LRU order across hosts is exact only to that precision.
"""
from __future__ import annotations

import logging
import os
import stat
from ..storage import fsops

log = logging.getLogger("seedreuse")

# The store's own folders in a root (cache names never start with '.'): evictions being deleted
# (rootdirs.py) and reader leases (readers.py). Evictions in progress count against the root's
# budget (they are cache data until deleted); the lease folder does not: it is metadata of a few
# KiB that readers keep between snapshots and that a directory never shrinks back from. Any
# other hidden entry is not part of this root's measure: e.g. ``.users/`` (namespaces.py) holds
# per-user roots, each one measured and budgeted on its own.
EVICTING_DIR, READERS_DIR = ".evicting", ".readers"
OWN_HIDDEN = (EVICTING_DIR, READERS_DIR)
BUDGETED_HIDDEN = (EVICTING_DIR,)


def allocated(st: os.stat_result) -> int:
    blocks = getattr(st, "st_blocks", None)
    return blocks * 512 if blocks is not None else st.st_size


def tree_size(path, seen: set | None = None) -> int:
    """Allocated bytes of ``path`` and everything below it (never follows a symlink; hard links
    once per ``seen``). Entries that vanish during the walk (a concurrent commit or eviction)
    are skipped: the result is a measurement, not a promise."""
    seen = set() if seen is None else seen
    total, stack = 0, [os.fspath(path)]
    while stack:
        p = stack.pop()
        try:
            st = os.lstat(p)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key not in seen:
            seen.add(key)
            total += allocated(st)
        if stat.S_ISDIR(st.st_mode):
            try:
                names = os.listdir(p)
            except OSError:
                names = []
            stack.extend(os.path.join(p, n) for n in names)
    return total


def root_size(root) -> int:
    """Allocated bytes of a cache root as its budget counts them (see BUDGETED_HIDDEN)."""
    seen: set = set()
    total = 0
    try:
        st = os.lstat(root)
        names = os.listdir(root)
    except OSError:
        return 0
    seen.add((st.st_dev, st.st_ino))
    total += allocated(st)
    for n in names:
        if n.startswith(".") and n not in BUDGETED_HIDDEN:
            continue
        total += tree_size(os.path.join(os.fspath(root), n), seen)
    return total


def last_used(version_dir) -> float | None:
    """The last-use record of a committed version (see the module docstring), or None."""
    try:
        st = os.lstat(version_dir)
    except OSError:
        return None
    return st.st_mtime if stat.S_ISDIR(st.st_mode) else None


_warned: set = set()


def touch_version(dfd: int, name: str) -> bool:
    """Record a use of the version open at ``dfd`` (set its mtime to now). Never raises: a
    reader without the right to do so keeps the commit time as the record (logged once)."""
    try:
        fsops.utime(name, fd=dfd)
        return True
    except OSError as e:
        if name not in _warned:          # once per cache and process: a read-only reader reads a lot
            _warned.add(name)
            log.info("seedreuse: cannot record the last use of cache '%s' (%s); its commit time "
                     "stands in for it", name, e.strerror)
        return False


def disk_free(root) -> tuple[int, int] | None:
    """(free bytes, total bytes) of the filesystem holding ``root``, or None."""
    try:
        st = os.statvfs(root)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def root_summary(root) -> dict:
    """{"bytes": allocated bytes under root, "free": .., "capacity": ..} for messages."""
    free = disk_free(root)
    return {"bytes": root_size(root), "free": free[0] if free else None,
            "capacity": free[1] if free else None}
