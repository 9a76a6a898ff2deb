"""The names a cache has in a folder (docs/ARCHITECTURE.md, "Cache layout"), and the caches a
folder holds.

``<root>/<name>/`` is the committed version, ``<name>.tmp/`` the staging of running runs (their
run leases and claims beside it), ``<name>.old/`` the previous version during a commit window,
``<name>.lock`` the writer lock and its temp files (``.new-``, ``.broken.``, ``.release.``). Cache
names never contain '.', so these never collide with another cache, and the store's own folders
(``.readers``, ``.evicting``, ``.users``, ``.auto``) start with a dot, which no cache name can.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..store import roots
from .lease_files import TEMP_TAGS

SUFFIXES = (".tmp", ".old", ".lock")


@dataclass(frozen=True)
class CachePaths:
    current: Path
    tmp: Path
    old: Path
    lock: Path


def cache_paths(root, name) -> CachePaths:
    roots.validate_cache_name(name)
    root = Path(root)
    return CachePaths(root / name, root / f"{name}.tmp", root / f"{name}.old", root / f"{name}.lock")


def cache_of(entry: str) -> str | None:
    """The cache a root entry belongs to (itself, ``.tmp``/``.old``/``.lock``, a lock temp file),
    or None."""
    if roots.is_valid_cache_name(entry):
        return entry
    for suf in SUFFIXES:
        if entry.endswith(suf) and roots.is_valid_cache_name(entry[:-len(suf)]):
            return entry[:-len(suf)]
    base, _, rest = entry.partition(".lock")
    return base if roots.is_valid_cache_name(base) and rest.startswith(TEMP_TAGS) else None


def list_caches(root) -> list[str]:
    """Names of the caches under ``root`` (committed, staging, previous or locked)."""
    try:
        entries = os.listdir(root)
    except FileNotFoundError:
        return []
    names = set()
    for e in entries:
        base = next((e[:-len(s)] for s in SUFFIXES if e.endswith(s)), e)
        if roots.is_valid_cache_name(base):   # foreign entries are not caches
            names.add(base)
    return sorted(names)


def committed_caches(root) -> list[str]:
    """Names with a committed version (a real directory, not a symlink) under ``root``."""
    return [n for n in list_caches(root) if not os.path.islink(Path(root) / n) and os.path.isdir(Path(root) / n)]
