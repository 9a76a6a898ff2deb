"""Reading one committed version of a folder: never a mix of two, never a file outside the version.

A reader opens the version directory once (``current``, or ``.old`` inside a commit window)
and reads every file relative to that directory fd; it also keeps every file of the version
open, so a snapshot stays readable (and unchanged) even when a later commit renames and
removes its directory. A file that vanishes while the version is being opened means either
a concurrent commit (retry, bounded) or corruption (the directory is still the current one).

Loads are bounded before any byte is read (store/snapshot.py): by the manifest's sizes, by the
load bound of a version, by the memory this machine has available, and by the file's allocated
size (a sparse file claiming gigabytes of zeros is refused: ``SEEDREUSE_ALLOW_SPARSE=1`` lifts
that check for filesystems that compress transparently). A carry (``carry``) links a file from the
pinned directory, or copies it from its pinned descriptor when the version was removed meanwhile.

What this does not guarantee: a reader on a network filesystem whose client caches directory
entries (see docs/SHARED_FILESYSTEMS.md) may open the previous version after a commit on
another host; the version it opens is still complete and consistent.
"""
from __future__ import annotations

import errno
import logging
import os
import stat
import time

from ..errors import CorruptCacheError
from ..storage import fsops
from ..store import manifest as mf, take_index
from ..store.file_checks import check_version_size, corrupt
from ..store.snapshot import Snapshot, close_quietly as _close
from . import usage

log = logging.getLogger("seedreuse")
# what a link from a version that was removed meanwhile fails with: ENOENT, or ESTALE on a
# network filesystem whose other client removed it (seen on GlusterFS)
_GONE = {errno.ENOENT, errno.ESTALE}


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
    """Opens the committed version of one cache as a pinned :class:`FolderSnapshot`."""

    def __init__(self, cache):
        self.cache = cache
        self.name, self.paths = cache.name, cache.paths

    def open(self, retries: int = 20, delay: float = 0.05) -> FolderSnapshot | None:
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

    def _snapshot_once(self) -> FolderSnapshot | None:
        source, path, dfd = self._open_version()
        if dfd is None:
            return None
        return self._snapshot_at(dfd, source, path)

    def _snapshot_at(self, dfd: int, source: str, path) -> FolderSnapshot:
        """The Snapshot of the version directory open at ``dfd`` (which it then owns)."""
        fds: dict[str, int] = {}
        try:
            m = self._read_manifest(dfd, source, path)
            check_version_size(self.name, m)
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
            snap = FolderSnapshot(self.cache, dfd, m, fds, source, damaged)
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


class FolderSnapshot(Snapshot):
    """A folder version: its directory and every file pinned by descriptor. A reader's snapshot
    holds a reader lease (readers.py) until closed, and its first load records a use of the cache
    (the version directory's mtime, usage.py)."""

    def __init__(self, cache, dfd: int, manifest: dict, fds: dict, source: str, damaged=None):
        super().__init__(cache, manifest, fds, source, damaged)
        self._dfd = dfd
        self.lease = None            # its reader lease (readers.open_leased), None for a writer's base

    def _fd(self, fname: str) -> int:
        if self._dfd is None:
            raise self._closed()
        return super()._fd(fname)

    def dir_fd(self) -> int:
        """The pinned version directory (a carry links from it)."""
        if self._dfd is None:
            raise self._closed()
        return self._dfd

    def _loaded(self) -> None:
        if self.lease is not None and self._dfd is not None:     # a load that served a hit is a use
            usage.touch_version(self._dfd, self.name)

    def _release(self) -> None:
        if self._dfd is not None:
            _close(self._dfd)
            self._dfd = None
        lease, self.lease = self.lease, None
        if lease is not None:
            lease.release()


def carry(staged, fname: str, source: FolderSnapshot, src: str) -> dict:
    """Make file ``src`` of the committed version ``source`` the file ``fname`` of ``staged``: a hard
    link from its pinned directory, or a copy from its pinned descriptor when that version was
    removed meanwhile (another run's commit, an eviction). The entry (size, sha256) is the
    source's; the size is checked."""
    entry = dict(source.manifest["files"][src])
    fd = source.pinned_fd(src)
    staged.drop(fname)
    try:
        size = staged.dir.link_from(fname, source.dir_fd(), src)
    except OSError as e:
        if e.errno not in _GONE or not staged.dir.in_place():
            raise
        size = staged.dir.copy_from_fd(fname, fd)
    if size != entry["bytes"]:
        raise corrupt(staged.cache_name, f"carried {fname} has the wrong size", expected=entry["bytes"], actual=size)
    return staged.add_carried(fname, entry)
