"""A snapshot: one committed version, read-only, its files read through pinned descriptors.

What both media share once a file of the version is on this host (a folder version's own file,
a bucket version's blob in the local tier): the manifest's views (slots, boundaries, sections,
files), loads bounded before a byte is read (file_checks.check_loadable), structural validation of
every value, the optional sha256 pass (``SEEDREUSE_VERIFY_ON_LOAD``), and typed errors naming the
cache and the file. A medium says how a file becomes a pinned descriptor (``_fd``) and what a load
records (``_loaded``: the cache's last use) and what closing releases (``_release``: a reader
lease). Invariant 2 (docs/ARCHITECTURE.md) rests on this: every read of a snapshot goes through
the descriptor pinned for that version's file, never through a name that a later commit reuses.
"""
from __future__ import annotations

import json
import logging
import os

from .. import settings
from ..errors import CorruptCacheError, NoCommittedCacheError, TransactionError
from ..storage import fsops, serialize, skeleton
from ..storage.pinned_file import open_pinned
from .file_checks import check_loadable, corrupt, sha256_fd

log = logging.getLogger("seedreuse")


def close_quietly(fd: int) -> None:
    """Every descriptor a snapshot holds is read-only: a close error loses nothing (see
    fsops.close_read_only) and must neither stop the other closes nor fail a finished read."""
    e = fsops.close_read_only(fd)
    if e is not None:
        log.debug("closing a cache file after reading it: %s (ignored: nothing was lost)", e)


class Snapshot:
    """One committed version of ``cache``: ``manifest``, ``source`` (where it was read: a folder's
    ``current`` or ``old``, a bucket, a single-flight entry), ``damaged`` (older-take files that are
    unusable: that take alone is disabled). Every file stays pinned until close()."""

    def __init__(self, cache, manifest: dict, fds: dict, source: str, damaged=None):
        self.cache, self.manifest, self.source = cache, manifest, source
        self._fds: dict[str, int] = fds
        self._open = True
        self.damaged: dict[str, str] = dict(damaged or {})
        self._used = False

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

    # ------------------------------------------------------------------ pinned files
    def _closed(self) -> TransactionError:
        return TransactionError("snapshot is closed", expected="an open snapshot", actual="closed",
                                fix="take a new snapshot")

    def _missing(self, fname: str) -> NoCommittedCacheError:
        return NoCommittedCacheError(f"cache '{self.name}' has no file '{fname}'", expected=fname,
                                     actual=sorted(self.manifest["files"]),
                                     fix="run once without reuse so the cache holds it")

    def _fd(self, fname: str) -> int:
        """The pinned descriptor of one file of this version (a medium may fetch it first)."""
        if not self._open:
            raise self._closed()
        if fname not in self._fds:
            raise self._missing(fname)
        return self._fds[fname]

    def pinned_fd(self, fname: str) -> int:
        """The open descriptor of one file of this version (valid until close())."""
        return self._fd(fname)

    def open_file(self, fname: str):
        """An independent read-only binary file object on one file of this version: reads go
        through the pinned fd with pread at the object's own offset (no second open, which on a
        network filesystem is a server round trip and could resolve the name to a newer file).
        Valid until this snapshot is closed."""
        return self._file(fname)

    def _file(self, fname: str):
        fd = self._fd(fname)
        return open_pinned(fd, lambda: self._fds.get(fname) == fd)

    def file_hash_ok(self, fname: str) -> bool:
        return sha256_fd(self._fd(fname)) == self.manifest["files"][fname]["sha256"]

    def verify_hashes(self) -> list[str]:
        """Problems (one line each) for files whose content does not match the manifest."""
        return [f"{fname}: sha256 mismatch" for fname in sorted(self._fds) if not self.file_hash_ok(fname)]

    # ------------------------------------------------------------------ loads
    def _read(self, fname: str, read):
        """``read(file, max_bytes=...)`` on one file of this version, bounded before any byte is read
        (check_loadable); its CorruptCacheError names this cache and file."""
        check_loadable(self.name, fname, os.fstat(self._fd(fname)))
        with self._file(fname) as f:
            try:
                return read(f, max_bytes=self.manifest["files"][fname]["bytes"])
            except CorruptCacheError as e:
                raise self._corrupt_file(fname, e) from None

    def _corrupt_file(self, fname: str, e: CorruptCacheError) -> CorruptCacheError:
        """The error of a value file that did not load (a medium also names its object)."""
        return corrupt(self.name, f"{fname}: {e.message}", expected=e.expected, actual=e.actual)

    def _load(self, fname: str, verify: bool | None):
        # Structural validation (sizes, dtypes, shapes, offsets) always runs while loading; the
        # sha256 pass is a second read of the file, so by default it is left to check()
        if verify is None:
            verify = settings.verify_on_load()
        if verify and not self.file_hash_ok(fname):
            raise corrupt(self.name, f"{fname} does not match its recorded sha256",
                          expected=self.manifest["files"][fname]["sha256"], actual="other content")
        value = self._read(fname, serialize.load_value)
        if not self._used:
            self._used = True
            self._loaded()
        return value

    def _loaded(self) -> None:
        """A load served from this version: the medium records the cache's last use (the budget's
        order), once per snapshot."""

    def _load_listed(self, table: str, key: str, what: str, fix: str, verify: bool | None):
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
        """A value file of this version that is neither a slot nor a boundary (e.g. a kept take's
        boundary); the same bounds and validation as load_boundary."""
        return self._load(fname, verify)

    def validate_file(self, fname: str):
        """Cheap structural check of one value file (slot or boundary): the header and the value
        structure are validated as a load would, without reading tensor data. Returns the value
        with shape-only (meta) tensors; CorruptCacheError (same messages as a load) otherwise."""
        return self._read(fname, skeleton.load_skeleton)

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        self._open = False
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            close_quietly(fd)
        self._release()

    def _release(self) -> None:
        """What closing releases besides the files (a medium's reader lease)."""

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - a forgotten snapshot must not leak fds or leases
        try:
            self.close()
        except Exception as e:  # noqa: BLE001
            log.debug("closing a forgotten snapshot: %s", e)
