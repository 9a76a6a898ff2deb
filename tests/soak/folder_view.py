"""What the soak reads of a cache root that is a folder (tests/soak/soak.py), and its commit-window
kill triggers.

``FolderView`` is the folder side of the soak's store view (``BucketView`` in bucket_view.py is the
bucket side): the committed manifest (``FolderCache.snapshot``), a committed file, ``check`` and what a
kill may leave (``REPAIRABLE``: stale staging, a dead owner's lock, ``.old``; the next writer's
recovery removes it), the dead writer's lock, what is on disk at a kill, and what is left behind
(``<name>.*`` beside a cache). ``CommitWatch`` kills a run at a commit phase it sees on disk:
``tmp-manifest`` (its staged manifest written: the commit is next) or ``.old`` (the commit's
``current -> .old`` rename), through inotify (or polling).
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import struct
import time
from pathlib import Path

from reuse_backend.folder.cache import FolderCache
from reuse_backend.folder.check import REPAIRABLE, check
from reuse_backend.folder.lease_files import read_lease as read_lock


class FolderView:
    kind = "folder"
    kill_targets = ("tmp-manifest", ".old")     # the first one needs no committed version
    repairable = REPAIRABLE         # what a kill may leave: the next writer's recovery removes it
    garbage: frozenset = frozenset()   # what waits for a later collection (none: a commit cleans up)
    kills_linger = False        # what a killed run left is recovered by the next commit: nothing may stay
    remote_kill_leftovers = {"stale_tmp"}   # a run killed on another host: its staging stays live
    # for check() here until its run lease expires (folder/run_lease.py)

    def __init__(self, root):
        self.root = Path(root)

    def describe(self) -> str:
        return f"folder {self.root}"

    def at_local(self, root) -> "FolderView":
        """The same cache root as seen through another mount (a host's)."""
        return FolderView(root)

    def snapshot(self, name: str):
        return FolderCache(self.root, name).snapshot()

    def copy(self, name: str, fname: str, dest) -> None:
        shutil.copyfile(self.root / name / fname, dest)   # serial: nobody writes now; the caller checks its sha

    def check(self, name: str, *, repair: bool = False) -> list:
        return check(self.root, name, repair=repair)

    def problems(self, name: str) -> list:
        return [p for p in check(self.root, name) if p.code not in self.garbage]

    def needs_version(self, target: str) -> bool:
        return target == ".old"          # a first commit moves nothing aside

    def watch(self, name: str, target: str) -> "CommitWatch":
        return CommitWatch(self.root, name, target)

    def lock_owner(self, name: str, pid) -> dict | None:
        """The lock the killed writer (``pid``) left behind, or None."""
        owner, _ = read_lock(self.root / f"{name}.lock")
        return owner if owner is not None and owner.get("pid") == pid else None

    def state(self, name) -> list[str]:
        """What exists at a kill (a note for the report)."""
        if not name:
            return []
        return [s for s in (".tmp", ".old", ".lock") if os.path.lexists(self.root / f"{name}{s}")] + \
            ([".tmp/*/manifest.json"] if self._staged_manifests(name) else []) + \
            ([""] if os.path.lexists(self.root / name) else [])

    def _staged_manifests(self, name) -> list[Path]:
        """manifest.json of any staging directory (<name>.tmp/<staging id>/manifest.json)."""
        try:
            return sorted((self.root / f"{name}.tmp").glob("*/manifest.json"))
        except OSError:     # the staging directory went away while it was listed (the commit's rename)
            return []

    def in_commit_window(self, info: dict) -> bool:
        fs = info.get("fs_state") or []
        return ".old" in fs or ".tmp/*/manifest.json" in fs

    def left_behind(self, names) -> list[str]:
        """``<name>.*`` beside the caches (staging, leases, claims, locks, ``.old``), with what each holds."""
        out = []
        for p in sorted(self.root.iterdir()):
            if any(p.name.startswith(f"{n}.") for n in names):
                out.append(f"{p.name} (holding {sorted(os.listdir(p))})" if p.is_dir() else p.name)
        return out

    def settle(self, names, log=print) -> dict:
        """Nothing to wait for on a folder: a commit's recovery removes what dead runs left."""
        return {}


class _Inotify:
    """Minimal inotify through ctypes (Linux). The kernel queues an event during the system call
    that causes it, so a window that the run passed while this process had no CPU is still
    reported (late), never missed. Raises OSError where inotify is unavailable."""
    IN_MOVED_TO, IN_CREATE, IN_Q_OVERFLOW, IN_ISDIR = 0x80, 0x100, 0x4000, 0x40000000
    _HDR = struct.Struct("iIII")

    def __init__(self):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            init, add = libc.inotify_init1, libc.inotify_add_watch
        except (OSError, AttributeError) as e:
            raise OSError(f"no inotify: {e}") from e
        add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._add = add
        self.fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.dirs: dict[int, Path] = {}

    def watch(self, path: Path) -> bool:
        wd = self._add(self.fd, os.fsencode(path), self.IN_CREATE | self.IN_MOVED_TO)
        if wd < 0:
            return False
        self.dirs[wd] = Path(path)
        return True

    def read(self, timeout: float) -> list[tuple[Path | None, int, str]]:
        """(directory, mask, name) of the queued events; waits up to timeout for the first."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return []
        try:
            buf = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return []
        out, i = [], 0
        while i + self._HDR.size <= len(buf):
            wd, mask, _cookie, n = self._HDR.unpack_from(buf, i)
            name = buf[i + self._HDR.size:i + self._HDR.size + n].rstrip(b"\0").decode(errors="replace")
            out.append((self.dirs.get(wd), mask, name))
            i += self._HDR.size + n
        return out

    def close(self) -> None:
        os.close(self.fd)


class CommitWatch:
    """One commit-window trigger of one run, armed before the prompt is queued.

    ``.old``: ``<name>.old`` created or renamed into place (the commit's ``current -> .old``).
    ``tmp-manifest``: ``manifest.json`` in a staging directory ``<name>.tmp/<id>/`` that was
    created (mkdir) during this run; stale staging directories present at the start, or moved
    aside by recovery (``.stale-*``), never count. Only transitions during the run count.

    ``seen(timeout)`` reads inotify events (and also polls the paths, for filesystems or
    machines without inotify). ``implied_by_commit(prompt_id)`` says whether a run that has
    committed must have passed the trigger: its staged manifest always existed, and ``.old``
    existed when there was a version to move aside.
    """

    def __init__(self, root: Path, name: str, target: str):
        assert target in FolderView.kill_targets, target
        self.root, self.name, self.target = Path(root), name, target
        self.tmp, self.old, self.current = self.root / f"{name}.tmp", self.root / f"{name}.old", self.root / name
        self.had_version = os.path.lexists(self.current) or os.path.lexists(self.old)
        self.baseline = set(self._listdir(self.tmp))     # staging directories before the run
        self.new_staging: set[str] = set()
        self.armed_old = not os.path.lexists(self.old)   # polling: absent -> present
        self.via = "poll"
        try:
            self.ino = _Inotify()
        except OSError:
            self.ino = None
        if self.ino is not None:
            self.via = "inotify"
            self.ino.watch(self.root)
            if target == "tmp-manifest" and os.path.isdir(self.tmp):
                self.ino.watch(self.tmp)

    @staticmethod
    def _listdir(path) -> list[str]:
        try:
            return os.listdir(path)
        except OSError:
            return []

    def _staging_created(self, entry: str) -> bool:
        """A staging directory created during this run: watch it; True if its manifest is there."""
        if entry in self.baseline or entry.startswith("."):      # .stale-*: moved aside by recovery
            return False
        d = self.tmp / entry
        if entry not in self.new_staging:
            self.new_staging.add(entry)
            if self.ino is not None:
                self.ino.watch(d)
        return os.path.lexists(d / "manifest.json")

    def _scan_tmp(self) -> bool:
        return any([self._staging_created(e) for e in self._listdir(self.tmp)])

    def _poll(self) -> bool:
        if self.target == ".old":
            if os.path.lexists(self.old):
                return self.armed_old
            self.armed_old = True
            return False
        return self._scan_tmp()

    def seen(self, timeout: float) -> bool:
        if self.ino is None:
            if timeout:
                time.sleep(timeout)
            return self._poll()
        hit = False
        for d, mask, entry in self.ino.read(timeout):
            if mask & _Inotify.IN_Q_OVERFLOW:
                continue                      # the poll below still looks at the paths
            if self.target == ".old":
                hit = hit or (d == self.root and entry == self.old.name)
            elif d == self.root and entry == self.tmp.name:      # <name>.tmp (re)created
                self.ino.watch(self.tmp)
                hit = self._scan_tmp() or hit
            elif d == self.tmp and mask & _Inotify.IN_ISDIR:
                hit = self._staging_created(entry) or hit
            elif d is not None and d.parent == self.tmp and entry == "manifest.json":
                hit = True
        return self._poll() or hit

    def implied_by_commit(self, prompt_id: str) -> bool:
        try:
            committed = json.loads((self.current / "manifest.json").read_bytes())
        except (OSError, ValueError):
            return False
        if not isinstance(committed, dict) or (committed.get("run") or {}).get("prompt_id") != prompt_id:
            return False
        return self.target == "tmp-manifest" or self.had_version

    @property
    def tick(self) -> float:
        """How long the killer waits for events between two looks (it polls without inotify)."""
        return 0.05 if self.ino is not None else 0.0002

    def last_node_started(self) -> None:
        """The run reached its last node: nothing to do (every transition of the run counts)."""

    def close(self) -> None:
        if self.ino is not None:
            self.ino.close()
            self.ino = None
