"""A staged version: what one run has staged so far, the object commit and rebase work on.

``StagedVersion`` holds the records of the version the run will publish (``files``: name ->
{bytes, sha256}; ``slots``, ``boundaries``, ``sections``) and the files themselves in the run's
staging directory (staging.py). Its methods are the only way anything is added to or dropped
from it: the transaction (transaction.py) calls them after its fencing checks, the rebase
(rebase.py) calls them under the writer lock, the commit (commit.py) reads the records and makes
them durable. Nothing else reaches into it.

Invariant (complete version): every file a record names is in the staging directory, written
here (``write_value``, ``record``) or carried from a committed version (``carry``: a hard link,
or a copy from the version's pinned descriptor when that version was removed meanwhile), so the
version a run publishes never depends on its base still existing.

What this does not guarantee: fencing (is this run still the owner of its staging?) is the
transaction's business; a call here on a staging directory moved away fails with ENOENT.
"""
from __future__ import annotations

import errno
import json
import time
import uuid
from pathlib import Path

from ..errors import TransactionError
from ..storage import fsops
from . import manifest as mf
from .reader import corrupt
from .staging import StagingDir

# what a link from a version that was removed meanwhile fails with: ENOENT, or ESTALE on a
# network filesystem whose other client removed it (seen on GlusterFS)
_GONE = {errno.ENOENT, errno.ESTALE}


class StagedVersion:
    def __init__(self, staging: StagingDir, cache_name: str):
        self.dir, self.cache_name = staging, cache_name
        self.files: dict[str, dict] = {}
        self.slots: dict[str, dict] = {}
        self.boundaries: dict[str, dict] = {}
        self.sections: dict[str, dict] = {}
        self.pending: set[str] = set()          # reserved with reserve(), not yet record()ed

    @property
    def path(self) -> Path:
        return self.dir.path

    def file_path(self, fname: str) -> Path:
        return self.dir.file(fname)

    # ------------------------------------------------------------------ adding files
    def write_value(self, fname: str, value) -> dict:
        """Serialize ``value`` as ``fname`` (unique temp name, fsync, rename; staging.py)."""
        self.files.pop(fname, None)
        entry = self.dir.write_value(fname, value)
        self.files[fname] = entry
        return entry

    def carry(self, fname: str, source, src: str | None = None) -> dict:
        """Make file ``src`` (default: the same name) of the committed version ``source`` (a
        Snapshot) the file ``fname`` of this version: a hard link, or a copy from the snapshot's
        pinned descriptor when that version was removed meanwhile (another run's commit, an
        eviction). The entry (size, sha256) is the source's; the size is checked."""
        src = src or fname
        entry = dict(source.manifest["files"][src])
        fd = source.pinned_fd(src)
        self.files.pop(fname, None)
        try:
            size = self.dir.link_from(fname, source.dir_fd(), src)
        except OSError as e:
            if e.errno not in _GONE or not self.dir.in_place():
                raise
            size = self.dir.copy_from_fd(fname, fd)
        if size != entry["bytes"]:
            raise corrupt(self.cache_name, f"carried {fname} has the wrong size",
                          expected=entry["bytes"], actual=size)
        self.files[fname] = entry
        return entry

    def reserve(self, fname: str) -> str:
        """A fresh path for a file the caller writes itself (then ``record(fname)``)."""
        self.files.pop(fname, None)
        self.dir.drop(fname)
        self.pending.add(fname)
        return str(self.dir.file(fname))

    def record(self, fname: str) -> dict:
        """Record a file written at ``reserve(fname)``: fsync it, record bytes and sha256."""
        if fname not in self.pending:
            raise TransactionError(f"add_file('{fname}') without stage_path('{fname}')",
                                   expected="stage_path first", actual=fname,
                                   fix="write the file at the path stage_path() returned")
        entry = self.dir.record(fname)
        self.pending.discard(fname)
        self.files[fname] = entry
        return entry

    def drop(self, fname: str) -> None:
        """Remove ``fname`` from this version (its file and its record)."""
        self.pending.discard(fname)
        self.files.pop(fname, None)
        self.dir.drop(fname)

    # ------------------------------------------------------------------ the version
    def make_durable(self) -> None:
        """Invariant 1 of the commit: every file named is on disk before the manifest exists."""
        if self.pending:
            raise TransactionError("staged files were never added", expected="add_file() for each",
                                   actual=sorted(self.pending), fix="call add_file() or discard")
        for fname in self.files:
            fsops.fsync_file(self.dir.file(fname))
        fsops.fsync_dir(self.dir.path)

    def manifest(self, run) -> dict:
        """The manifest of this version (a fresh version id), as the reader validates it."""
        return {"schema": mf.SCHEMA, "name": self.cache_name, "version": uuid.uuid4().hex,
                "created_at": time.time(), "run": run.to_dict(),
                "slots": self.slots, "boundaries": self.boundaries, "sections": self.sections,
                "files": self.files}

    def copy_records(self) -> dict:
        return json.loads(json.dumps({"slots": self.slots, "boundaries": self.boundaries,
                                      "sections": self.sections, "files": self.files}))
