"""The folder store's root: the operations on a location as a whole (interface.Store; the object
store's is bucket/store.py, reuse_backend/stores.py picks one).

Everything here was already a function of the folder store (cache.py, check.py, evict.py,
usage.py, readers.py, namespaces.py); this class gives it the one shape both stores share, so the
cache browser, the routes and the CLI never look at paths themselves.
"""
from __future__ import annotations

import os
from pathlib import Path

from .. import settings
from ..errors import ReuseError
from ..store import namespaces
from ..store.interface import busy, no_cache
from . import check as checking, evict, usage
from .cache import FolderCache
from .layout import cache_paths, committed_caches, list_caches


class FolderStore:
    kind = "folder"

    def __init__(self, root):
        self.root = Path(root)
        self.location = str(self.root)

    def __repr__(self) -> str:
        return f"FolderStore({self.location!r})"

    def cache(self, name: str, **kw) -> FolderCache:
        return FolderCache(self.root, name, **kw)

    def names(self) -> list[str]:
        return list_caches(self.root)

    def committed(self) -> list[str]:
        return committed_caches(self.root)

    def namespaces(self) -> list[tuple[str | None, "FolderStore"]]:
        return [(u, FolderStore(p)) for u, p in namespaces.namespaces(self.root)]

    def in_use(self, name: str) -> str | None:
        try:
            return evict.in_use(self.root, name, settings.lease_s())
        except OSError as e:
            return f"unknown ({e.strerror})"

    def describe(self, name: str) -> tuple[dict, object]:
        """(row, open snapshot or None): the row never raises for a broken cache (its error is
        in the row); the caller closes the snapshot."""
        cache = FolderCache(self.root, name)
        current = cache.paths.current
        row = {"name": name, "committed": False, "bytes": 0, "last_used": None, "in_use": self.in_use(name)}
        if os.path.islink(current):
            return row | {"error": {"type": "CorruptCacheError", "message": f"cache '{name}' is a symlink (refused)",
                                    "fix": f"python -m reuse_backend clear {name} --yes"}}, None
        if not os.path.isdir(current):              # staging or a lock only: a first run in progress
            return row, None
        row.update(bytes=usage.tree_size(current), last_used=usage.last_used(current))
        try:
            snap = cache.snapshot(lease=False)      # manifest + every file present with its size; no lease file
        except ReuseError as e:
            return row | {"committed": True, "error": e.to_dict()}, None
        except OSError as e:
            return row | {"committed": True, "error": {"type": "OSError", "message": str(e)}}, None
        return (row | {"committed": snap is not None}), snap

    def summary(self) -> dict:
        s = usage.root_summary(self.root)
        out = {"root": self.location, "store": self.kind, "bytes": s["bytes"], "free": s["free"],
               "capacity": s["capacity"], "budget": None, "over_budget": False, "env": settings.MAX_BYTES}
        try:
            out["budget"] = settings.max_bytes()
        except ReuseError as e:
            out["budget_error"] = e.to_dict()
        out["over_budget"] = out["budget"] is not None and s["bytes"] > out["budget"]
        return out

    def relative(self, path: str) -> str:
        try:
            rel = os.path.relpath(path, self.root)
        except ValueError:
            return os.path.basename(path)
        return rel if not rel.startswith("..") else os.path.basename(path)

    def check(self, name: str, *, repair: bool = False) -> list:
        return checking.check(self.root, name, repair=repair, lease_s=settings.lease_s())

    def check_root(self, *, repair: bool = False) -> list:
        return checking.check_root(self.root, repair=repair, lease_s=settings.lease_s())

    def delete(self, name: str) -> int:
        """The cache browser's delete: the safe eviction; returns the bytes freed."""
        current = cache_paths(self.root, name).current
        if os.path.islink(current) or not os.path.isdir(current):
            raise no_cache(name)
        freed = usage.tree_size(current)
        ok, why = evict.evict_cache_when_readers_leave(self.root, name, lease_s=settings.lease_s())
        if not ok:
            if why == "no committed version":
                raise no_cache(name)
            raise busy(name, why)
        return freed

    def gc(self, budget: int | None, *, dry_run: bool = False):
        return evict.enforce(self.root, budget, lease_s=settings.lease_s(), dry_run=dry_run)
