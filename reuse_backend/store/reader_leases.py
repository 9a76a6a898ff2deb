"""Reader lease files and this process's registry of them (readers.py says what they are for).

One lease serves every snapshot this process holds of a cache (a reference count), and it is kept
for LINGER_S after the last of them closes, so back-to-back snapshots register once; one daemon
thread per process refreshes every lease it holds (the heartbeat is the file's mtime) and removes
the unused ones whose linger is over. A process that ends normally removes its unused leases
(atexit, and a multiprocessing child's finalizer); a killed one leaves them to turn stale.

While a lease only lingers (no snapshot uses it) its file carries the owner-execute bit
(IDLE_BIT, set when the last snapshot closes, cleared when one reuses it: one chmod each, under
the registry's guard so the two never cross): other processes still count it as a live reader
(it protects nothing, but evictions keep the cache), and the cache browser's delete tells it from
a reader that holds a snapshot now (it waits for a lingering lease to go, and answers at once
for an open one; evict.py).

What this does not guarantee: an unused lease still looks live to other processes until it is
removed, so it keeps the cache from their evictions for at most LINGER_S (plus one heartbeat)
after its last use. A lease whose chmod failed (or whose mode is unknown) looks in use.
"""
from __future__ import annotations

import atexit
import json
import logging
import multiprocessing.util
import os
import stat
import threading
import time
import uuid
from pathlib import Path

from .owner import hostname, pid_namespace, pid_start
from . import usage

log = logging.getLogger("seedreuse")

READERS_DIR = usage.READERS_DIR
LINGER_S = 2.0                  # an unused lease is removed this long after its last snapshot closed
IDLE_BIT = stat.S_IXUSR         # set on a lease file while it only lingers (no snapshot uses it)
_O_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def readers_dir(root) -> Path:
    return Path(root) / READERS_DIR


class ReaderLease:
    def __init__(self, path: Path, lease_id: str, lease_s: float, heartbeat_s: float, key: tuple = ()):
        self.path, self.id, self.key = path, lease_id, key
        self.lease_s, self.heartbeat_s = lease_s, heartbeat_s
        self.pid = os.getpid()
        self.lost = False
        self.refs = 1                 # open snapshots using this lease (guarded by the registry)
        self.idle_since = 0.0         # monotonic time refs dropped to 0
        self.mode: int | None = None  # the file's permission bits (None: unknown, never marked idle)
        self.marked_idle = False      # IDLE_BIT is set on the file (guarded by the registry)

    @classmethod
    def acquire(cls, root, name: str, *, lease_s: float, heartbeat_s: float,
                dir_mode: int = 0o755, file_mode: int = 0o644) -> ReaderLease | None:
        """This process's lease of ``name`` under ``root`` (one more snapshot on it), created when
        there is none; None when it cannot be created (the reader then reads unregistered)."""
        key = (str(root), name, os.getpid())
        lease, proven = REGISTRY.reuse(key)
        if lease is not None:
            try:
                if not proven:                # the idle bit's chmod proved it already
                    os.utime(lease.path)      # a heartbeat, and proof the file is still there
                return lease
            except OSError:                   # removed (judged stale) or unreachable: a new one
                REGISTRY.forget(lease)
        return cls.create(root, name, lease_s=lease_s, heartbeat_s=heartbeat_s,
                          dir_mode=dir_mode, file_mode=file_mode, key=key)

    @classmethod
    def create(cls, root, name: str, *, lease_s: float, heartbeat_s: float,
               dir_mode: int = 0o755, file_mode: int = 0o644, key: tuple = ()) -> ReaderLease | None:
        """Register a new reader of ``name`` (a new lease file); None when it cannot (it then
        reads unregistered). ``acquire`` reuses this process's lease instead."""
        d = readers_dir(root)
        lease_id = uuid.uuid4().hex
        pid = os.getpid()
        body = json.dumps({"host": hostname(), "pid": pid, "pid_start": pid_start(pid),
                           "pid_ns": pid_namespace(), "run_id": lease_id, "cache": name,
                           "started_at": time.time(), "lease_s": lease_s}).encode()
        path = d / f"{name}.{lease_id}"
        # The folder is created only when the create says it is missing (once per root in
        # practice): an mkdir before every create was one more server round trip per snapshot
        # on a network filesystem, answered EEXIST.
        for _ in range(5):      # bounded: gc or check --repair may remove the empty folder in between
            try:
                fd = os.open(path, _O_CREATE, file_mode)
            except FileNotFoundError:
                try:
                    os.mkdir(d, dir_mode)
                except FileExistsError:
                    pass
                except OSError as e:        # no root yet, read-only, no permission, full
                    log.debug("seedreuse: reader of '%s' unregistered: %s", name, e)
                    return None
                continue
            except OSError as e:
                log.debug("seedreuse: reader of '%s' unregistered: %s", name, e)
                return None
            # a close() error after the write is the write's error on a network filesystem (the
            # server may not have the lease body): the lease file goes, the reader reads unregistered
            mode = None
            try:
                try:
                    view = memoryview(body)
                    while view:
                        view = view[os.write(fd, view):]
                    mode = stat.S_IMODE(os.fstat(fd).st_mode)   # after the umask: what chmod restores
                finally:
                    os.close(fd)
            except OSError as e:
                log.debug("seedreuse: reader of '%s' unregistered: %s", name, e)
                unlink_quiet(path)
                return None
            lease = cls(path, lease_id, lease_s, heartbeat_s, key)
            lease.mode = mode
            REGISTRY.add(lease)
            return lease
        return None

    def beat(self) -> None:
        try:
            os.utime(self.path)
        except FileNotFoundError:
            self.lost = True
            REGISTRY.remove(self.id)
            if not self.refs:      # unused (lingering): removed as stale, nothing was unprotected
                return
            log.warning("seedreuse: reader lease %s was removed (judged stale: this reader stopped "
                        "heartbeating for longer than its lease); the cache is no longer protected "
                        "from eviction while this snapshot is open", self.path)
        except OSError as e:        # transient (network filesystem): the next beat retries
            log.debug("seedreuse: heartbeat of reader lease %s failed: %s", self.path, e)

    def release(self) -> None:
        """One snapshot less on this lease; the file is removed LINGER_S after the last one
        (by the heartbeat thread). The folder stays: removing it when empty cost a directory
        operation per snapshot (a server round trip on network filesystems), for nothing."""
        REGISTRY.release(self)


