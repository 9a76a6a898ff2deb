"""A read-only file object over an fd the caller keeps open, read with ``pread``.

Readers pin every file of a version by keeping its fd open (store/snapshot.py). Reading through
that same fd with ``os.preadv`` at this object's own offset gives each reader an independent
position without opening the file again: on a network filesystem every ``open`` is a round
trip to the server (measured on GlusterFS and CephFS FUSE clients, docs/BENCHMARKS.md 2b),
and a reopen by name could resolve to a newer file after a peer's commit.

Invariant: closing this object never closes the pinned fd; the owner of the fd (the
snapshot) does, and an object used after that raises ValueError, not a read of whatever file
later reuses the fd number (the owner passes ``is_open``, false once it closed its fds).

What this does not guarantee: the bytes are those of the pinned inode at read time; that the
inode's content is unchanged since it was committed is the store's invariant (committed files
are never written again), checked by sha256 in ``check()``, not here.
"""
from __future__ import annotations

import io
import os

BUFFER_BYTES = 1 << 16   # small reads (a header length, a JSON header) come from one pread


class PinnedFile(io.RawIOBase):
    """``readinto``/``seek``/``tell`` over ``fd`` with ``os.preadv``; ``fileno`` is ``fd``."""

    def __init__(self, fd: int, is_open=lambda: True):
        super().__init__()
        self._fd, self._pos, self._is_open = fd, 0, is_open

    def _check(self) -> None:
        if self.closed or not self._is_open():
            raise ValueError("I/O on a closed pinned file")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        self._check()
        return self._fd

    def readinto(self, b) -> int:
        self._check()
        n = os.preadv(self._fd, [b], self._pos)
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = os.fstat(self._fd).st_size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def tell(self) -> int:
        self._check()
        return self._pos


def open_pinned(fd: int, is_open=lambda: True) -> io.BufferedReader:
    """A buffered binary reader on ``fd`` (large ``readinto`` calls go straight to the caller's
    buffer: BufferedReader bypasses its own buffer for requests larger than it)."""
    return io.BufferedReader(PinnedFile(fd, is_open), BUFFER_BYTES)
