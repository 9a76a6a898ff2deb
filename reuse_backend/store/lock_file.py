"""The writer lock file as anyone reads it (lock.py writes it): the never-blocking read, the
owner's description in messages, the temp-file tags of acquirers, breakers and releasers, and the
stray files they leave when they crash."""
from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

from ..storage import fsops

NEW_TAG = ".new-"        # <lock>.new-<hex>: temp file of an acquirer
BROKEN_TAG = ".broken."  # <lock>.broken.<hex>: a lock taken away by a breaker
RELEASE_TAG = ".release."  # <lock>.release.<hex>: a lock taken away by its releaser

MAX_LOCK_BYTES = 64 << 10   # a lock file is a few hundred bytes of JSON


def read_lock(path) -> tuple[dict | None, os.stat_result | None]:
    """(owner dict or None when unreadable/invalid, lstat or None when absent).

    Never blocks and never reads much: only a regular file is opened (a FIFO, socket or
    device in the lock's place is "unreadable", never read), with O_NONBLOCK and O_NOFOLLOW,
    and at most MAX_LOCK_BYTES are read. An unreadable lock is judged by its mtime lease.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        return None, st
    try:
        fd = os.open(path, fsops.O_READ | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None
    except OSError:
        return None, st
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_LOCK_BYTES:
            return None, st
        data = os.read(fd, MAX_LOCK_BYTES)
    except OSError:
        return None, st
    finally:
        fsops.close_read_only(fd)     # read-only: an error (ESTALE on FUSE) loses nothing
    try:
        owner = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, st
    if not isinstance(owner, dict) or not isinstance(owner.get("run_id"), str):
        return None, st
    return owner, st


def describe(owner: dict | None, path=None) -> str:
    """Who holds a lock, for messages; with ``path``, an unreadable one names its file and why."""
    if not owner:
        if path is None:
            return "an unknown run (unreadable lock file)"
        return f"an unknown run (unreadable lock file {path}: {why_unreadable(path)})"
    started = owner.get("started_at")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) \
        if isinstance(started, (int, float)) else "?"
    return (f"run {owner.get('run_id')} on host {owner.get('host')} "
            f"(pid {owner.get('pid')}) since {when}")


def why_unreadable(path) -> str:
    """Why read_lock found no owner in ``path`` (never blocks: only a regular file is opened)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "it is gone"
    except OSError as e:
        return f"it cannot be looked at ({e.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_size > MAX_LOCK_BYTES:
        return f"it is {st.st_size} bytes, not a lock of a few hundred"
    try:
        fd = os.open(path, fsops.O_READ | os.O_NONBLOCK)
    except PermissionError:
        return f"no permission to read it (owner uid {st.st_uid})"
    except OSError as e:
        return f"it cannot be opened ({e.strerror})"
    fsops.close_read_only(fd)
    return "empty" if st.st_size == 0 else "its content is not a SeedReuse lock (JSON with a run id)"


def stray_lock_files(root, name: str) -> list[Path]:
    """Leftover ``<name>.lock.new-*`` / ``.broken.*`` / ``.release.*`` files (crashed acquirers,
    breakers, releasers)."""
    prefix = f"{name}.lock"
    out = []
    try:
        entries = os.listdir(root)
    except FileNotFoundError:
        return out
    for e in entries:
        if e.startswith((prefix + NEW_TAG, prefix + BROKEN_TAG, prefix + RELEASE_TAG)):
            out.append(Path(root) / e)
    return sorted(out)
