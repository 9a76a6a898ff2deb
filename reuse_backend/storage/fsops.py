"""Every filesystem mutation of the cache lifecycle, behind one hook point.

Each function calls ``_HOOK(op_name, path)`` before it acts.  Production code never sets
the hook; tests set it (``set_hook``) to SIGKILL the process or raise ``OSError`` at the
k-th operation, which is how the crash and fault suites enumerate every crash point.
Reads are not hooked: only mutations (and the fsyncs that make them durable) are; nor is
``close_read_only``, the readers' close.
"""
from __future__ import annotations

import errno
import os
import shutil
import uuid


def _noop(op: str, path: str) -> None:
    return None


_HOOK = _noop

# errnos for which a hard link is impossible and a copy is the fallback
_LINK_FALLBACK = {errno.EXDEV, errno.EPERM, errno.EMLINK,
                  getattr(errno, "ENOTSUP", errno.EOPNOTSUPP), errno.EOPNOTSUPP}

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# The open flags of every read of the cache (one definition for the reader, check and locks):
# never follow a symlink, never leak into a child process.
O_READ = os.O_RDONLY | _O_CLOEXEC | _O_NOFOLLOW
O_DIR = O_READ | _O_DIRECTORY


def set_hook(fn) -> None:
    """Install ``fn(op_name, path)``, called before every operation (tests only)."""
    global _HOOK
    _HOOK = fn


def clear_hook() -> None:
    global _HOOK
    _HOOK = _noop


def _hook(op: str, path) -> None:
    _HOOK(op, os.fspath(path))


def close_read_only(fd: int) -> OSError | None:
    """Close a descriptor that was only read from; an error comes back, it is not raised.

    Linux releases the descriptor even when close() reports an error (close(2): never retry
    it), and a read-only descriptor has nothing left to lose, so the error says nothing about
    the bytes already read: FUSE filesystems report the flush's result here, and GlusterFS can
    answer ESTALE for a file another host replaced after this one opened it (seen by the
    two-host probe on gluster's default options). EBADF is raised: it means a descriptor was
    closed twice, a bug that could close someone else's file."""
    try:
        os.close(fd)
    except OSError as e:
        if e.errno == errno.EBADF:
            raise
        return e
    return None


def open_exclusive(path, mode: int = 0o644) -> int:
    """Create ``path`` (must not exist, never follows a symlink); returns a writable fd."""
    _hook("open_exclusive", path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC | _O_NOFOLLOW, mode)


def write_all(fd: int, data: bytes, path="") -> None:
    """Write all of ``data`` to ``fd`` (hooked as ``write``)."""
    _hook("write", path)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class HookedWriter:
    """A write-only view of a binary file whose every ``write`` is a hooked operation.

    Used around serializers that write into a file object, so the crash and fault suites
    reach the writes too.  ``hasher`` (optional) sees every byte written, in order;
    ``sequential`` turns False if anything seeks, in which case the hash is not usable.
    """

    def __init__(self, f, path, hasher=None):
        self._f, self._path, self.hasher = f, os.fspath(path), hasher
        self.count = 0
        self.sequential = True

    def write(self, data) -> int:
        _hook("write", self._path)
        n = self._f.write(data)
        n = len(memoryview(data)) if n is None else n
        if self.hasher is not None:
            self.hasher.update(memoryview(data)[:n])
        self.count += n
        return n

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        self._f.flush()

    def __getattr__(self, name):
        if name in ("seek", "truncate"):
            self.sequential = False
        return getattr(self._f, name)


