"""The object store's root: the operations on a location as a whole (the store interface's
``Store``, as folder/store.py is the folder's).

A location is a namespace prefix of a bucket (``s3://bucket/prefix``, ``.../.users/<user>``,
``.../.auto``); its caches are the rows of its usage index (usage_index.py: the list, the
committed names and the summary cost a few requests however many caches the namespace ever
had), and ``gc`` surveys every cache folder under it (budget.py). Sizes are what the newest
records name, last use the newest of the commit time and the hosts' ``used/`` markers.
"""
from __future__ import annotations

from .. import settings
from ..errors import CacheBusyError, CorruptCacheError, ReuseError
from ..store import namespaces
from ..store.budget import Entry, Report, budget_for
from ..store.interface import busy, no_cache
from . import budget, check as checking, client as clients, collect, location, log as commit_log, usage_index
from .cache import BucketCache


class BucketStore:
    kind = "object store"

    def __init__(self, url: str, local_root=None):
        self.loc = location.parse(url)
        self.location = self.loc.url
        self.local_root = local_root
        self.client = clients.for_bucket(self.loc.bucket)
        self._listed: dict | None = None

    def __repr__(self) -> str:
        return f"BucketStore({self.location!r})"

    def cache(self, name: str, **kw) -> BucketCache:
        return BucketCache(self.location, name, local_root=kw.pop("local_root", self.local_root), **kw)

    def _rows(self) -> dict:
        return budget.rows(self.cache, self.client, self.loc)

    def names(self) -> list[str]:
        """The caches a user sees, as on a folder: the committed rows of the usage index, and a
        cache without a version only while something lives under it (a run; a deleted, cleared
        cache is not one: its row is dropped)."""
        out = []
        self._listed = rows = self._rows()          # the budget line right after reads these (summary)
        for name, row in sorted(rows.items()):
            if row[3]:
                out.append(name)
            elif budget.vacant(self.cache(name)) is not None:
                budget.forget(self.cache(name), row[0] + 1)
            else:
                out.append(name)
        return out

    def committed(self) -> list[str]:
        self._listed = None
        return sorted(n for n, r in self._rows().items() if r[3])

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
        try:
            snap = cache.snapshot(lease=False)
        except CorruptCacheError as e:
            return row | {"committed": True, "error": {"type": "CorruptCacheError", "message": e.message,
                                                       "fix": f"python -m reuse_backend --root {self.location} "
                                                              f"check {name} --repair"}}, None
        except ReuseError as e:
            return row | {"error": e.to_dict()}, None
        if snap is None:
            return row, None
        try:
            row.update(committed=True, bytes=budget.record_bytes(snap.record),
                       last_used=budget.last_use(cache, snap.record))
        except ReuseError as e:
            snap.close()
            return row | {"error": e.to_dict()}, None
        return row, snap

    def summary(self) -> dict:
        """The budget line; right after ``names()`` (the browser's list) from the rows it read."""
        rows, self._listed = self._listed or self._rows(), None
        total = sum(r[1] for r in rows.values() if r[3])
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
        try:
            _, rec = commit_log.latest(cache.client, cache.keys)
        except CorruptCacheError:
            rec = None
        if rec is None or rec["kind"] == "cleared":
            raise no_cache(name)
        try:
            cache.clear()
        except CacheBusyError as e:
            raise busy(name, e.actual) from None
        return budget.record_bytes(rec)

    def gc(self, budget_bytes: int | None, *, dry_run: bool = False) -> Report:
        """Survey every cache folder of the namespace (dead ones cost one look each), collect
        what dead runs left in each, rebuild the usage index from what was found, then the budget
        (budget.enforce, with the survey's exact last uses); the report of either medium
        (store/budget.py ``Report``): committed caches, least recently used first."""
        cleaned = []
        live, dead, infos = budget.survey(self.cache, self.client, self.loc)
        if not dry_run:
            for i in infos:
                cleaned += collect.collect(self.cache(i.name, lease_s=settings.lease_s())).done
            usage_index.replace_all(self.client, self.loc, live, dead)
        rows = {i.name: i for i in infos}
        done = budget.enforce(self.cache, live, budget_bytes, dry_run=dry_run, exact=True)
        for c in done:
            rows[c.name] = c
        entries = [Entry(r.name, r.bytes, r.last_use, "error" if r.error else r.action, r.error or r.why)
                   for r in sorted((r for r in rows.values() if r.committed or r.error),
                                   key=lambda r: r.last_use or 0.0)]
        kept = sum(e.bytes for e in entries if e.action not in ("evicted", "would_evict"))
        return Report(self.location, budget_bytes, sum(e.bytes for e in entries), kept, dry_run, entries, cleaned)
