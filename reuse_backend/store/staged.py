"""A staged version: what one run has staged so far, the object commit and rebase work on.

``StagedVersion`` holds the records of the version the run will publish (``files``: name ->
{bytes, sha256}; ``slots``, ``boundaries``, ``sections``) and the files this run wrote in its
staging directory on this host (staging.py). Its methods are the only way anything is added to or
dropped from it: the transaction (transaction.py) calls them after its fencing checks, a medium's
carry (``Cache.carry``) records what it carried, the rebase (rebase.py) calls them under the
commit's serialization, the commit reads the records and makes them durable.

A carried file is either in the staging directory (a folder: a hard link, or a copy from the
source version's pinned descriptor) or carried by reference (``refs``: file name -> the medium's
name of a committed object, a bucket's data key): nothing is downloaded to be carried.

Invariant (complete version): every file a record names is in the staging directory or is a
reference to a committed object, so the version a run publishes never depends on its base still
being current.

What this does not guarantee: fencing (is this run still the owner of its staging?) is the
transaction's business; a call here on a staging directory moved away fails with ENOENT.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path

from ..errors import TransactionError
from ..storage import fsops
from . import manifest as mf
from .staging import StagingDir


class StagedVersion:
    def __init__(self, staging: StagingDir, cache_name: str):
        self.dir, self.cache_name = staging, cache_name
        self.files: dict[str, dict] = {}
        self.slots: dict[str, dict] = {}
        self.boundaries: dict[str, dict] = {}
        self.sections: dict[str, dict] = {}
        self.pending: set[str] = set()          # reserved with reserve(), not yet record()ed
        self.refs: dict[str, str] = {}          # carried by reference: file name -> committed object

    @property
    def path(self) -> Path:
        return self.dir.path

    def file_path(self, fname: str) -> Path:
        return self.dir.file(fname)

    # ------------------------------------------------------------------ adding files
    def write_value(self, fname: str, value) -> dict:
        """Serialize ``value`` as ``fname`` (unique temp name, fsync, rename; staging.py)."""
        self._forget(fname)
        entry = self.dir.write_value(fname, value)
        self.files[fname] = entry
        return entry

    def add_carried(self, fname: str, entry: dict, ref: str | None = None) -> dict:
        """Record a file a medium carried from a committed version: its entry (size, sha256) is the
        source's; ``ref``: carried by reference (nothing of it is in the staging directory)."""
        self.files[fname] = dict(entry)
        if ref is not None:
            self.refs[fname] = ref
        return self.files[fname]

    def reserve(self, fname: str) -> str:
        """A fresh path for a file the caller writes itself (then ``record(fname)``)."""
        self._forget(fname)
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
        self._forget(fname)
        self.dir.drop(fname)

    def _forget(self, fname: str) -> None:
        self.files.pop(fname, None)
        self.refs.pop(fname, None)

    def local_files(self) -> dict:
        """The files of this version in the staging directory (not carried by reference): name -> entry."""
        return {f: e for f, e in self.files.items() if f not in self.refs}

    # ------------------------------------------------------------------ the version
    def make_durable(self) -> None:
        """Invariant 1: every file named is durable before the version is published."""
        if self.pending:
            raise TransactionError("staged files were never added", expected="add_file() for each",
                                   actual=sorted(self.pending), fix="call add_file() or discard")
        for fname in self.local_files():
            fsops.fsync_file(self.dir.file(fname))
        fsops.fsync_dir(self.dir.path)

    def manifest(self, run, *, only_slot: str | None = None) -> dict:
        """The manifest of this version (a fresh version id), as the reader validates it;
        ``only_slot``: the one-slot version of a single-flight entry."""
        slots, files = self.slots, self.files
        if only_slot is not None:
            slots = {only_slot: self.slots[only_slot]}
            files = {slots[only_slot]["file"]: self.files[slots[only_slot]["file"]]}
        return {"schema": mf.SCHEMA, "name": self.cache_name, "version": uuid.uuid4().hex,
                "created_at": time.time(), "run": run.to_dict(), "slots": slots,
                "boundaries": {} if only_slot else self.boundaries, "sections": {} if only_slot else self.sections,
                "files": files}