def fsync_file(fd_or_path, path="") -> None:
    """fsync an open fd, a file object, or a path (opened read-only for the fsync)."""
    if isinstance(fd_or_path, int):
        _hook("fsync_file", path)
        os.fsync(fd_or_path)
        return
    if hasattr(fd_or_path, "fileno"):
        _hook("fsync_file", path or getattr(fd_or_path, "name", ""))
        fd_or_path.flush()
        os.fsync(fd_or_path.fileno())
        return
    _hook("fsync_file", fd_or_path)
    fd = os.open(fd_or_path, os.O_RDONLY | _O_CLOEXEC | _O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path) -> None:
    """fsync a directory so the entries created/renamed/removed in it are durable."""
    _hook("fsync_dir", path)
    fd = os.open(path, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as e:  # some filesystems refuse fsync on directories
        if e.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def write_file_atomic(path, data: bytes, mode: int = 0o644) -> None:
    """Unique temp name in the same dir + write + fsync + rename + fsync dir.

    The temp file is removed (``finally``) when any step fails, so a failure leaves either
    the old file or the new one at ``path``, never a partial one.
    """
    path = os.fspath(path)
    d = os.path.dirname(path) or "."
    tmp = os.path.join(d, f".{os.path.basename(path)}.part-{uuid.uuid4().hex}")
    done = False
    fd = open_exclusive(tmp, mode)
    try:
        try:
            write_all(fd, data, tmp)
            fsync_file(fd, tmp)
        finally:
            os.close(fd)
        rename(tmp, path)
        done = True
        fsync_dir(d)
    finally:
        if not done:
            try:
                os.unlink(tmp)  # cleanup of our own temp: best effort, not a lifecycle step
            except OSError:
                pass


def rename(src, dst) -> None:
    _hook("rename", src)
    os.rename(src, dst)


def link(src, dst, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
    """Hard link only (no copy fallback): used where the inode identity matters (locks)."""
    _hook("link", dst)
    os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)


def link_or_copy(src, dst, *, src_dir_fd: int | None = None) -> str:
    """Hard-link ``src`` to ``dst``; copy (then fsync) when links are impossible here.

    ``src`` may be relative to ``src_dir_fd``.  Returns ``"link"`` or ``"copy"``.
    """
    _hook("link_or_copy", dst)
    try:
        os.link(src, dst, src_dir_fd=src_dir_fd, follow_symlinks=False)
        return "link"
    except OSError as e:
        if e.errno not in _LINK_FALLBACK:
            raise
    sfd = os.open(src, os.O_RDONLY | _O_CLOEXEC | _O_NOFOLLOW, dir_fd=src_dir_fd)
    try:
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC | _O_NOFOLLOW, 0o644)
        ok = False
        try:
            with os.fdopen(sfd, "rb", closefd=False) as fs, os.fdopen(dfd, "wb", closefd=False) as fd_:
                shutil.copyfileobj(fs, fd_, 1 << 20)
            os.fsync(dfd)
            ok = True
        finally:
            os.close(dfd)
            if not ok:
                try:
                    os.unlink(dst)
                except OSError:
                    pass
    finally:
        os.close(sfd)
    return "copy"


def unlink(path, *, missing_ok: bool = False) -> None:
    _hook("unlink", path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def rmtree(path, *, missing_ok: bool = True) -> None:
    """Remove a directory tree (never follows a symlink: a symlink itself is unlinked)."""
    _hook("rmtree", path)
    try:
        if os.path.islink(path):
            os.unlink(path)
        else:
            shutil.rmtree(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def rmdir(path) -> None:
    """Remove an empty directory (OSError ENOTEMPTY when it is not)."""
    _hook("rmdir", path)
    os.rmdir(path)


def rmdir_if_empty(path) -> bool:
    """Remove a directory once nothing is in it (a store's own folder: ``.tmp``, ``.readers``,
    ``.evicting``); True when it was removed, False when it is absent, not empty or busy (another
    process creating something in it meanwhile retries)."""
    try:
        rmdir(path)
        return True
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST, errno.EBUSY, errno.ENOTDIR):
            raise
        return False


def mkdir(path, mode: int = 0o755, *, parents: bool = False, exist_ok: bool = False) -> None:
    _hook("mkdir", path)
    if parents:
        os.makedirs(path, mode, exist_ok=exist_ok)
        return
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not (exist_ok and os.path.isdir(path)):
            raise


def chmod(path, mode: int) -> None:
    """Set a file's permission bits (a reader lease's idle bit)."""
    _hook("chmod", path)
    os.chmod(path, mode)


def utime(path, *, fd: int | None = None) -> None:
    """Set atime/mtime to now (of ``fd`` when given, so a heartbeat touches its own inode; else of
    ``path``, never following a symlink)."""
    _hook("utime", path)
    os.utime(fd if fd is not None else path, follow_symlinks=fd is not None)
