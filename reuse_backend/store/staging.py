"""The staging directory of one run: ``<root>/<name>.tmp/<staging id>/``.

Mechanics only (create, write a value, link a carried file, record a written file); what is
staged and when it is published is transaction.py's business. Every write creates a unique
temporary name, fsyncs it and renames it into place, and a name is unlinked before it is
staged again, so a hard link carried from the committed version is never written through.

A staging directory is used by exactly one run and is named by a fresh random id: no other
run ever writes into it (Invariant 4, transaction.py). ``identity`` is its (device, inode),
compared by ``in_place()``: a recovery that moved it away makes every later write fail.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import time
import uuid
from pathlib import Path

from ..errors import TransactionError
from ..storage import fsops, serialize
from . import manifest as mf
from .file_checks import sha256_fd


class StagingDir:
    def __init__(self, parent: Path, *, dir_mode: int = 0o755, file_mode: int = 0o644):
        self.parent = Path(parent)                  # <root>/<name>.tmp
        self.id = uuid.uuid4().hex                  # unique per transaction, never reused
        self.path = self.parent / self.id
        self.dir_mode, self.file_mode = dir_mode, file_mode
        self.identity: tuple[int, int] | None = None

    def create(self, owner: dict) -> None:
        fsops.mkdir(self.parent, self.dir_mode, exist_ok=True)
        if os.path.islink(self.parent) or not os.path.isdir(self.parent):
            raise TransactionError(f"{self.parent} is not a directory", expected="the staging directory",
                                   actual="another kind of file",
                                   fix=f"remove {self.parent} (python -m reuse_backend check NAME --repair)")
        fsops.mkdir(self.path, self.dir_mode)
        st = os.lstat(self.path)
        self.identity = (st.st_dev, st.st_ino)
        body = json.dumps({**owner, "staging_id": self.id, "started_at": time.time()}).encode()
        fsops.write_file_atomic(self.path / mf.STAGING, body, self.file_mode)
        fsops.fsync_dir(self.parent)
        fsops.fsync_dir(self.parent.parent)

    def in_place(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.identity

    def owner(self) -> dict:
        return json.loads((self.path / mf.STAGING).read_bytes())

    def file(self, fname: str) -> Path:
        return self.path / fname

    def drop(self, fname: str) -> None:
        """Unlink a staged name before re-staging it (never write into a carried hard link)."""
        if os.path.lexists(self.file(fname)):
            fsops.unlink(self.file(fname))

    @contextlib.contextmanager
    def _placed(self, fname: str):
        """(fd, temp path) of a new file under a unique temp name; when the block succeeds it is
        fsynced and renamed to ``fname`` (a staged name is unlinked first), else removed."""
        part = self.file(f".{fname}.part-{uuid.uuid4().hex}")
        fd = fsops.open_exclusive(part, self.file_mode)
        ok = False
        try:
            yield fd, part
            fsops.fsync_file(fd, part)
            self.drop(fname)
            fsops.rename(part, self.file(fname))
            ok = True
        finally:
            os.close(fd)
            if not ok:
                try:
                    fsops.unlink(part, missing_ok=True)
                except OSError:
                    pass        # staging is removed as a whole by discard/recovery

    def write_value(self, fname: str, value) -> dict:
        """Serialize ``value`` to ``fname``: unique temp name, fsync, rename. Returns its entry."""
        with self._placed(fname) as (fd, part):
            with os.fdopen(fd, "wb", closefd=False) as f:
                w = fsops.HookedWriter(f, part, hashlib.sha256())
                serialize.dump_value(w, value)
                f.flush()
            size = os.fstat(fd).st_size
            digest = w.hasher.hexdigest() if w.sequential and w.count == size else sha256_fd(fd)
        return {"bytes": size, "sha256": digest}

    def link_from(self, fname: str, src_dir_fd: int, src: str | None = None) -> int:
        """Hard-link (or copy) ``src`` (default ``fname``) of the version open at ``src_dir_fd``
        as ``fname``; returns its size."""
        self.drop(fname)
        fsops.link_or_copy(src or fname, self.file(fname), src_dir_fd=src_dir_fd)
        return os.lstat(self.file(fname)).st_size

    def copy_from_fd(self, fname: str, src_fd: int) -> int:
        """Copy an open file (a pinned version's, whose name is gone) as ``fname``: unique temp
        name, fsync, rename. Returns its size."""
        off = 0
        with self._placed(fname) as (fd, part):
            while True:
                buf = os.pread(src_fd, 1 << 20, off)
                if not buf:
                    break
                fsops.write_all(fd, buf, part)
                off += len(buf)
        return off

    def record(self, fname: str) -> dict:
        """fsync a file a caller wrote at ``file(fname)``; returns its entry (bytes, sha256).
        OSError when it cannot be opened; TransactionError when it is not a regular file."""
        fd = os.open(self.file(fname), fsops.O_READ | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise TransactionError(f"staged '{fname}' is not a regular file",
                                       expected="a regular file", actual="other", fix="write a file")
            fsops.fsync_file(fd, self.file(fname))
            return {"bytes": os.fstat(fd).st_size, "sha256": sha256_fd(fd)}
        finally:
            os.close(fd)

    def remove(self) -> None:
        fsops.rmtree(self.path)
        self.remove_parent()

    def remove_parent(self) -> None:
        """The staging's parent goes when empty (other runs' staging and leases keep it)."""
        fsops.rmdir_if_empty(self.parent)
