"""``check(root, name)``: find everything wrong with one cache, optionally repair it.

Repair only runs the crash recovery under the writer lock (restore/remove ``.old``, remove the
staging of dead runs, never a live run's: run_lease.py, break a dead owner's lock, remove stray
lock files).  It never deletes a committed version: a bad one is reported with the command that clears it.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .. import settings
from ..errors import CacheBusyError, CorruptCacheError, InvalidCacheNameError, ReuseError
from ..storage import fsops, serialize
from ..store import file_checks, manifest as mf, namespaces, roots, take_index
from ..store.check import Problem
from ..store.file_checks import check_loadable, sha256_fd
from ..store.owner import describe
from . import rootdirs, run_lease
from .cache import FolderCache
from .layout import cache_paths
from .lease_files import status as lock_status, stray_files
from .reader import read_manifest_at

_RD = fsops.O_READ | os.O_NONBLOCK      # the reader's flags; never blocks on a FIFO
REPAIRABLE = {"stale_tmp", "stale_old", "current_missing", "stale_lock", "dead_lock",
              "stray_lock_file", "eviction_leftover", "stale_reader_lease"}


def _clear_fix(name: str) -> str:
    return f"python -m reuse_backend clear {name} --yes (the next successful run rebuilds it)"


def check(root, name, *, repair: bool = False, lease_s: float = 120.0) -> list[Problem]:
    try:
        roots.validate_cache_name(name)
    except InvalidCacheNameError as e:
        return [Problem("invalid_name", str(name), e.message, e.fix)]
    found = _scan(root, name, lease_s)
    if not repair:
        return found
    st = lock_status(cache_paths(root, name).lock, lease_s)
    if st["state"] == "live":
        return found + [Problem("writer_active", str(cache_paths(root, name).lock),
                                f"repair refused: cache '{name}' is being written by "
                                f"{describe(st['owner'])}",
                                "wait for that run to finish, then run check --repair again")]
    if not any(p.code in REPAIRABLE for p in found):
        return found
    try:
        FolderCache(root, name, lease_s=lease_s).recover()
    except (CacheBusyError, CorruptCacheError) as e:
        return found + [Problem("writer_active" if isinstance(e, CacheBusyError) else "repair_refused",
                                str(e.details.get("lock", e.details.get("path", ""))),
                                f"repair refused: {e.message}", e.fix)]
    after = _scan(root, name, lease_s)
    left = {(p.code, p.path) for p in after}
    fixed = [Problem(p.code, p.path, p.message, p.fix, True) for p in found
             if (p.code, p.path) not in left]
    return fixed + after


def _scan(root, name: str, lease_s: float) -> list[Problem]:
    p = cache_paths(root, name)
    out: list[Problem] = []
    st = lock_status(p.lock, lease_s)
    live = st["state"] == "live"
    if os.path.lexists(p.lock) and not os.path.isfile(p.lock):
        out.append(Problem("not_a_lock_file", str(p.lock), "the writer lock's name holds something that is not a "
                           "lock file: every commit of the cache is refused at once", f"move {p.lock} out of the "
                           "cache root (SeedReuse never creates anything else there)"))
    elif st["state"] == "stale":
        code = "dead_lock" if st["reason"].startswith("owner") else "stale_lock"
        out.append(Problem(code, str(p.lock),
                           f"lock of {describe(st['owner'])} is stale: {st['reason']}",
                           "check --repair breaks it (the next run also does)"))
    if not live:
        for f in stray_files(root, f"{name}.lock"):
            out.append(Problem("stray_lock_file", str(f), "leftover of a crashed lock attempt",
                               "check --repair removes it"))
        if os.path.lexists(p.old):
            if os.path.lexists(p.current):
                out.append(Problem("stale_old", str(p.old), "previous version left by a commit",
                                   "check --repair removes it"))
            else:
                out.append(Problem("current_missing", str(p.current),
                                   f"committed version missing; the previous one is in {p.old.name}",
                                   "check --repair restores it"))
    # staging of runs that are gone (a live run's staging, under its run lease, is no problem)
    for path, why in run_lease.dead_entries(p, lease_s):
        out.append(Problem("stale_tmp", str(path), f"{why}; never committed", "check --repair removes it"))
    if os.path.islink(p.current):
        out.append(Problem("symlinked_cache_dir", str(p.current), "the cache directory is a symlink",
                           f"remove the symlink: {_clear_fix(name)}"))
    elif os.path.lexists(p.current):
        if not os.path.isdir(p.current):
            out.append(Problem("not_a_directory", str(p.current), "the cache entry is not a directory",
                               _clear_fix(name)))
        else:
            out.extend(_scan_version(str(p.current), name))
    # evictions of this cache being deleted (or left by a crash), stale reader leases: rootdirs.py
    out += [Problem(*f) for f in rootdirs.findings(root, name, lease_s)]
    return out


def _scan_version(d: str, name: str) -> list[Problem]:
    out: list[Problem] = []
    fix = _clear_fix(name)
    try:
        dfd = os.open(d, _RD | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        return [Problem("unreadable_dir", d, f"cannot open: {e.strerror}", fix)]
    try:
        try:
            m = read_manifest_at(dfd, name)          # the same reader every load uses
        except FileNotFoundError:
            return [Problem("missing_manifest", os.path.join(d, mf.MANIFEST), "no manifest.json", fix)]
        except (CorruptCacheError, OSError) as e:
            msg = (e.message if isinstance(e, CorruptCacheError) else str(e)).replace("\n", "; ")
            return [Problem("invalid_manifest", os.path.join(d, mf.MANIFEST), msg, fix)]
        files = m["files"]
        loadable = set()
        for fname, entry in sorted(files.items()):
            path = os.path.join(d, fname)
            try:
                fst = os.stat(fname, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                out.append(Problem("missing_file", path, "listed in the manifest but missing", fix))
                continue
            if stat.S_ISLNK(fst.st_mode):
                out.append(Problem("symlinked_file", path, "is a symlink (refused)", fix))
                continue
            if not stat.S_ISREG(fst.st_mode):
                out.append(Problem("not_regular", path, f"is not a regular file ({stat.filemode(fst.st_mode)})", fix))
                continue
            if fst.st_size != entry["bytes"]:
                out.append(Problem("size_mismatch", path,
                                   f"{fst.st_size} bytes, manifest says {entry['bytes']}", fix))
                continue
            fd = os.open(fname, _RD, dir_fd=dfd)
            try:
                if sha256_fd(fd) != entry["sha256"]:
                    out.append(Problem("hash_mismatch", path, "content does not match its sha256", fix))
            finally:
                fsops.close_read_only(fd)     # every fd here is read-only: a close error loses nothing
            loadable.add(fname)
        for fname in sorted(set(os.listdir(dfd)) - set(files) - mf.RESERVED):
            out.append(Problem("extra_file", os.path.join(d, fname), "not listed in the manifest",
                               f"remove it, or {fix}"))
        total = sum(e["bytes"] for e in files.values())
        if total > file_checks.MAX_VERSION_BYTES:
            out.append(Problem("too_large", d, f"{total} bytes > the load bound of a version "
                                               f"{file_checks.MAX_VERSION_BYTES}", fix))
        for why in take_index.problems(m):      # every kept take's files are checked like the latest's
            out.append(Problem("invalid_takes", os.path.join(d, mf.MANIFEST), why, fix))
        tensor_files = {e["file"] for e in m["slots"].values()} | {e["file"] for e in m["boundaries"].values()} \
            | {f for f in files if f.endswith(".safetensors")}
        for fname in sorted(f for f in tensor_files if f in loadable):
            fd = os.open(fname, _RD, dir_fd=dfd)
            try:
                check_loadable(name, fname, os.fstat(fd))
                with os.fdopen(fd, "rb", closefd=False) as f:
                    serialize.load_value(f, max_bytes=files[fname]["bytes"], validate_only=True)
            except ReuseError as e:
                msg = str(e).replace("\n", "; ")
                out.append(Problem("unreadable_tensor", os.path.join(d, fname), msg, fix))
            finally:
                fsops.close_read_only(fd)
    finally:
        fsops.close_read_only(dfd)
    return out


def check_root(root, *, repair: bool = False, lease_s: float = 120.0,
               max_bytes: int | None = None) -> list[Problem]:
    """Root-level problems (not of one cache): eviction leftovers, stale reader leases, entries
    that belong to no cache (``orphaned_entry``), and the root over its size budget
    (``max_bytes``, default ``SEEDREUSE_MAX_BYTES``). Repair finishes evictions, removes stale
    leases and empty folders; it never touches a cache or a foreign entry."""
    try:
        budget = max_bytes if max_bytes is not None else settings.max_bytes()
    except ReuseError as e:
        return [Problem("invalid_budget", str(root), e.message, e.fix)]

    def scan() -> list[Problem]:
        return [Problem(*f) for f in rootdirs.findings(root, None, lease_s)
                + rootdirs.budget_finding(root, budget)] + [
            Problem("orphaned_namespace", str(Path(root) / e), "not a user namespace of this root (a file, a "
                    "symlink or an invalid user id): no node or route uses it",
                    "remove it by hand if nothing of yours is in it (repair never touches it)")
            for e in namespaces.invalid_entries(root)]

    found = scan()
    if not repair or not found:
        return found
    rootdirs.repair_root(root, lease_s)
    after = scan()
    left = {(p.code, p.path) for p in after}
    return [Problem(p.code, p.path, p.message, p.fix, True) for p in found
            if (p.code, p.path) not in left] + after
