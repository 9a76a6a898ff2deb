"""One committed version of a cache on a bucket, as a Snapshot (store/reader.py's interface).

The manifest is the commit record's (the folder store's format), so every caller reads it as it
reads a folder version. Files are fetched into the local tier when first loaded (only what the
prompt loads), then read through a pinned descriptor like a folder version's files: the same
load bounds, structure checks and typed errors.

Invariant (never deleted under a reader): a snapshot that may download holds a reader lease
(``readers/<id>.json``, ``since`` = its version) taken *before* it read the log, and a collection
keeps the version of every live lease (collect.py). A snapshot of a version this host holds
entirely needs no lease: it reads nothing from the bucket, because every file the tier holds is
opened (pinned) when the snapshot is made, so the tier's trim can no longer take one away from it
(an unlinked blob stays readable through its descriptor). A file that was trimmed in between is
fetched under a reader lease taken then, and checked against its hash as every fetch is.
"""
from __future__ import annotations

import logging
import os

from ..errors import CorruptCacheError, NoCommittedCacheError, TransactionError
from ..storage import fsops
from ..store.reader import Snapshot
from .client import NotFound

log = logging.getLogger("seedreuse")


def _pin_held(tier, manifest: dict) -> dict[str, int]:
    """Descriptors of the files of this version the local tier holds now (module docstring)."""
    fds = {}
    for fname, entry in manifest["files"].items():
        try:
            fd = os.open(tier.blob(entry["sha256"]), fsops.O_READ)
        except OSError:
            continue
        if os.fstat(fd).st_size == entry["bytes"]:
            fds[fname] = fd
        else:
            fsops.close_read_only(fd)
    return fds


class BucketSnapshot(Snapshot):
    def __init__(self, cache, seq: int, record: dict, reader_lease=None):
        super().__init__(cache, None, record["manifest"], _pin_held(cache.tier, record["manifest"]), "bucket")
        self.seq, self.record, self.objects = seq, record, dict(record["objects"])
        self._lease = reader_lease
        self._open = True
        self._reading = False
        self._fetched: list[str] = []

    def dir_fd(self) -> int:
        raise TransactionError("a bucket version has no directory", expected="a folder version",
                               actual="a bucket version", fix="carry by reference (bucket/staged.py)")

    def _fd(self, fname: str) -> int:
        if not self._open:
            raise TransactionError("snapshot is closed", expected="an open snapshot",
                                   actual="closed", fix="take a new snapshot")
        fd = self._fds.get(fname)
        if fd is not None:
            return fd
        if fname not in self.manifest["files"]:
            raise NoCommittedCacheError(f"cache '{self.name}' has no file '{fname}'",
                                        expected=fname, actual=sorted(self.manifest["files"]),
                                        fix="run once without reuse so the cache holds it")
        entry = self.manifest["files"][fname]
        cache = self.cache
        if not cache.tier.has(entry["sha256"], entry["bytes"]) and self._lease is None:
            self._lease = cache.reader_lease(self.seq)
        try:
            path = cache.tier.fetch(cache.client, cache.keys, fname, self.objects[fname], entry)
        except NotFound:
            raise CorruptCacheError(
                f"cache '{self.name}': {fname} is missing from the bucket (object "
                f"{cache.keys.data(self.objects[fname])} of version {self.seq})",
                expected="every object the commit record names", actual="404 Not Found",
                fix=f"the version was removed while being read, or the bucket was changed by hand; "
                    f"rerun (reuse 'auto' rebuilds it), or clear the cache (python -m reuse_backend --root "
                    f"{cache.root} clear {self.name} --yes)", details={"cache": self.name, "file": fname}) from None
        fd = os.open(path, fsops.O_READ)
        self._fds[fname] = fd
        self._fetched.append(fname)
        return fd

    def _read(self, fname: str, read):
        """A value file read as on a folder; a use is recorded (the budget's last use) only
        once it loaded: a refused object records nothing."""
        self._reading = True
        try:
            value = super()._read(fname, read)
        except CorruptCacheError as e:       # name the object, and the command for this bucket
            cache = self.cache
            key = cache.keys.data(self.objects[fname])
            raise CorruptCacheError(
                f"{e.message} (object s3://{cache.loc.bucket}/{key} of commit record {self.seq})",
                expected=e.expected, actual=e.actual,
                fix=f"nothing from it was used; clear the cache (python -m reuse_backend --root {cache.root} "
                    f"clear {self.name} --yes) and rerun", details={**e.details, "key": key}) from None
        finally:
            self._reading = False
        self.cache.record_use()
        return value

    def open_file(self, fname: str):
        f = super().open_file(fname)
        if not self._reading:
            self.cache.record_use()
        return f

    def file_hash_ok(self, fname: str) -> bool:
        # a fetched blob was hashed as it was downloaded; a local one is hashed again here
        return super().file_hash_ok(fname)

    def fetched(self) -> list[str]:
        """The files this snapshot opened that the local tier did not hold when it was made."""
        return sorted(self._fetched)

    def close(self) -> None:
        self._open = False
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            e = fsops.close_read_only(fd)
            if e is not None:
                log.debug("closing a fetched cache file: %s", e)
        lease, self._lease = self._lease, None
        if lease is not None:
            try:
                lease.release()
            except Exception as e:  # noqa: BLE001 - it turns stale and is collected
                log.warning("seedreuse: could not release the reader lease %s: %s", lease.key, e)

    def __del__(self):  # pragma: no cover - a forgotten snapshot must not leak fds or leases
        try:
            self.close()
        except Exception as e:  # noqa: BLE001
            log.debug("closing a forgotten bucket snapshot: %s", e)
