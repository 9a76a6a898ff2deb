"""What a version's files must satisfy before a byte of them is used: the typed error for a
damaged cache, content hashes, and the load bounds (a version's size, sparse files, available
memory); what a full disk is.

Shared by both media's readers and checks."""
from __future__ import annotations

import errno
import hashlib
import os

from .. import settings
from ..errors import CorruptCacheError

SPARSE_MIN_BYTES = 16 << 20     # smaller files are never judged sparse (metadata-sized rounding)
# the load bound of one version: a manifest claiming more is refused before anything is opened
MAX_VERSION_BYTES = 64 << 30


def is_full(exc: BaseException) -> bool:
    """ENOSPC / EDQUOT: the disk (or the quota) is full."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def retry_when_full(fn, *, free, full_error, reset=None, during: str | None = None):
    """``fn()``; on ENOSPC/EDQUOT ``free()`` what the medium may (a folder's budget evicts, a bucket's
    local tier trims; it returns what it freed) and retry once, after ``reset()`` (which undoes a
    partial first attempt). With ``during``, a final ENOSPC is ``full_error(exc, during)`` (a typed
    StorageFullError); otherwise the caller's own error path reports it."""
    try:
        return fn()
    except OSError as e:
        if not is_full(e):
            raise
        if not free():
            if during is not None:
                raise full_error(e, during) from e
            raise
        if reset is not None:
            try:
                reset()
            except OSError:
                raise e from None
    try:
        return fn()
    except OSError as e:
        if during is not None and is_full(e):
            raise full_error(e, during) from e
        raise


def check_version_size(name: str, manifest: dict) -> None:
    """Refuse a version whose files add up to more than the load bound."""
    bound, total = MAX_VERSION_BYTES, sum(e["bytes"] for e in manifest["files"].values())
    if total > bound:
        raise corrupt(name, "is larger than the load bound of a version", expected=f"<= {bound} bytes",
                      actual=f"{total} bytes")


def corrupt(name: str, what: str, *, expected=None, actual=None) -> CorruptCacheError:
    return CorruptCacheError(f"cache '{name}': {what}", expected=expected, actual=actual,
                             fix=f"clear it (python -m reuse_backend clear {name} --yes) and rerun; "
                                 "nothing from it was used",
                             details={"cache": name})


def sha256_fd(fd: int, chunk: int = 1 << 20) -> str:
    h, off = hashlib.sha256(), 0
    while True:
        b = os.pread(fd, chunk, off)
        if not b:
            return h.hexdigest()
        h.update(b)
        off += len(b)


def available_memory() -> int | None:
    """MemAvailable of this machine in bytes (None when unknown)."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_loadable(name: str, fname: str, st: os.stat_result) -> None:
    """Refuse a load that would allocate memory the file cannot justify (sparse) or that this
    machine does not have, before a byte of it is read."""
    size = st.st_size
    allocated = getattr(st, "st_blocks", None)
    if allocated is not None and size > SPARSE_MIN_BYTES and allocated * 512 < size // 2 \
            and not settings.allow_sparse():
        raise corrupt(name, f"{fname} is a sparse file: it claims {size} bytes but only "
                            f"{allocated * 512} are allocated on disk",
                      expected="a file written by SeedReuse (fully allocated)",
                      actual=f"{allocated * 512} of {size} bytes allocated")
    avail = available_memory()
    if avail is not None and size > avail:
        raise corrupt(name, f"{fname} needs {size} bytes of memory; {avail} are available",
                      expected=f"<= {avail} bytes (MemAvailable)", actual=f"{size} bytes")