def unlink_quiet(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class _Registry:
    """The leases this process holds, and the one heartbeat thread that keeps them fresh."""

    def __init__(self):
        self.guard = threading.Lock()
        self.leases: dict[str, ReaderLease] = {}
        self.by_key: dict[tuple, ReaderLease] = {}     # (root, cache, pid) -> the reusable lease
        self.interval = 10.0
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def add(self, lease: ReaderLease) -> None:
        with self.guard:
            self.leases[lease.id] = lease
            if lease.key:
                self.by_key[lease.key] = lease
            if lease.heartbeat_s < self.interval:
                self.interval = lease.heartbeat_s
                self.wake.set()
            if self.thread is None or not self.thread.is_alive():   # also after a fork
                self.thread = threading.Thread(target=self._run, name="seedreuse-reader-leases",
                                               daemon=True)
                self.thread.start()

    def reuse(self, key: tuple) -> tuple[ReaderLease | None, bool]:
        """(this process's lease of ``key`` with one more snapshot on it, or None; whether its file
        was just proven to exist: the chmod that cleared its idle bit)."""
        with self.guard:
            lease = self.by_key.get(key)
            if lease is None or lease.lost or lease.pid != os.getpid() or lease.id not in self.leases:
                return None, False
            lease.refs += 1
            if not lease.marked_idle:
                return lease, False
            lease.marked_idle = False         # in use again: other processes see it at once
            try:
                os.chmod(lease.path, lease.mode)
                return lease, True
            except OSError:                   # gone or unreachable: acquire() looks again
                return lease, False

    def forget(self, lease: ReaderLease) -> None:
        with self.guard:
            lease.refs = max(0, lease.refs - 1)
            lease.lost = True
            self._drop(lease)

    def release(self, lease: ReaderLease) -> None:
        with self.guard:
            lease.refs = max(0, lease.refs - 1)
            if lease.refs:
                return
            lease.idle_since = time.monotonic()
            if lease.key and self.by_key.get(lease.key) is lease:
                self._mark_idle(lease)
                self.wake.set()               # the heartbeat thread removes it after LINGER_S
                return
            self._drop(lease)                 # not reusable (made by create): no reason to keep it
        unlink_quiet(lease.path)

    @staticmethod
    def _mark_idle(lease: ReaderLease) -> None:
        """Set IDLE_BIT on the file of a lease no snapshot uses (under the guard)."""
        if lease.mode is None:
            return
        try:
            os.chmod(lease.path, lease.mode | IDLE_BIT)
            lease.marked_idle = True
        except OSError as e:              # it looks in use: a delete answers at once, nothing unsafe
            log.debug("seedreuse: could not mark reader lease %s idle: %s", lease.path, e)

    def _drop(self, lease: ReaderLease) -> None:
        self.leases.pop(lease.id, None)
        if lease.key and self.by_key.get(lease.key) is lease:
            del self.by_key[lease.key]

    def remove(self, lease_id: str) -> None:
        with self.guard:
            lease = self.leases.get(lease_id)
            if lease is not None:
                self._drop(lease)

    def held(self, lease_id: str) -> bool:
        with self.guard:
            lease = self.leases.get(lease_id)
            return lease is not None and lease.pid == os.getpid() and not lease.lost

    def idle(self, lease_id) -> bool:
        """A lease of this process that no open snapshot uses (lingering until LINGER_S)."""
        with self.guard:
            lease = self.leases.get(lease_id)
            return lease is not None and lease.pid == os.getpid() and not lease.lost and not lease.refs

    # Unused leases are taken out of the registry and their files removed under the guard, so a
    # listing of this process (leases()) that finds one of its own files no longer registered can
    # tell, by looking again, that it was just removed rather than lost.
    def remove_idle(self, root, name: str | None) -> None:
        """Remove this process's unused leases of ``name`` (or of every cache) under ``root``."""
        with self.guard:
            for lease in [x for x in self.leases.values() if x.key and x.key[0] == str(root) and not x.refs
                          and x.pid == os.getpid() and (name is None or x.key[1] == name)]:
                self._drop(lease)
                unlink_quiet(lease.path)

    def remove_expired(self) -> None:
        """Remove the unused leases whose last snapshot closed LINGER_S ago or more."""
        now = time.monotonic()
        with self.guard:
            for lease in list(self.leases.values()):
                if lease.pid == os.getpid() and not lease.refs and now - lease.idle_since >= LINGER_S:
                    self._drop(lease)
                    unlink_quiet(lease.path)

    def _run(self) -> None:
        while True:
            with self.guard:   # wake when the first unused lease's linger ends, or to beat
                ends = [x.idle_since + LINGER_S for x in self.leases.values()
                        if not x.refs and x.pid == os.getpid()]
            timeout = self.interval if not ends else min(self.interval, max(0.05, min(ends) - time.monotonic()))
            self.wake.wait(timeout)
            self.wake.clear()
            self.remove_expired()
            with self.guard:
                mine = [x for x in self.leases.values() if x.pid == os.getpid()]
            for lease in mine:
                lease.beat()


REGISTRY = _Registry()


@atexit.register
def _remove_unused_at_exit() -> None:
    # a process that ends normally takes its lingering leases with it (a killed one leaves them
    # to turn stale: its pid is gone)
    with REGISTRY.guard:
        idle = [x for x in REGISTRY.leases.values() if x.pid == os.getpid() and not x.refs]
    for lease in idle:
        unlink_quiet(lease.path)


def _after_fork_in_child() -> None:
    # a fork while the heartbeat thread held the guard must not deadlock the child; the child's
    # leases are its own (the parent's keep the parent's pid and are never beaten by the child)
    REGISTRY.guard = threading.Lock()
    REGISTRY.wake = threading.Event()
    REGISTRY.thread = None
    REGISTRY.by_key = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
# a multiprocessing child ends with os._exit (no atexit); its finalizers run just before, and
# the ones registered before the fork are dropped, so each child registers its own
multiprocessing.util.register_after_fork(
    REGISTRY, lambda reg: multiprocessing.util.Finalize(reg, _remove_unused_at_exit, exitpriority=1))
