"""The cache root outside the caches themselves: evictions in progress, reader leases, strays.

``<root>/.evicting/<name>.<id>/`` is a committed version an eviction moved out of the
namespace (one rename, under the cache's writer lock) and is deleting. Nothing ever reads it
again and nobody writes into it, so any process may finish deleting it at any time, with or
without a lock: recovery does for the cache it recovers, gc and check --repair for all. A
deletion that crashed half-way is invisible: the cache name was free (or reused by a new
version) from the moment of the rename.

``<root>/.readers/`` holds reader leases (readers.py). Cache names never start with '.', so
neither folder can be mistaken for a cache (nor can other hidden folders of the store, such as
``.users/`` of namespaces.py, which are never reported as orphaned).

Root-level findings for check(): eviction leftovers, stale reader leases, the root over its
budget, and entries that belong to no cache ("orphaned": neither a cache nor one of its
siblings ``.tmp``/``.old``/``.lock``/lock temp files nor one of the folders above).
"""
from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from .. import settings
from ..storage import fsops
from . import readers, usage
from .layout import cache_of

log = logging.getLogger("seedreuse")

EVICTING_DIR = usage.EVICTING_DIR
OWN_DIRS = usage.OWN_HIDDEN
IGNORED = ("lost+found",)       # a filesystem's own folder at a mount point


def evicting_dir(root) -> Path:
    return Path(root) / EVICTING_DIR


def _base(entry: str) -> str:
    return entry.split(".", 1)[0]


def leftovers(root, name: str | None = None) -> list[Path]:
    """Entries under ``.evicting`` (of ``name``, or all)."""
    try:
        names = sorted(os.listdir(evicting_dir(root)))
    except OSError:
        return []
    return [evicting_dir(root) / e for e in names if name is None or _base(e) == name]


def move_out(root, name: str, current: Path) -> Path:
    """Rename the committed version ``current`` to ``.evicting/<name>.<id>`` and make it durable.
    The caller holds the cache's writer lock. After the rename the name is free: a new version
    can be committed under it at once."""
    d = evicting_dir(root)
    aside = d / f"{name}.{uuid.uuid4().hex}"
    for attempt in range(5):     # bounded: another eviction may remove the empty folder in between
        fsops.mkdir(d, exist_ok=True)
        try:
            fsops.rename(current, aside)
            break
        except FileNotFoundError:
            if attempt == 4 or not os.path.lexists(current):
                raise
    # Invariant 6: the rename is durable in both directories before anything of the
    # version is deleted, so after a power loss the cache is either whole under its name or gone.
    try:
        fsops.fsync_dir(root)
        fsops.fsync_dir(d)
    except OSError:
        move_back(aside, current, root)     # an eviction that fails leaves the cache whole
        raise
    return aside


def move_back(aside: Path, current: Path, root) -> None:
    """Undo move_out (a reader registered during the eviction); the caller still holds the lock,
    so nobody can have committed a new version under the name meanwhile."""
    fsops.rename(aside, current)
    fsops.fsync_dir(root)
    remove_if_empty(aside.parent)


def delete(path: Path) -> bool:
    """Delete an evicted version out of the namespace; True when it is gone. Concurrent
    deleters (gc on another host) are tolerated: a vanished entry is not an error."""
    for _ in range(3):
        try:
            fsops.rmtree(path)
        except OSError as e:
            log.warning("seedreuse: could not delete evicted %s yet: %s", path, e)
        if not os.path.lexists(path):
            break
    gone = not os.path.lexists(path)
    try:
        fsops.fsync_dir(path.parent)
    except OSError:
        pass            # durability of a deletion out of the namespace is not needed
    return gone


def remove_if_empty(d: Path) -> None:
    """``.evicting`` (or another own folder) goes once empty, durably."""
    if fsops.rmdir_if_empty(d):
        fsops.fsync_dir(d.parent)


def finish_evictions(root, name: str | None = None) -> list[str]:
    """Finish deleting evicted versions (of ``name``, or all); remove ``.evicting`` when empty."""
    d = evicting_dir(root)
    if not os.path.lexists(d):
        return []
    if os.path.islink(d) or not os.path.isdir(d):
        fsops.unlink(d, missing_ok=True)
        return [f"removed {EVICTING_DIR} (not a directory)"]
    done = []
    for p in leftovers(root, name):
        if delete(p):
            done.append(f"finished the eviction of {p.name}")
    remove_if_empty(d)
    return done


def findings(root, name: str | None, lease_s: float) -> list[tuple[str, str, str, str]]:
    """(code, path, message, fix) for the namespace state of ``name`` (or of the whole root)."""
    out = []
    for p in leftovers(root, name):
        out.append(("eviction_leftover", str(p),
                    f"an evicted version of '{_base(p.name)}' being deleted (or left by a crashed "
                    "eviction); it is out of the namespace and never read",
                    "check --repair (or gc, or the next writer of the cache) finishes deleting it"))
    for x in readers.leases(root, name, lease_s):
        if x["stale"] is not None:
            out.append(("stale_reader_lease", x["path"],
                        f"reader lease of cache '{x['cache']}' is stale: {x['stale']}",
                        "check --repair (or gc) removes it"))
    if name is not None:
        return out
    for d in OWN_DIRS:
        p = Path(root) / d
        if os.path.lexists(p) and (os.path.islink(p) or not os.path.isdir(p)):
            out.append(("orphaned_entry", str(p), f"{d} is not a directory", f"remove {p}"))
        # an empty folder is normal (readers keep .readers/ between snapshots; repair tidies it)
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        entries = []
    for e in entries:
        # hidden entries are the store's own (e.g. ``.users/`` of namespaces.py), never a cache
        if e.startswith(".") or e in IGNORED or cache_of(e) is not None:
            continue
        out.append(("orphaned_entry", str(Path(root) / e),
                    "belongs to no cache: it counts against the budget and is never evicted",
                    f"move it out of the cache root (or delete it: rm -r {Path(root) / e})"))
    return out


def repair_root(root, lease_s: float) -> list[str]:
    """What check --repair does at root level: finish evictions, drop stale leases, empty folders."""
    done = finish_evictions(root) + readers.remove_stale(root, None, lease_s)
    for d in OWN_DIRS:
        p = Path(root) / d
        if os.path.isdir(p) and not os.path.islink(p):
            remove_if_empty(p)
    return done


def budget_finding(root, budget: int | None) -> list[tuple[str, str, str, str]]:
    if budget is None:
        return []
    total = usage.root_size(root)
    if total <= budget:
        return []
    return [("root_over_budget", str(root),
             f"the root holds {total} allocated bytes, over its budget of {budget} "
             f"({settings.MAX_BYTES})",
             f"python -m reuse_backend --root {root} gc (evicts the least recently used caches "
             "not in use); what is in use stays until it is released")]
