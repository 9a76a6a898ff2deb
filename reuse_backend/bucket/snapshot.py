"""One committed version of a cache on a bucket, as a Snapshot (store/snapshot.py).

The manifest is the commit record's (the folder store's format), so every caller reads it as it
reads a folder version. Files are fetched into the local tier when first loaded (only what the
prompt loads), then read through a pinned descriptor like a folder version's files: the same
load bounds, structure checks and typed errors.

Invariant 6 here (never deleted under a reader): a snapshot that may download holds a reader
lease (``readers/<id>.json``, ``since`` = its version) taken *before* it read the log, and a
collection keeps the version of every live lease (collect.py). A snapshot of a version this host
holds entirely needs no lease: it reads nothing from the bucket, because every file the tier holds
is opened (pinned) when the snapshot is made, so the tier's trim can no longer take one away from
it (an unlinked blob stays readable through its descriptor). A file that was trimmed in between is
fetched under a reader lease taken then, and checked against its hash as every fetch is.
"""
from __future__ import annotations

import logging
import os

from ..errors import CorruptCacheError
from ..storage import fsops
from ..store.file_checks import check_version_size
from ..store.snapshot import Snapshot
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
    """interface.Snapshot of a bucket version: its files fetched into the local tier when first
    read, then read through pinned descriptors (store/snapshot.py) like a folder version's."""

    def __init__(self, cache, seq: int, record: dict, reader_lease=None):
        check_version_size(cache.name, record["manifest"])
        super().__init__(cache, record["manifest"], _pin_held(cache.tier, record["manifest"]), "bucket")
        self.seq, self.record, self.objects = seq, record, dict(record["objects"])
        self._lease = reader_lease
        self._fetched: list[str] = []

    def _fd(self, fname: str) -> int:
        if not self._open:
            raise self._closed()
        fd = self._fds.get(fname)
        if fd is not None:
            return fd
        if fname not in self.manifest["files"]:
            raise self._missing(fname)
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

    def _corrupt_file(self, fname: str, e: CorruptCacheError) -> CorruptCacheError:
        """Name the object, and the command for this bucket."""
        e = super()._corrupt_file(fname, e)
        cache = self.cache
        key = cache.keys.data(self.objects[fname])
        return CorruptCacheError(
            f"{e.message} (object s3://{cache.loc.bucket}/{key} of commit record {self.seq})",
            expected=e.expected, actual=e.actual,
            fix=f"nothing from it was used; clear the cache (python -m reuse_backend --root {cache.root} "
                f"clear {self.name} --yes) and rerun", details={**e.details, "key": key})

    def _loaded(self) -> None:
        self.cache.record_use()            # a use only once a value loaded: a refused object records nothing

    def open_file(self, fname: str):
        f = super().open_file(fname)
        self.cache.record_use()            # a caller reading a file (not a load): at most once a minute per host
        return f

    def fetched(self) -> list[str]:
        """The files this snapshot opened that the local tier did not hold when it was made."""
        return sorted(self._fetched)

    def _release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            try:
                lease.release()
            except Exception as e:  # noqa: BLE001 - it turns stale and is collected
                log.warning("seedreuse: could not release the reader lease %s: %s", lease.path, e)
