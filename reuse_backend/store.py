"""Shared-disk cache: consistent committed snapshots, staged transactions, crash recovery.

Layout (see docs/ARCHITECTURE.md): ``<root>/<name>/`` is the committed version (never
modified in place), ``<name>.tmp/`` the staging of the one writer, ``<name>.old/`` the
previous version during the commit window only, ``<name>.lock`` the writer lock.

A reader opens the version directory once and reads every file relative to that
directory fd; it also keeps every file of the version open, so a snapshot stays readable
(and unchanged) even when a later commit renames and removes its directory.
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import fsops, roots, serialize
from . import manifest as mf
from .errors import CorruptCacheError, NoCommittedCacheError, TransactionError
from .lock import WriterLock, hostname, stray_lock_files

log = logging.getLogger("seedreuse")

DEFAULT_BUDGET = 64 << 30
_RD = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
_DIR = _RD | getattr(os, "O_DIRECTORY", 0)


@dataclass
class RunInfo:
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    host: str = field(default_factory=hostname)
    pid: int = field(default_factory=os.getpid)
    prompt_id: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"run_id": str(self.run_id), "host": str(self.host), "pid": int(self.pid),
                "prompt_id": self.prompt_id, "extra": dict(self.extra)}


class _Retry(Exception):
    """The version being read changed underneath us (a concurrent commit): read again."""


def _corrupt(name: str, what: str, *, expected=None, actual=None) -> CorruptCacheError:
    return CorruptCacheError(f"cache '{name}': {what}", expected=expected, actual=actual,
                             fix=f"clear it (python -m reuse_backend clear {name} --yes) and rerun; "
                                 "nothing from it was used")


def sha256_fd(fd: int, chunk: int = 1 << 20) -> str:
    h, off = hashlib.sha256(), 0
    while True:
        b = os.pread(fd, chunk, off)
        if not b:
            return h.hexdigest()
        h.update(b)
        off += len(b)


def list_caches(root) -> list[str]:
    """Names of the caches under ``root`` (committed, staging, previous or locked)."""
    names = set()
    try:
        entries = os.listdir(root)
    except FileNotFoundError:
        return []
    for e in entries:
        base = e
        for suf in roots.SUFFIXES:
            if e.endswith(suf):
                base = e[:-len(suf)]
        if roots.is_valid_cache_name(base):   # foreign entries are not caches
            names.add(base)
    return sorted(names)


class Cache:
    def __init__(self, root, name: str, *, max_total_bytes: int = DEFAULT_BUDGET,
                 lease_s: float = 120.0, heartbeat_s: float = 10.0):
        self.name = roots.validate_cache_name(name)
        self.root = Path(root)
        self.paths = roots.cache_paths(self.root, self.name)
        self.max_total_bytes = int(max_total_bytes)
        self.lease_s, self.heartbeat_s = lease_s, heartbeat_s

    def __repr__(self) -> str:
        return f"Cache({str(self.root)!r}, {self.name!r})"

    # ------------------------------------------------------------------ reading
    def snapshot(self, retries: int = 20, delay: float = 0.05) -> Snapshot | None:
        """The committed version (one version, never a mix), or None when never committed."""
        nones, last = 0, None
        for _ in range(max(retries, 2) + 1):
            try:
                snap = self._snapshot_once()
            except _Retry as e:
                last = e
                time.sleep(delay)
                continue
            if snap is not None:
                return snap
            nones += 1      # neither current nor .old: confirm (a commit may have raced us)
            if nones >= 3:
                return None
        if last is None:
            return None
        raise _corrupt(self.name, f"kept changing while being read ({last})",
                       expected="a stable committed version", actual=f"{retries} retries")

    def _open_version(self):
        for source, path in (("current", self.paths.current), ("old", self.paths.old)):
            try:
                return source, path, os.open(path, _DIR)
            except FileNotFoundError:
                continue
            except OSError as e:
                if os.path.islink(path):
                    raise _corrupt(self.name, f"{path} is a symlink", expected="a real directory",
                                   actual=f"symlink to {os.readlink(path)!r}") from None
                if e.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise _corrupt(self.name, f"{path} is not a directory", expected="a directory",
                                   actual="another kind of file") from None
                raise
        return None, None, None

    def _snapshot_once(self) -> Snapshot | None:
        source, path, dfd = self._open_version()
        if dfd is None:
            return None
        fds: dict[str, int] = {}
        try:
            m = self._read_manifest(dfd, source, path)
            total = sum(e["bytes"] for e in m["files"].values())
            if total > self.max_total_bytes:
                raise _corrupt(self.name, "is larger than the cache budget",
                               expected=f"<= {self.max_total_bytes} bytes", actual=f"{total} bytes")
            for fname, entry in m["files"].items():
                fds[fname] = self._open_member(dfd, fname, entry, source, path)
            snap = Snapshot(self, dfd, m, fds, source)
            dfd, fds = None, {}
            return snap
        finally:
            for fd in fds.values():
                os.close(fd)
            if dfd is not None:
                os.close(dfd)

    def _vanished(self, dfd: int, source: str, path, what: str) -> Exception:
        """A missing entry: a race (the version was moved away: retry) or real corruption."""
        if source == "old":
            return _Retry(what)
        try:
            st, here = os.fstat(dfd), os.lstat(path)
            if (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino):
                return _corrupt(self.name, what, expected="every file the manifest lists",
                                actual="missing")
        except FileNotFoundError:
            pass
        return _Retry(what)

    def _read_manifest(self, dfd: int, source: str, path) -> dict:
        try:
            st = os.stat(mf.MANIFEST, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            raise self._vanished(dfd, source, path, "manifest.json is missing") from None
        if not stat.S_ISREG(st.st_mode):
            raise _corrupt(self.name, "manifest.json is not a regular file",
                           expected="a regular file", actual=stat.filemode(st.st_mode))
        if st.st_size > mf.MAX_MANIFEST_BYTES:
            raise _corrupt(self.name, "manifest.json is too large",
                           expected=f"<= {mf.MAX_MANIFEST_BYTES} bytes", actual=st.st_size)
        try:
            fd = os.open(mf.MANIFEST, _RD | os.O_NONBLOCK, dir_fd=dfd)
        except FileNotFoundError:     # removed between the stat and the open
            raise self._vanished(dfd, source, path, "manifest.json is missing") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise _corrupt(self.name, "manifest.json is not a regular file",
                               expected="a regular file", actual="symlink") from None
            raise
        try:
            data = os.read(fd, mf.MAX_MANIFEST_BYTES + 1)
        finally:
            os.close(fd)
        try:
            return mf.parse(data, name=self.name)
        except CorruptCacheError as e:
            raise _corrupt(self.name, e.message, expected=e.expected, actual=e.actual) from None

    def _open_member(self, dfd: int, fname: str, entry: dict, source: str, path) -> int:
        try:
            st = os.stat(fname, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            raise self._vanished(dfd, source, path, f"{fname} is missing") from None
        if not stat.S_ISREG(st.st_mode):
            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else stat.filemode(st.st_mode)
            raise _corrupt(self.name, f"{fname} is not a regular file",
                           expected="a regular file", actual=kind)
        try:
            fd = os.open(fname, _RD | os.O_NONBLOCK, dir_fd=dfd)
        except FileNotFoundError:
            raise self._vanished(dfd, source, path, f"{fname} is missing") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise _corrupt(self.name, f"{fname} is a symlink", expected="a regular file",
                               actual="symlink") from None
            raise
        st2 = os.fstat(fd)
        if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino) or st2.st_size != entry["bytes"]:
            os.close(fd)
            raise _corrupt(self.name, f"{fname} has the wrong size",
                           expected=f"{entry['bytes']} bytes", actual=f"{st2.st_size} bytes")
        return fd

    # ------------------------------------------------------------------ writing
    def writer_lock(self, run_id: str) -> WriterLock:
        return WriterLock(self.paths.lock, run_id, lease_s=self.lease_s,
                          heartbeat_s=self.heartbeat_s, cache_name=self.name)

    def begin(self, run: RunInfo | None = None) -> Transaction:
        """Lock, recover, snapshot the base, create fresh staging. CacheBusyError if locked."""
        run = run or RunInfo()
        if not self.root.is_dir():
            fsops.mkdir(self.root, parents=True, exist_ok=True)
        lock = self.writer_lock(run.run_id).acquire()
        base = None
        try:
            recovered = self._recover_locked()
            try:
                base, base_error = self.snapshot(), None
            except CorruptCacheError as e:   # a broken version cannot be a base; it gets replaced
                log.warning("%s", e)
                base, base_error = None, e
            tx = Transaction(self, run, lock, base, base_error, recovered)
            tx._create_staging()
            return tx
        except BaseException:
            if base is not None:
                base.close()
            lock.release()
            raise

    def _recover_locked(self) -> list[str]:
        """Crash recovery; the caller holds the writer lock."""
        p, done = self.paths, []
        cur, old = os.path.lexists(p.current), os.path.lexists(p.old)
        if not cur and old:
            # the crash hit the commit window after current -> .old: the previous version is back
            fsops.rename(p.old, p.current)
            fsops.fsync_dir(self.root)
            done.append(f"restored previous version from {p.old.name}")
        elif cur and old:
            # the crash hit after .tmp -> current: the new version stands, .old is garbage
            fsops.rmtree(p.old)
            fsops.fsync_dir(self.root)
            done.append(f"removed leftover {p.old.name}")
        if os.path.lexists(p.tmp):
            # staging of a run that never committed (or a clear() that crashed)
            fsops.rmtree(p.tmp)
            fsops.fsync_dir(self.root)
            done.append(f"removed unfinished staging {p.tmp.name}")
        for f in stray_lock_files(self.root, self.name):
            fsops.unlink(f, missing_ok=True)
            done.append(f"removed stray lock file {f.name}")
        return done

    def recover(self, run_id: str | None = None) -> list[str]:
        """Recovery under the writer lock (CacheBusyError while a live writer holds it)."""
        lock = self.writer_lock(run_id or f"recover-{uuid.uuid4().hex}").acquire()
        try:
            return lock.broke + self._recover_locked()
        finally:
            lock.release()

    def clear(self, run_id: str | None = None) -> list[str]:
        """Remove the committed version (under the lock)."""
        lock = self.writer_lock(run_id or f"clear-{uuid.uuid4().hex}").acquire()
        try:
            done = lock.broke + self._recover_locked()
            if os.path.lexists(self.paths.current):
                # moved to .tmp first: a crash mid-removal leaves staging, which recovery removes
                fsops.rename(self.paths.current, self.paths.tmp)
                fsops.fsync_dir(self.root)
                fsops.rmtree(self.paths.tmp)
                fsops.fsync_dir(self.root)
                done.append(f"removed committed version of '{self.name}'")
            return done
        finally:
            lock.release()


class Snapshot:
    """One committed version, pinned: every file stays open until close()."""

    def __init__(self, cache: Cache, dfd: int, manifest: dict, fds: dict, source: str):
        self.cache, self.manifest, self.source = cache, manifest, source
        self._dfd, self._fds = dfd, fds

    @property
    def version(self) -> str:
        return self.manifest["version"]

    @property
    def name(self) -> str:
        return self.cache.name

    def slot_entry(self, slot: str) -> dict | None:
        e = self.manifest["slots"].get(slot)
        return json.loads(json.dumps(e)) if e is not None else None

    def boundary_indices(self) -> list[int]:
        return sorted(int(i) for i in self.manifest["boundaries"])

    def section(self, name: str) -> dict | None:
        s = self.manifest["sections"].get(name)
        return json.loads(json.dumps(s)) if s is not None else None

    def has_file(self, fname: str) -> bool:
        return fname in self.manifest["files"]

    def _fd(self, fname: str) -> int:
        if self._dfd is None:
            raise TransactionError("snapshot is closed", expected="an open snapshot",
                                   actual="closed", fix="take a new snapshot")
        if fname not in self._fds:
            raise NoCommittedCacheError(f"cache '{self.name}' has no file '{fname}'",
                                        expected=fname, actual=sorted(self._fds),
                                        fix="run once without reuse so the cache holds it")
        return self._fds[fname]

    def open_file(self, fname: str):
        """An independent read-only binary file object on one file of this version."""
        fd = self._fd(fname)
        try:   # a new open file description (own offset), valid even if the name was removed
            new = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            try:
                new = os.open(fname, _RD, dir_fd=self._dfd)
            except FileNotFoundError:
                raise _corrupt(self.name, f"{fname} vanished while in use") from None
        a, b = os.fstat(fd), os.fstat(new)
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
            os.close(new)
            raise _corrupt(self.name, f"{fname} was replaced while in use")
        return os.fdopen(new, "rb")

    def file_hash_ok(self, fname: str) -> bool:
        return sha256_fd(self._fd(fname)) == self.manifest["files"][fname]["sha256"]

    def _load(self, fname: str, verify: bool | None):
        # Structural validation (sizes, dtypes, shapes, offsets) always runs while loading;
        # the sha256 pass is a second read of the file, so by default it is left to check()
        # (SEEDREUSE_VERIFY_ON_LOAD=1 turns it on for every load).
        if verify is None:
            verify = os.environ.get("SEEDREUSE_VERIFY_ON_LOAD") == "1"
        if verify and not self.file_hash_ok(fname):
            raise _corrupt(self.name, f"{fname} does not match its recorded sha256",
                           expected=self.manifest["files"][fname]["sha256"], actual="other content")
        with self.open_file(fname) as f:
            try:
                return serialize.load_value(f, max_bytes=self.manifest["files"][fname]["bytes"])
            except CorruptCacheError as e:
                raise _corrupt(self.name, f"{fname}: {e.message}", expected=e.expected,
                               actual=e.actual) from None

    def load_slot(self, slot: str, *, verify: bool | None = None):
        e = self.manifest["slots"].get(slot)
        if e is None:
            raise NoCommittedCacheError(f"cache '{self.name}' has no slot '{slot}'",
                                        expected=f"slot '{slot}'",
                                        actual=f"slots {sorted(self.manifest['slots'])}",
                                        fix="run once with this slot so the cache holds it")
        return self._load(e["file"], verify)

    def load_boundary(self, i: int, *, verify: bool | None = None):
        e = self.manifest["boundaries"].get(str(int(i)))
        if e is None:
            raise NoCommittedCacheError(f"cache '{self.name}' has no boundary {i}",
                                        expected=f"boundary {i}",
                                        actual=f"boundaries {self.boundary_indices()}",
                                        fix="reuse fewer prefix segments, or rerun without reuse")
        return self._load(e["file"], verify)

    def verify_hashes(self) -> list[str]:
        """Problems (one line each) for files whose content does not match the manifest."""
        return [f"{fname}: sha256 mismatch" for fname in sorted(self._fds)
                if not self.file_hash_ok(fname)]

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)
        if self._dfd is not None:
            os.close(self._dfd)
            self._dfd = None

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - a forgotten snapshot must not leak fds
        try:
            self.close()
        except OSError as e:
            log.debug("closing a forgotten snapshot: %s", e)


def _jsonable(body, what: str) -> dict:
    if type(body) is not dict:
        raise TransactionError(f"{what} must be a dict", expected="dict", actual=type(body).__name__,
                               fix="pass a plain JSON object")
    try:
        return json.loads(json.dumps(body, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise TransactionError(f"{what} is not plain JSON ({e})", expected="JSON values",
                               actual=repr(body)[:120], fix="keep keys/meta/sections JSON-only") from None


class Transaction:
    """Staging of one run. Single use: commit() publishes it, discard() drops it."""

    def __init__(self, cache: Cache, run: RunInfo, lock: WriterLock, base, base_error, recovered):
        self.cache, self.run, self.lock = cache, run, lock
        self.base: Snapshot | None = base
        self.base_error = base_error
        self.recovered: list[str] = lock.broke + recovered
        self.state = "open"          # open | failed | committed | discarded | fenced
        self.version: str | None = None
        self.warnings: list[str] = []
        self._files: dict[str, dict] = {}
        self._slots: dict[str, dict] = {}
        self._boundaries: dict[str, dict] = {}
        self._sections: dict[str, dict] = {}
        self._pending: set[str] = set()
        self._tmp_id = None
        self.staging = cache.paths.tmp

    def _misuse(self, what: str) -> TransactionError:
        return TransactionError(f"transaction of cache '{self.cache.name}' is {self.state}: "
                                f"cannot {what}", expected="an open transaction", actual=self.state,
                                fix="begin() a new transaction for the next run")

    def _create_staging(self) -> None:
        fsops.mkdir(self.staging)
        st = os.lstat(self.staging)
        self._tmp_id = (st.st_dev, st.st_ino)
        body = json.dumps({"run_id": self.run.run_id, "host": self.run.host, "pid": self.run.pid,
                           "started_at": time.time()}).encode()
        fsops.write_file_atomic(self.staging / mf.STAGING, body)
        fsops.fsync_dir(self.cache.root)

    def _fence(self, what: str) -> None:
        """Fencing: our lock is still the lock, and .tmp is still our staging directory."""
        if self.state != "open":
            raise self._misuse(what)
        ok = self.lock.held()
        try:
            st = os.lstat(self.staging)
            ok = ok and (st.st_dev, st.st_ino) == self._tmp_id
        except FileNotFoundError:
            ok = False
        if not ok:
            self.state = "fenced"
            raise TransactionError(
                f"run {self.run.run_id} lost the writer lock of cache '{self.cache.name}'",
                expected="the lock and staging of this run", actual="taken over by another run",
                fix="the run was too slow to heartbeat (lease expired); rerun it",
                details={"lock": str(self.cache.paths.lock)})

    def _path(self, fname: str) -> Path:
        return self.staging / fname

    def _drop(self, fname: str) -> None:
        """Unlink a staged name before re-staging it (never write into a carried hard link)."""
        self._files.pop(fname, None)
        if os.path.lexists(self._path(fname)):
            fsops.unlink(self._path(fname))

    def _write_value(self, fname: str, value) -> dict:
        final = self._path(fname)
        part = self._path(f".{fname}.part-{uuid.uuid4().hex}")
        fd = fsops.open_exclusive(part)
        ok = False
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                w = fsops.HookedWriter(f, part, hashlib.sha256())
                serialize.dump_value(w, value)
                f.flush()
            fsops.fsync_file(fd, part)
            size = os.fstat(fd).st_size
            digest = w.hasher.hexdigest() if w.sequential and w.count == size else sha256_fd(fd)
            self._drop(fname)
            fsops.rename(part, final)
            ok = True
        finally:
            os.close(fd)
            if not ok:
                try:
                    fsops.unlink(part, missing_ok=True)
                except OSError:
                    pass        # staging is removed as a whole by discard/recovery
        entry = {"bytes": size, "sha256": digest}
        self._files[fname] = entry
        return entry

    def _carry(self, fname: str) -> None:
        if self.base is None:
            raise NoCommittedCacheError(
                f"cache '{self.cache.name}' has no committed version to carry '{fname}' from",
                expected="a committed base version", actual="none",
                fix="run without reuse first")
        entry = dict(self.base.manifest["files"][fname])
        self.base._fd(fname)
        self._drop(fname)
        fsops.link_or_copy(fname, self._path(fname), src_dir_fd=self.base._dfd)
        size = os.lstat(self._path(fname)).st_size
        if size != entry["bytes"]:
            raise _corrupt(self.cache.name, f"carried {fname} has the wrong size",
                           expected=entry["bytes"], actual=size)
        self._files[fname] = entry

    def stage_slot(self, slot: str, value, *, key: dict, meta: dict | None = None) -> dict:
        self._fence("stage a slot")
        roots.validate_slot_name(slot)
        key, meta = _jsonable(key, "slot key"), _jsonable(meta or {}, "slot meta")
        fname = mf.slot_file(slot)
        entry = self._write_value(fname, value)
        self._slots[slot] = {"file": fname, "key": key, "meta": meta}
        return entry

    def carry_slot(self, slot: str) -> None:
        """Keep the base version's slot (hard link; key and meta kept)."""
        self._fence("carry a slot")
        e = self.base.slot_entry(slot) if self.base is not None else None
        if e is None and self.base is not None:
            raise NoCommittedCacheError(f"cache '{self.cache.name}' has no slot '{slot}' to carry",
                                        expected=f"slot '{slot}'", actual=sorted(self.base.manifest["slots"]),
                                        fix="encode the slot instead")
        self._carry(mf.slot_file(roots.validate_slot_name(slot)))
        self._slots[slot] = e

    def _boundary_index(self, i) -> str:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i <= mf.MAX_BOUNDARY:
            raise TransactionError("invalid boundary index", expected=f"int 0..{mf.MAX_BOUNDARY}",
                                   actual=repr(i), fix="pass the segment boundary number")
        return str(i)

    def stage_boundary(self, i: int, value, meta: dict | None = None) -> dict:
        self._fence("stage a boundary")
        idx = self._boundary_index(i)
        meta = _jsonable(meta or {}, "boundary meta")
        entry = self._write_value(mf.boundary_file(i), value)
        self._boundaries[idx] = {"file": mf.boundary_file(i), "meta": meta}
        return entry

    def carry_boundary(self, i: int) -> None:
        self._fence("carry a boundary")
        idx = self._boundary_index(i)
        e = self.base.manifest["boundaries"].get(idx) if self.base is not None else None
        if e is None and self.base is not None:
            raise NoCommittedCacheError(f"cache '{self.cache.name}' has no boundary {i} to carry",
                                        expected=f"boundary {i}", actual=self.base.boundary_indices(),
                                        fix="reuse fewer prefix segments")
        self._carry(mf.boundary_file(i))
        self._boundaries[idx] = json.loads(json.dumps(e))

    def carry_file(self, fname: str) -> None:
        """Keep a plain file (e.g. result.mp4) of the base version."""
        self._fence("carry a file")
        roots.validate_file_name(fname)
        if self.base is not None and not self.base.has_file(fname):
            raise NoCommittedCacheError(f"cache '{self.cache.name}' has no file '{fname}' to carry",
                                        expected=fname, actual=sorted(self.base.manifest["files"]),
                                        fix="produce the file in this run")
        self._carry(fname)

    def stage_path(self, fname: str) -> str:
        """A fresh path inside staging for the caller to write; then call add_file(fname)."""
        self._fence("stage a file")
        roots.validate_file_name(fname)
        if fname in mf.RESERVED:
            raise TransactionError(f"'{fname}' is reserved", expected="another file name",
                                   actual=fname, fix="pick another name")
        self._drop(fname)
        self._pending.add(fname)
        return str(self._path(fname))

    def discard_file(self, fname: str) -> None:
        """Remove a scratch file written at stage_path() that is not to be published."""
        self._fence("discard a file")
        roots.validate_file_name(fname)
        self._pending.discard(fname)
        self._drop(fname)

    def add_file(self, fname: str) -> dict:
        """Record a file written at stage_path(fname): fsync it, record bytes and sha256."""
        self._fence("add a file")
        if fname not in self._pending:
            raise TransactionError(f"add_file('{fname}') without stage_path('{fname}')",
                                   expected="stage_path first", actual=fname,
                                   fix="write the file at the path stage_path() returned")
        try:
            fd = os.open(self._path(fname), _RD | os.O_NONBLOCK)
        except OSError as e:
            raise TransactionError(f"staged file '{fname}' cannot be opened ({e.strerror})",
                                   expected="a regular file at stage_path()", actual="missing or symlink",
                                   fix="write the file before add_file()") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise TransactionError(f"staged '{fname}' is not a regular file",
                                       expected="a regular file", actual="other", fix="write a file")
            fsops.fsync_file(fd, self._path(fname))
            entry = {"bytes": os.fstat(fd).st_size, "sha256": sha256_fd(fd)}
        finally:
            os.close(fd)
        self._pending.discard(fname)
        self._files[fname] = entry
        return entry

    def set_section(self, name: str, body: dict) -> None:
        self._fence("set a section")
        roots.validate_slot_name(name)
        self._sections[name] = _jsonable(body, f"section '{name}'")

    def _manifest(self) -> dict:
        return {"schema": mf.SCHEMA, "name": self.cache.name, "version": uuid.uuid4().hex,
                "created_at": time.time(), "run": self.run.to_dict(),
                "slots": self._slots, "boundaries": self._boundaries, "sections": self._sections,
                "files": self._files}

    def commit(self) -> str:
        """Publish the staging as the new committed version; returns its version id."""
        self._fence("commit")
        try:
            if self._pending:
                raise TransactionError("staged files were never added", expected="add_file() for each",
                                       actual=sorted(self._pending), fix="call add_file() or discard")
            # Invariant 1: every file the manifest names is durable before the manifest exists.
            for fname in self._files:
                fsops.fsync_file(self._path(fname))
            m = self._manifest()
            data = mf.dumps(m)
            # Invariant 2: the manifest is written last, atomically (temp + fsync + rename + fsync).
            fsops.write_file_atomic(self._path(mf.MANIFEST), data)
            fsops.fsync_dir(self.staging)
            # Invariant 3 (fencing): the lock is still ours and .tmp is still our staging.
            self._fence("commit")
            staged = json.loads((self.staging / mf.STAGING).read_bytes())
            if staged.get("run_id") != self.run.run_id:
                self.state = "fenced"
                raise TransactionError("staging belongs to another run", expected=self.run.run_id,
                                       actual=staged.get("run_id"), fix="rerun")
        except BaseException:
            if self.state == "open":
                self.state = "failed"
            raise
        p, moved = self.cache.paths, False
        try:
            if os.path.lexists(p.current):
                # Invariant 4: the previous version moves aside whole; readers fall back to .old.
                fsops.rename(p.current, p.old)
                moved = True
            fsops.rename(self.staging, p.current)
        except BaseException:
            self.state = "failed"
            if moved:
                try:   # Invariant 5: a commit that fails between the renames restores the previous
                    fsops.rename(p.old, p.current)
                except OSError as e:   # recovery restores it (current missing + .old present)
                    log.warning("could not restore %s: %s", p.old, e)
            raise
        # Invariant 6: from here the new version is current; cleanup failures cannot unpublish it.
        self.state, self.version = "committed", m["version"]
        steps = [lambda: fsops.fsync_dir(self.cache.root)]
        if moved:   # Invariant 7: .old is removed last, only once the new version is durable
            steps += [lambda: fsops.rmtree(p.old), lambda: fsops.fsync_dir(self.cache.root)]
        for step in steps:
            try:
                step()
            except OSError as e:
                self.warnings.append(f"commit cleanup: {e}")
                log.warning("cache '%s' committed; cleanup failed (recovery finishes it): %s",
                            self.cache.name, e)
        self._finish()
        return self.version

    def _finish(self) -> None:
        if self.base is not None:
            self.base.close()
        try:
            self.lock.release()
        except OSError as e:
            self.warnings.append(f"lock release: {e}")
            log.warning("could not release lock of cache '%s': %s", self.cache.name, e)

    def discard(self) -> bool:
        """Drop the staging and release the lock; the committed version is untouched.

        Safe to call after a failure or twice; a no-op after commit.  Returns False when
        cleanup was incomplete (recovery at the next begin finishes it).
        """
        if self.state in ("committed", "discarded"):
            return True
        fenced, self.state = self.state == "fenced" or not self.lock.held(), "discarded"
        ok = True
        if not fenced:        # a fenced run must not touch .tmp: it may be the new owner's
            try:
                fsops.rmtree(self.staging)
                fsops.fsync_dir(self.cache.root)
            except OSError as e:
                ok = False
                self.warnings.append(f"discard: {e}")
                log.warning("could not remove staging of cache '%s': %s", self.cache.name, e)
        self._finish()
        return ok

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, *exc) -> None:
        self.discard()
