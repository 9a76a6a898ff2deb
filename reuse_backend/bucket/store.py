"""The object store's root: the operations on a location as a whole (the store interface's
``Store``, as folder/store.py is the folder's).

A location is a namespace prefix of a bucket (``s3://bucket/prefix``, ``.../.users/<user>``,
``.../.auto``); its caches are the folders under it (budget.py lists them). Sizes are what the
newest records name, last use the newest of the commit time and the hosts' ``used/`` markers.
"""
from __future__ import annotations

from .. import settings
from ..errors import CacheBusyError, ReuseError
from ..store import namespaces
from ..store.budget import Report, budget_for
from ..store.interface import busy, no_cache
from . import budget, check as checking, client as clients, collect, location
from .cache import BucketCache


class BucketStore:
    kind = "object store"

    def __init__(self, url: str, local_root=None):
        self.loc = location.parse(url)
        self.location = self.loc.url
        self.local_root = local_root
        self.client = clients.for_bucket(self.loc.bucket)

    def __repr__(self) -> str:
        return f"BucketStore({self.location!r})"

    def cache(self, name: str, **kw) -> BucketCache:
        return BucketCache(self.location, name, local_root=kw.pop("local_root", self.local_root), **kw)

    def names(self) -> list[str]:
        """The caches a user sees, as on a folder: a deleted (cleared, empty) cache is not one."""
        return [n for n in budget.list_caches(self.client, self.loc) if not budget.deleted(self.cache(n))]

    def committed(self) -> list[str]:
        return [n for n in self.names() if budget.info(self.cache(n)).committed]

    def namespaces(self) -> list[tuple[str | None, "BucketStore"]]:
        out = [(None, self)]
        _, users = self.client.list(f"{self.loc.prefix}{namespaces.USERS_DIR}/", delimiter="/")
        for p in users:
            user = p.rstrip("/").rsplit("/", 1)[-1]
            try:
                namespaces.validate_user(user)
            except ReuseError:
                continue
            out.append((user, BucketStore(namespaces.user_root(self.location, user), self.local_root)))
        return out

    def in_use(self, name: str) -> str | None:
        try:
            return budget.in_use(self.cache(name))
        except ReuseError as e:
            return f"unknown ({e.message})"

    def describe(self, name: str) -> tuple[dict, object]:
        cache = self.cache(name)
        row = {"name": name, "committed": False, "bytes": 0, "last_used": None, "in_use": self.in_use(name)}
        inf = budget.info(cache)
        if inf.error:
            return row | {"committed": True, "error": {"type": "CorruptCacheError", "message": inf.error,
                                                       "fix": f"python -m reuse_backend --root {self.location} "
                                                              f"check {name} --repair"}}, None
        row.update(bytes=inf.bytes, last_used=inf.last_use, committed=inf.committed)
        if not inf.committed:
            return row, None
        try:
            snap = cache.snapshot(lease=False)
        except ReuseError as e:
            return row | {"error": e.to_dict()}, None
        return row, snap

    def summary(self) -> dict:
        rows = budget.survey(self.cache, self.client, self.loc)
        total = sum(r.bytes for r in rows)
        out = {"root": self.location, "store": self.kind, "bytes": total, "free": None, "capacity": None,
               "budget": None, "over_budget": False, "env": settings.MAX_BYTES}
        try:
            out["budget"] = budget_for(self.location)
        except ReuseError as e:
            out["budget_error"] = e.to_dict()
        out["over_budget"] = out["budget"] is not None and total > out["budget"]
        return out

    def relative(self, path: str) -> str:
        prefix = f"s3://{self.loc.bucket}/{self.loc.prefix}"
        return path[len(prefix):] if path.startswith(prefix) else path

    def check(self, name: str, *, repair: bool = False) -> list:
        return checking.check(self.cache(name), repair=repair)

    def check_root(self, *, repair: bool = False) -> list:
        return []          # a bucket has no root-level state of its own: each cache holds its keys

    def delete(self, name: str) -> int:
        """The cache browser's delete (BucketCache.clear), with the folder store's errors."""
        cache = self.cache(name)
        inf = budget.info(cache)
        if not inf.committed:
            raise no_cache(name)
        try:
            cache.clear()
        except CacheBusyError as e:
            raise busy(name, e.actual) from None
        return inf.bytes

    def gc(self, budget_bytes: int | None, *, dry_run: bool = False) -> Report:
        """Collect what dead runs left in each cache, then the budget (budget.enforce); the report of
        either medium (store/budget.py ``Report``): committed caches, least recently used first."""
        cleaned = []
        if not dry_run:
            for n in self.names():
                cleaned += collect.collect(self.cache(n, lease_s=settings.lease_s())).done
        rep = budget.enforce(self.cache, self.client, self.loc, budget_bytes, dry_run=dry_run)
        rep.cleaned = cleaned
        return rep
