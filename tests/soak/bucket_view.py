"""What the soak reads of a cache that is a bucket (``SEEDREUSE_CACHE_URL``), and its commit-phase
kill triggers: the bucket side of the soak's store view (folder_view.FolderView is the folder side).

Everything goes through the store interface (reuse_backend/stores.py): the committed manifest of
the newest record (a snapshot), a committed file (fetched into this process's own local tier),
``check`` of the bucket store. What differs from a folder, and how the soak judges it:

* what a kill leaves is garbage waiting for a collection, never a problem of the version: the
  killed run's data objects, run lease, claim (and its entry) and reader lease stay live until
  their lease expires, then any commit's collection, ``gc`` or ``check --repair`` removes them
  (bucket/collect.py). So ``check`` finding ``collectable`` objects is allowed after every step
  (``garbage``), and ``settle`` (at the end) waits until every lease has expired, runs one
  collection and returns what it removed: after it nothing of a dead run may be left, neither
  in the bucket (leases, readers, claims, entries, unreferenced data) nor in a host's local tier
  (staging of this cache: removed by that host's next run of it);
* there is no lock and no ``.old``; the commit-phase kills are ``upload`` (the first data object
  the run uploads after its last node started: killed while it uploads its staged files or
  between them and its commit record) and ``record`` (its commit record appeared: killed after the
  conditional create, before it released its lease and ran its collection). Both are polled
  (LIST every ``TICK_S``): a phase the poll did not see is judged by the committed record
  afterwards (``implied_by_commit``), and the kill then lands right after the success.
"""
from __future__ import annotations

import os
import shutil
import time

from reuse_backend.bucket import leases, log as commit_log
from reuse_backend.bucket.client import for_bucket
from reuse_backend.bucket.local_tier import LocalTier
from reuse_backend.bucket.location import parse
from reuse_backend.bucket.store import BucketStore
from reuse_backend.errors import ReuseError
from reuse_backend import settings
from reuse_backend.stores import open_cache

TICK_S = 0.01


class BucketView:
    kind = "bucket"
    kill_targets = ("upload", "record")
    repairable: frozenset = frozenset()     # a kill leaves nothing but garbage (below)
    garbage = frozenset({"collectable"})    # superseded records, what dead runs left: a collection's
    kills_linger = True     # a killed run's lease and claim stay until they expire (then a collection)
    remote_kill_leftovers: set = set()

    def __init__(self, url: str, local_root, host_roots=()):
        self.url, self.local_root, self.host_roots = url, local_root, list(host_roots)
        self.loc = parse(url)
        self.client = for_bucket(self.loc.bucket)

    def describe(self) -> str:
        return f"bucket {self.url} (checks through the local tier {self.local_root})"

    def at_local(self, root) -> "BucketView":
        """The bucket as a reader with the local tier ``root`` (a host's) is served it."""
        return BucketView(self.url, root)

    def snapshot(self, name: str):
        return open_cache(self.url, name, local_root=self.local_root).snapshot(lease=False)

    def copy(self, name: str, fname: str, dest) -> None:
        """A committed file of the current version (fetched through this view's local tier)."""
        snap = open_cache(self.url, name, local_root=self.local_root).snapshot()
        if snap is None:
            raise FileNotFoundError(f"cache '{name}' has no committed version in {self.url}")
        with snap, snap.open_file(fname) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out)

    def store(self) -> BucketStore:
        return BucketStore(self.url, self.local_root)

    def check(self, name: str, *, repair: bool = False) -> list:
        return self.store().check(name, repair=repair)

    def problems(self, name: str) -> list:
        return [p for p in self.check(name) if p.code not in self.garbage]

    def needs_version(self, target: str) -> bool:
        return False

    def watch(self, name: str, target: str) -> "ObjectWatch":
        return ObjectWatch(self, name, target)

    def lock_owner(self, name: str, pid) -> None:
        return None           # no lock on a bucket: a commit is one conditional create

    def state(self, name) -> list[str]:
        return []             # the trigger says what was seen (no request may delay the kill)

    def in_commit_window(self, info: dict) -> bool:
        return info.get("trigger") in self.kill_targets

    def _staging(self, name: str) -> list[str]:
        out = []
        for root in self.host_roots:
            parent = LocalTier(root, self.loc.store_id()).staging_parent(self.loc.cache(name))
            try:
                out += [f"{root}: local staging {e}" for e in sorted(os.listdir(parent))]
            except FileNotFoundError:
                pass
        return out

    def left_behind(self, names) -> list[str]:
        """Run leases, reader leases, claims and entries in the bucket, and local staging on the
        hosts: all of them are gone once every run has ended and released what it held."""
        out = []
        for name in names:
            keys = self.loc.cache(name)
            for prefix in (keys.lease_prefix, keys.reader_prefix, keys.claim_prefix):
                objs, _ = self.client.list(prefix)
                out += [o.key[len(self.loc.prefix):] for o in objs]
            out += self._staging(name)
        return out

    def _live(self, names, lease_s: float) -> list[str]:
        out = []
        for name in names:
            keys = self.loc.cache(name)
            for prefix in (keys.lease_prefix, keys.reader_prefix, keys.claim_prefix):
                alive, _ = leases.live(self.client, prefix, lease_s)
                out += [a["key"] for a in alive if not a["key"].endswith(".entry.json")]
        return out

    def settle(self, names, log=print) -> dict:
        """Once no run is active: wait until every lease left in the bucket has expired (dead runs'),
        then one collection per cache (``check --repair``); what it removed, and what is left."""
        lease_s = settings.lease_s()
        t0, deadline = time.monotonic(), time.monotonic() + 2 * lease_s + 15
        live = self._live(names, lease_s)
        while live and time.monotonic() < deadline:
            time.sleep(1.0)
            live = self._live(names, lease_s)
        before = self.left_behind(names)
        collected: dict[str, list] = {n: [] for n in names}
        for _ in range(3):     # a collection that fenced stale runs leaves the record it superseded
            done = {n: [p.path for p in self.check(n, repair=True) if p.repaired] for n in names}
            for n in names:
                collected[n] += done[n]
            if not any(done.values()):
                break
        out = {"waited_s": round(time.monotonic() - t0, 1), "still_live": live, "left_before_collection": before,
               "collected": collected, "left_after_collection": self.left_behind(names),
               "problems_after_collection": {n: [str(p) for p in self.check(n)] for n in names}}
        log(f"[soak] settled the bucket in {out['waited_s']} s: {len(before)} lease/claim/staging object(s) of "
            f"ended runs before the collection, {sum(len(v) for v in collected.values())} object(s) collected, "
            f"left after it: {out['left_after_collection'] or 'nothing'}")
        return out


