"""Reading one committed version: never a mix of two, never a file outside the version.

A reader opens the version directory once (``current``, or ``.old`` inside a commit window)
and reads every file relative to that directory fd; it also keeps every file of the version
open, so a snapshot stays readable (and unchanged) even when a later commit renames and
removes its directory. A file that vanishes while the version is being opened means either
a concurrent commit (retry, bounded) or corruption (the directory is still the current one).

Loads are bounded before any byte is read: by the manifest's sizes, by the cache's byte
budget, by the memory this machine has available, and by the file's allocated size (a
sparse file claiming gigabytes of zeros is refused: ``SEEDREUSE_ALLOW_SPARSE=1`` lifts that
check for filesystems that compress transparently).

What this does not guarantee: a reader on a network filesystem whose client caches directory
entries (see docs/SHARED_FILESYSTEMS.md) may open the previous version after a commit on
another host; the version it opens is still complete and consistent.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time

from .. import settings
from ..errors import CorruptCacheError, NoCommittedCacheError, TransactionError
from ..storage import fsops, serialize, skeleton
from ..storage.pinned_file import open_pinned
from . import manifest as mf
from .file_checks import check_loadable, corrupt, sha256_fd
from . import take_index

log = logging.getLogger("seedreuse")


def _close(fd: int) -> None:
    """Every descriptor the reader holds is read-only: a close error loses nothing (see
    fsops.close_read_only) and must neither stop the other closes nor fail a finished read."""
    e = fsops.close_read_only(fd)
    if e is not None:
        log.debug("closing a cache file after reading it: %s (ignored: nothing was lost)", e)


class _Retry(Exception):
    """The version being read changed underneath us (a concurrent commit): read again."""


def read_manifest_at(dfd: int, name: str) -> dict:
    """The parsed, validated manifest of the version directory ``dfd``.

    FileNotFoundError when it is missing; CorruptCacheError for anything else wrong. Never
    blocks (O_NONBLOCK: a FIFO in its place is refused) and never follows a symlink.
    """
    st = os.stat(mf.MANIFEST, dir_fd=dfd, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise corrupt(name, "manifest.json is not a regular file",
                      expected="a regular file", actual=stat.filemode(st.st_mode))
    if st.st_size > mf.MAX_MANIFEST_BYTES:
        raise corrupt(name, "manifest.json is too large",
                      expected=f"<= {mf.MAX_MANIFEST_BYTES} bytes", actual=st.st_size)
    try:
        fd = os.open(mf.MANIFEST, fsops.O_READ | os.O_NONBLOCK, dir_fd=dfd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise corrupt(name, "manifest.json is not a regular file",
                          expected="a regular file", actual="symlink") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):      # replaced between the stat and the open
            raise corrupt(name, "manifest.json is not a regular file", expected="a regular file",
                          actual="another kind of file")
        data = os.read(fd, mf.MAX_MANIFEST_BYTES + 1)
    finally:
        _close(fd)
    try:
        return mf.parse(data, name=name)
    except CorruptCacheError as e:
        raise corrupt(name, e.message, expected=e.expected, actual=e.actual) from None


class VersionReader:
    """Opens the committed version of one cache as a pinned :class:`Snapshot`."""

    def __init__(self, cache):
        self.cache = cache
        self.name, self.paths = cache.name, cache.paths
        self.max_total_bytes = cache.max_total_bytes

    def open(self, retries: int = 20, delay: float = 0.05) -> Snapshot | None:
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
                if last is not None:   # a version was there, then none: removed under this read
                    self.cache.gone = f"its version was removed while being opened ({last})"
                return None
        if last is None:
            return None
        raise corrupt(self.name, f"kept changing while being read ({last})",
                       expected="a stable committed version", actual=f"{retries} retries")

    def open_dir(self, path, source: str):
        """One attempt at the version directory ``path`` (not the cache's current one, e.g. a
        single-flight entry): a Snapshot, None when absent, CorruptCacheError when anything is
        missing or wrong (nothing is retried: such a directory never changes once in place)."""
        try:
            dfd = os.open(path, fsops.O_DIR)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno in (errno.ENOTDIR, errno.ELOOP):
                raise corrupt(self.name, f"{path} is not a directory", expected="a directory",
                              actual="another kind of file") from None
            raise
        try:
            return self._snapshot_at(dfd, source, path)
        except _Retry as e:
            raise corrupt(self.name, f"{path}: {e}", expected="a complete version directory",
                          actual="missing") from None

    def _open_version(self):
        for source, path in (("current", self.paths.current), ("old", self.paths.old)):
            try:
                return source, path, os.open(path, fsops.O_DIR)
            except FileNotFoundError:
                continue
            except OSError as e:
                if os.path.islink(path):
                    raise corrupt(self.name, f"{path} is a symlink", expected="a real directory",
                                   actual=f"symlink to {os.readlink(path)!r}") from None
                if e.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise corrupt(self.name, f"{path} is not a directory", expected="a directory",
                                   actual="another kind of file") from None
                raise
        return None, None, None

    def _snapshot_once(self) -> Snapshot | None:
        source, path, dfd = self._open_version()
        if dfd is None:
            return None
        return self._snapshot_at(dfd, source, path)

    def _snapshot_at(self, dfd: int, source: str, path) -> Snapshot:
        """The Snapshot of the version directory open at ``dfd`` (which it then owns)."""
        fds: dict[str, int] = {}
        try:
            m = self._read_manifest(dfd, source, path)
            total = sum(e["bytes"] for e in m["files"].values())
            if total > self.max_total_bytes:
                raise corrupt(self.name, "is larger than the cache budget",
                               expected=f"<= {self.max_total_bytes} bytes", actual=f"{total} bytes")
            damaged: dict[str, str] = {}
            for fname, entry in m["files"].items():
                try:
                    fds[fname] = self._open_member(dfd, fname, entry, source, path)
                except CorruptCacheError as e:
                    if not take_index.is_kept_take_file(fname):
                        raise
                    # damage in an older kept take disables that take only (segment_takes):
                    # the slots, the latest take and the other takes stay usable
                    damaged[fname] = e.message
            snap = Snapshot(self.cache, dfd, m, fds, source, damaged)
            dfd, fds = None, {}
            return snap
        finally:
            for fd in fds.values():
                _close(fd)
            if dfd is not None:
                _close(dfd)

    def _vanished(self, dfd: int, source: str, path, what: str) -> Exception:
        """A missing entry: a race (the version was moved away: retry) or real corruption."""
        if source not in ("current", "old"):
            return _Retry(what)          # open_dir: reported as corrupt, never retried
        if source == "old":
            return _Retry(what)
        try:
            st, here = os.fstat(dfd), os.lstat(path)
            if st.st_nlink == 0:
                # the directory we opened was deleted (a commit on another host replaced it and
                # removed the old version): we reached it through a stale name; read again
                return _Retry(what)
            if (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino):
                return corrupt(self.name, what, expected="every file the manifest lists",
                                actual="missing")
        except FileNotFoundError:
            pass
        return _Retry(what)

    def _read_manifest(self, dfd: int, source: str, path) -> dict:
        try:
            return read_manifest_at(dfd, self.name)
        except FileNotFoundError:     # moved away by a commit, or missing: _vanished decides
            raise self._vanished(dfd, source, path, "manifest.json is missing") from None

    def _open_member(self, dfd: int, fname: str, entry: dict, source: str, path) -> int:
        # Opened first, then checked on the fd: O_NOFOLLOW refuses a symlink, O_NONBLOCK keeps a
        # FIFO from blocking, and fstat of the open file is what every later read sees. (A stat
        # by name before the open was one more server round trip per file on a network
        # filesystem, and checked a name that could change before the open.)
        try:
            fd = os.open(fname, fsops.O_READ | os.O_NONBLOCK, dir_fd=dfd)
        except FileNotFoundError:
            raise self._vanished(dfd, source, path, f"{fname} is missing") from None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENODEV, errno.EOPNOTSUPP):
                kind = "a symlink" if e.errno == errno.ELOOP else errno.errorcode.get(e.errno, str(e.errno))
                raise corrupt(self.name, f"{fname} is not a regular file", expected="a regular file",
                               actual=kind) from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _close(fd)
            raise corrupt(self.name, f"{fname} is not a regular file",
                           expected="a regular file", actual=stat.filemode(st.st_mode))
        if st.st_size != entry["bytes"]:
            _close(fd)
            raise corrupt(self.name, f"{fname} has the wrong size",
                           expected=f"{entry['bytes']} bytes", actual=f"{st.st_size} bytes")
        return fd


def open_version_dir(cache, path, *, source: str = "dir"):
    """A version directory outside the cache's current name (a single-flight entry) as a
    Snapshot (None when absent); CorruptCacheError when it is incomplete or wrong."""
    return VersionReader(cache).open_dir(path, source)


class Snapshot:
    """One committed version, pinned: every file stays open until close()."""

    def __init__(self, cache, dfd: int, manifest: dict, fds: dict, source: str, damaged=None):
        self.cache, self.manifest, self.source = cache, manifest, source
        self._dfd, self._fds = dfd, fds
        self.damaged: dict[str, str] = dict(damaged or {})   # older-take file -> why it is unusable

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

    def dir_fd(self) -> int:
        """The pinned version directory (a carry links from it, staged.py)."""
        if self._dfd is None:
            raise TransactionError("snapshot is closed", expected="an open snapshot",
                                   actual="closed", fix="take a new snapshot")
        return self._dfd

    def pinned_fd(self, fname: str) -> int:
        """The open descriptor of one file of this version (valid until close())."""
        return self._fd(fname)

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
        """An independent read-only binary file object on one file of this version: reads go
        through the pinned fd with pread at the object's own offset (no second open, which on
        a network filesystem is a server round trip and could resolve the name to a newer
        file). Valid until this snapshot is closed."""
        fd = self._fd(fname)
        return open_pinned(fd, lambda: self._fds.get(fname) == fd)

    def file_hash_ok(self, fname: str) -> bool:
        return sha256_fd(self._fd(fname)) == self.manifest["files"][fname]["sha256"]

    def _load(self, fname: str, verify: bool | None):
        # Structural validation (sizes, dtypes, shapes, offsets) always runs while loading;
        # the sha256 pass is a second read of the file, so by default it is left to check()
        # (SEEDREUSE_VERIFY_ON_LOAD=1 turns it on for every load).
        if verify is None:
            verify = settings.verify_on_load()
        if verify and not self.file_hash_ok(fname):
            raise corrupt(self.name, f"{fname} does not match its recorded sha256",
                           expected=self.manifest["files"][fname]["sha256"], actual="other content")
        return self._read(fname, serialize.load_value)

    def _read(self, fname: str, read):
        """``read(file, max_bytes=...)`` on one file of this version, bounded before any byte is
        read (check_loadable); its CorruptCacheError names this cache and file."""
        check_loadable(self.name, fname, os.fstat(self._fd(fname)))
        with self.open_file(fname) as f:
            try:
                return read(f, max_bytes=self.manifest["files"][fname]["bytes"])
            except CorruptCacheError as e:
                raise corrupt(self.name, f"{fname}: {e.message}", expected=e.expected,
                               actual=e.actual) from None

    def _load_listed(self, table: str, key: str, what: str, fix: str, verify: bool | None):
        """The value file the manifest's ``table`` ("slots" or "boundaries") lists under ``key``;
        NoCommittedCacheError (``what`` is missing, with what the version has) when none."""
        e = self.manifest[table].get(key)
        if e is None:
            have = self.boundary_indices() if table == "boundaries" else sorted(self.manifest[table])
            raise NoCommittedCacheError(f"cache '{self.name}' has no {what}", expected=what,
                                        actual=f"{table} {have}", fix=fix)
        return self._load(e["file"], verify)

    def load_slot(self, slot: str, *, verify: bool | None = None):
        return self._load_listed("slots", slot, f"slot '{slot}'", "run once with this slot so the cache holds it",
                                 verify)

    def load_boundary(self, i: int, *, verify: bool | None = None):
        return self._load_listed("boundaries", str(int(i)), f"boundary {i}",
                                 "reuse fewer prefix segments, or rerun without reuse", verify)

    def load_file_value(self, fname: str, *, verify: bool | None = None):
        """A value file of this version that is neither a slot nor a boundary (e.g. a kept
        take's boundary); the same bounds and validation as load_boundary."""
        return self._load(fname, verify)

    def verify_hashes(self) -> list[str]:
        """Problems (one line each) for files whose content does not match the manifest."""
        return [f"{fname}: sha256 mismatch" for fname in sorted(self._fds)
                if not self.file_hash_ok(fname)]

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            _close(fd)
        if self._dfd is not None:
            _close(self._dfd)
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

    def validate_file(self, fname: str):
        """Cheap structural check of one value file (slot or boundary): the header and the value
        structure are validated as a load would, without reading tensor data. Returns the value
        with shape-only (meta) tensors; CorruptCacheError (same messages as a load) otherwise."""
        return self._read(fname, skeleton.load_skeleton)
