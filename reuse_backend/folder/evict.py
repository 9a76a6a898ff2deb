"""The size budget on a folder: safe eviction of least recently used caches (the policy, which and
in which order, is store/budget.py's).

Budget: ``SEEDREUSE_MAX_BYTES`` (off by default; ``500M``, ``20G`` or plain bytes), allocated
bytes under the whole root (usage.py: hard links once). Enforced after every successful commit
(``after_commit``: it can never fail or undo that commit, and never evicts the cache that
committed), by ``python -m reuse_backend gc``, and when a write hits ENOSPC (``retry_when_full``:
evict, then retry the failed write once).

In use, on a folder (the policy skips it): its writer lock is live (taken without waiting), a run
lease is live (a run staging, run_lease.py), or a reader lease is live (readers.py, looked up twice).

Eviction of one cache (``evict_cache``), under its writer lock:
  1. recovery (a half-done commit is finished first: ``.old`` restored or removed);
  2. first look for live readers -> skip;
  3. rename ``<name>`` to ``.evicting/<name>.<id>``, fsync both directories (rootdirs.py);
  4. second look for live readers -> rename it back, skip;
  5. release the lock (the name is free: a new cache may be created under it at once), then
     delete ``.evicting/<name>.<id>``.
A crash at any point leaves the cache either whole under its name (before the rename, or after
the rename back) or gone (after it); a half-deleted version is only ever under ``.evicting``,
finished by recovery of that cache, gc, or check --repair.

What this does not guarantee (besides store/budget.py's): each eviction re-measures the root, which
bounds two hosts enforcing at once to one extra eviction per race. Writes
into a caller's own file (``Transaction.writing``, a video encode) are not retried on ENOSPC:
they fail with StorageFullError (gc, or the budget at the next commit, makes the room). On a disk
so full that not even a lock file fits, nothing can be evicted safely (every eviction takes the
cache's writer lock); the error says so. An evictor stalled past its lease between its last lock
check and its rename (two system calls) could still move a version out (the window of Invariant 4,
store/interface.py).
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from pathlib import Path

from .. import settings
from ..errors import CacheBusyError, ReuseError, StorageFullError
from ..store import budget as budgets, roots
from ..store.budget import Entry, Report
from ..store import file_checks
from ..store.lease import WRITER_LOCK
from ..store.owner import describe
from . import readers, recovery, rootdirs, run_lease, usage
from .layout import cache_of, cache_paths
from .lease_files import lease_file, status, stray_files

log = logging.getLogger("seedreuse")


def survey(root) -> list[Entry]:
    """Every committed cache under ``root``: size and last use, least recently used first."""
    out = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return out
    for name in names:
        p = Path(root) / name
        if not roots.is_valid_cache_name(name) or os.path.islink(p) or not os.path.isdir(p):
            continue
        out.append(Entry(name, usage.tree_size(p), usage.last_used(p)))
    return budgets.least_recently_used(out)


def in_use(root, name: str, lease_s: float) -> str | None:
    """Why ``name`` is in use right now (read-only look: the dry run's judgement), or None."""
    paths = cache_paths(root, name)
    st = status(paths.lock, lease_s)
    if st["state"] == "live":
        return f"being written by {describe(st['owner'])}"
    runs = run_lease.live_runs(paths, lease_s)
    if runs:
        return f"being written by {describe(runs[0])}"
    live = readers.live_readers(root, name, lease_s)
    if live:
        return _readers_why(live)
    return None


class KeptByReaders(str):
    """The why of a cache kept only because readers hold it (a str: callers show it as is);
    ``lingering``: every one of them only lingers (no snapshot open: it goes within LINGER_S)."""
    lingering = False


def _readers_why(live: list[dict]) -> KeptByReaders:
    open_now = [x for x in live if not x.get("idle")]
    o = (open_now or live)[0]["owner"] or {}
    why = KeptByReaders(f"read by {len(live)} reader(s) (host {o.get('host')} pid {o.get('pid')})"
                        + ("" if open_now else ", closing"))
    why.lingering = not open_now
    return why


def evict_cache(root, name: str, *, lease_s: float) -> tuple[bool, str]:
    """Evict one cache (see the module docstring); (True, size line) or (False, why kept)."""
    paths = cache_paths(root, name)
    lock = lease_file(paths.lock, f"{readers.EVICT_RUN_PREFIX}{uuid.uuid4().hex}", WRITER_LOCK, lease_s=lease_s,
                      cache_name=name)
    try:
        # Invariant 6 (eviction): never a cache with a live writer: the lock, without waiting.
        lock.acquire()
    except CacheBusyError as e:
        return False, f"being written by {e.actual}"
    aside = None
    try:
        recovery.recover_locked(root, name, paths, lease_s)
        # Invariant 6 (eviction): runs stage without the lock, each under its run lease: a
        # live one keeps the cache as a writer did (its base may be this version)
        runs = run_lease.live_runs(paths, lease_s)
        if runs:
            return False, f"being written by {describe(runs[0])}"
        # Invariant 6 (eviction): never a cache a reader registered for, at either look.
        live = readers.live_readers(root, name, lease_s)
        if live:
            return False, _readers_why(live)
        if os.path.islink(paths.current) or not os.path.isdir(paths.current):
            return False, "no committed version"
        size = usage.tree_size(paths.current)
        # fencing, as a commit: the lock is still ours right before the rename (an evictor
        # stalled past its lease must not move a version the next writer committed)
        if not lock.held():
            return False, "lost the writer lock (stalled past its lease)"
        aside = rootdirs.move_out(root, name, paths.current)
        try:
            live = readers.live_readers(root, name, lease_s)
        except OSError:
            live = [{"owner": None}]    # cannot tell: keep the cache
        if live:
            rootdirs.move_back(aside, paths.current, root)
            aside = None
            return False, _readers_why(live)
    finally:
        lock.release()
    # the name is free from here; the data is out of the namespace and only needs deleting
    try:
        readers.remove_stale(root, name, lease_s)
        rootdirs.delete(aside)
        rootdirs.remove_if_empty(aside.parent)
    except OSError as e:      # evicted all the same: gc, check --repair or recovery finish it
        log.warning("seedreuse: evicted cache '%s'; deleting %s failed: %s", name, aside, e)
    return True, f"{size} bytes"


def evict_cache_when_readers_leave(root, name: str, *, lease_s: float,
                                   wait_s: float = 2 * readers.LINGER_S + 1.0) -> tuple[bool, str]:
    """evict_cache for a user's explicit delete: while only lingering reader leases keep the
    cache, retried for at most ``wait_s``. A process keeps its reader lease LINGER_S after its
    last snapshot closed (reader_leases.py), so a delete right after another worker's hit would
    otherwise be refused for that long. A reader with a snapshot open now is answered at once
    (it may read for minutes: waiting would only delay the same refusal)."""
    deadline = time.monotonic() + wait_s
    while True:
        ok, why = evict_cache(root, name, lease_s=lease_s)
        if ok or not (isinstance(why, KeptByReaders) and why.lingering) or time.monotonic() >= deadline:
            return ok, why
        time.sleep(0.1)


def recover_leftovers(root, lease_s: float) -> list[str]:
    """gc as janitor: crash recovery of every cache with leftovers (a dead writer's or
    evictor's lock, staging, ``.old``, stray lock files), each under its writer lock; a cache
    with a live writer is left to it."""
    done = []
    names = sorted({cache_of(e) for e in _listdir(root)} - {None})
    for name in names:
        paths = cache_paths(root, name)
        if not (recovery.has_leftovers(paths) or stray_files(root, f"{name}.lock")):
            continue
        lock = lease_file(paths.lock, f"recover-{uuid.uuid4().hex}", WRITER_LOCK, lease_s=lease_s, cache_name=name)
        try:
            lock.acquire()
        except CacheBusyError:
            continue
        try:
            done += lock.broke + recovery.recover_locked(root, name, paths, lease_s)
        except OSError as e:
            log.warning("seedreuse: recovery of cache '%s' failed: %s", name, e)
        finally:
            lock.release()
    return done


def _listdir(root) -> list[str]:
    try:
        return os.listdir(root)
    except OSError:
        return []


def _pass(root, budget: int | None, *, exclude, lease_s: float, dry_run: bool, need_free: int = 0) -> Report:
    root = Path(root)
    cleaned = [] if dry_run else (rootdirs.finish_evictions(root) + readers.remove_stale(root, None, lease_s)
                                  + recover_leftovers(root, lease_s))
    total = usage.root_size(root)
    rep = Report(str(root), budget, total, total, dry_run, [], cleaned)

    def enough_free() -> bool:
        free = usage.disk_free(root)
        return free is not None and free[0] >= need_free

    budgets.make_room(rep, survey(root), exclude=exclude, in_use=lambda n: in_use(root, n, lease_s),
                      evict=lambda n: evict_cache(root, n, lease_s=lease_s), remeasure=lambda: usage.root_size(root),
                      need_free=enough_free if need_free > 0 else None)
    if not dry_run:
        rep.bytes_after = usage.root_size(root)
    return rep


def enforce(root, budget: int | None, *, exclude=(), lease_s: float = 120.0,
            dry_run: bool = False) -> Report:
    """Evict least recently used caches until the root is within ``budget`` (gc)."""
    return _pass(root, budget, exclude=set(exclude), lease_s=lease_s, dry_run=dry_run)


def after_commit(cache) -> Report | None:
    """Budget enforcement after a successful commit of ``cache``. Never raises: the commit
    stands whatever happens here (a failure is logged)."""
    try:
        budget = budgets.budget_for(cache.root)     # automatic caches: always a budget
        if budget is None:
            return None
        rep = enforce(cache.root, budget, exclude={cache.name}, lease_s=cache.lease_s)
        if rep.over_budget:
            log.warning("seedreuse: cache root %s holds %d bytes, over its budget of %d: the rest is "
                        "in use or just written", cache.root, rep.bytes_after, budget)
        return rep
    except Exception as e:  # noqa: BLE001 - Invariant: a budget failure never fails the commit
        log.warning("seedreuse: budget enforcement after the commit of cache '%s' failed: %s",
                    cache.name, e)
        return None


def make_room(cache, need_bytes: int) -> list[str]:
    """On ENOSPC (budget set only): evict least recently used caches, never ``cache`` nor one
    in use, until the free space grew by ``need_bytes`` (see below) and the root is within
    budget. Names evicted."""
    try:
        budget = settings.max_bytes()
    except ReuseError as e:
        log.warning("seedreuse: %s", e.message)
        return []
    if budget is None:
        return []           # no budget: nothing may be evicted automatically
    # How much room: the failed write needed more than is free now (its partial file is gone
    # again), so free space must grow by what the caller says, else by about one more version
    # of this cache (a new version is usually as large as the committed one), at least 1 MiB.
    need = max(int(need_bytes) or usage.tree_size(cache.paths.current), 1 << 20)
    free = usage.disk_free(cache.root)
    rep = _pass(cache.root, budget, exclude={cache.name}, lease_s=cache.lease_s, dry_run=False,
                need_free=(free[0] if free else 0) + need)
    return [e.name for e in rep.caches if e.action == "evicted"]


def retry_when_full(cache, fn, *, reset=None, during: str | None = None):
    """``fn()``; on ENOSPC/EDQUOT evict what the budget allows and retry it once
    (store/file_checks.py)."""
    def free() -> list[str]:
        evicted = make_room(cache, 0)
        if evicted:
            log.warning("seedreuse: cache root %s was full; evicted %s and retrying once", cache.root,
                        ", ".join(evicted))
        return evicted
    return file_checks.retry_when_full(fn, free=free, full_error=lambda e, d: storage_full(cache, e, d),
                                       reset=reset, during=during)


def storage_full(cache, exc: OSError, during: str) -> StorageFullError:
    """ENOSPC/EDQUOT as a typed error: the root, its size, its free space, the budget, the fix.
    The committed version is untouched (nothing of a failed run is ever published)."""
    s = usage.root_summary(cache.root)
    free = (f"{s['free']} bytes free of {s['capacity']}" if s["free"] is not None
            else "free space unknown") + f"; the root holds {s['bytes']} bytes"
    try:
        budget = settings.max_bytes()
    except ReuseError:
        budget = None
    if budget is None:
        free += f"; no budget ({settings.MAX_BYTES} is not set)"
        fix = (f"set {settings.MAX_BYTES} (e.g. 80% of the disk) so least recently used caches are "
               f"evicted, or free space on {cache.root} (python -m reuse_backend --root {cache.root} "
               "list shows the caches; clear NAME --yes removes one), or point SEEDREUSE_CACHE_ROOT at "
               "a larger disk, then rerun")
    else:
        free += f"; budget {budget} bytes ({settings.MAX_BYTES})"
        fix = (f"every cache that could be evicted was (the rest is in use, or the disk is too full even "
               f"for an eviction's lock file); lower {settings.MAX_BYTES} "
               f"below the disk's free capacity, free space on {cache.root}, or point "
               "SEEDREUSE_CACHE_ROOT at a larger disk, then rerun")
    return StorageFullError(
        f"the cache root {cache.root} is full: cannot {during} for cache '{cache.name}' "
        f"({exc.strerror}); the last good version of the cache is untouched",
        expected="free space on the cache root", actual=free, fix=fix,
        details={"root": str(cache.root), "cache": cache.name, "errno": exc.errno,
                 "root_bytes": s["bytes"], "budget": budget})