class ObjectWatch:
    """One commit-phase trigger of one run on a bucket (``upload`` or ``record``), armed before the
    prompt is queued; ``seen(timeout)`` polls. ``upload`` counts only data objects that appear
    after ``last_node_started`` (earlier ones are single-flight entries uploaded when a slot was
    encoded, not the commit's)."""

    tick = TICK_S
    ino = None

    def __init__(self, view: BucketView, name: str, target: str):
        assert target in BucketView.kill_targets, target
        self.view, self.name, self.target = view, name, target
        self.keys = view.loc.cache(name)
        self.via = "poll"
        self.armed = target == "record"
        self.baseline: set[str] = set()
        self.newest = max(commit_log.numbers(view.client, self.keys) or [0])
        self.seen_key: str | None = None

    def _data(self) -> set[str]:
        objs, _ = self.view.client.list(self.keys.data_prefix)
        return {o.key for o in objs}

    def last_node_started(self) -> None:
        if self.target == "upload" and not self.armed:
            self.baseline = self._data()
            self.armed = True

    def seen(self, timeout: float) -> bool:
        if timeout:
            time.sleep(timeout)
        if not self.armed:
            return False
        try:
            if self.target == "record":
                new = commit_log.numbers(self.view.client, self.keys, after=self.newest or None)
                self.seen_key = self.keys.log(new[0]) if new else None
            else:
                new = sorted(self._data() - self.baseline)
                self.seen_key = new[0] if new else None
        except ReuseError:
            return False          # the gateway did not answer this look: the next one may
        return self.seen_key is not None

    def implied_by_commit(self, prompt_id: str) -> bool:
        """The run committed (its record is the newest), so it passed this phase: its record was
        created; it uploaded what it wrote (a record naming a data object of its own run)."""
        try:
            _, rec = commit_log.latest(self.view.client, self.keys)
        except ReuseError:
            return False
        if rec is None or rec["kind"] != "version" or (rec["manifest"]["run"] or {}).get("prompt_id") != prompt_id:
            return False
        return self.target == "record" or any(r.startswith(f"data/{rec['writer']}/") for r in rec["objects"].values())

    def close(self) -> None:
        pass
