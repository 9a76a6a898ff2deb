"""A run on a bucket: staged on local disk, published by uploading and one conditional create.

The run stages into the local tier (``staging/<cache id>/<id>/``) exactly as on the folder store
(store/transaction.py: the same API, fencing and typed errors); what differs:

* a carry is a reference: the new version names the committed data object of the file
  (``BucketStagedVersion.refs``), so nothing is downloaded to be carried, and a file is renamed
  (``result.mp4`` -> ``take-<k>.result.mp4``) at no cost;
* the run's lease is an object (``leases/<run id>.json``, leases.py), taken before the base is read;
* the commit (commit.py) uploads the files this run wrote and creates the next commit record.
"""
from __future__ import annotations

from ..errors import CorruptCacheError
from ..storage import fsops
from ..store.staged import StagedVersion
from ..store.transaction import Transaction
from . import commit as publishing, local_tier


class BucketStagedVersion(StagedVersion):
    """Files are local (written by this run, uploaded at commit) or references to committed data
    objects (``refs``: file name -> data key relative to the cache)."""

    def __init__(self, staging, cache_name: str):
        super().__init__(staging, cache_name)
        self.refs: dict[str, str] = {}
        self.uploaded: dict[str, str] = {}      # file name -> data key of what this run uploaded

    def carry(self, fname: str, source, src: str | None = None) -> dict:
        src = src or fname
        entry = dict(source.manifest["files"][src])
        rel = getattr(source, "objects", {}).get(src)
        if rel is None:
            raise CorruptCacheError(f"cache '{self.cache_name}': {src} has no object to carry",
                                    expected="a file of a bucket version", actual="none",
                                    fix="rerun without reuse")
        self.dir.drop(fname)
        self.files[fname], self.refs[fname] = entry, rel
        return entry

    def write_value(self, fname: str, value) -> dict:
        self.refs.pop(fname, None)
        return super().write_value(fname, value)

    def reserve(self, fname: str) -> str:
        self.refs.pop(fname, None)
        return super().reserve(fname)

    def drop(self, fname: str) -> None:
        self.refs.pop(fname, None)
        super().drop(fname)

    def local_files(self) -> dict:
        """The files this run wrote itself (to upload): name -> entry."""
        return {f: e for f, e in self.files.items() if f not in self.refs}

    def make_durable(self) -> None:
        if self.pending:
            super().make_durable()          # raises: staged files were never added
        for fname in self.local_files():
            fsops.fsync_file(self.dir.file(fname))


class BucketTransaction(Transaction):
    STAGED = BucketStagedVersion
    # a fenced run removes its local staging too: it is this run's alone (``staging/<cache id>/<id>/``
    # on this host; no other run takes it over, and the local tier's sweep removes only a gone
    # process's); what it uploaded is the collection's (collect.py)
    FENCED_REMOVES_STAGING = True

    def __init__(self, cache, run, base, base_error, recovered, base_head):
        super().__init__(cache, run, base, base_error, recovered)
        self.base_head = base_head      # the newest record at begin, as listed (log.Head; None: none)
        self.base_seq = base_head.seq if base_head is not None else 0
        self.seq: int | None = None     # the log number this run published

    def create_staging(self) -> None:
        """STAGING.json names the owner as the local tier's sweep judges it: host, pid, and the
        pid's start time and pid namespace (local_tier.py)."""
        self._dir.create(local_tier.staging_owner(self.run))

    def commit(self) -> str:
        """Upload the run's files, then create the next commit record (rebasing onto what was
        committed meanwhile); returns the version id."""
        self.fence("commit")
        return publishing.publish(self)
