"""The lease file: an exclusive file with owner, heartbeat, safe breaking and fenced release.

One mechanism, three roles (each named in its messages and documented where it is used):

* the **writer lock** ``<root>/<name>.lock``: one commit (or recovery, eviction) of a cache at a
  time, held for that critical section only (commit.py, evict.py);
* the **run lease** ``<name>.tmp/<staging id>.lease``: a run is alive and owns its staging
  (run_lease.py);
* the **claim** ``<name>.tmp/<slot>-<digest>.claim``: one run encodes this slot key now
  (single_flight.py).

A lease file holds JSON {host, pid, pid_start, pid_ns, run_id, started_at, lease_s}; its mtime
is the heartbeat.  It is created atomically with its full content:
the JSON is written and fsynced under a unique temp name, then hard-linked to the lock
path (link fails with EEXIST when the lock exists, also on NFS), so no reader ever sees
an empty lock.  Filesystems without hard links fall back to O_CREAT|O_EXCL + write.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import threading
import time
import uuid
from pathlib import Path

from ..storage import fsops
from .owner import hostname, pid_alive, pid_namespace, pid_start  # noqa: F401 (re-exported)
from .lock_file import (BROKEN_TAG, MAX_LOCK_BYTES, NEW_TAG, RELEASE_TAG,  # noqa: F401 (re-exported)
                        describe, read_lock, stray_lock_files)
from .lease_judge import MTIME_SLACK_S, _activate, judge, lock_status  # noqa: F401 (re-exported)
from ..errors import UnsupportedFilesystemError, CacheBusyError, TransactionError

log = logging.getLogger("seedreuse")

# heartbeat errors worth retrying (network filesystems); anything else loses the lease at once
TRANSIENT_ERRNOS = {errno.EIO, errno.ESTALE, errno.EINTR, errno.EAGAIN, errno.ETIMEDOUT}


WRITER_LOCK, RUN_LEASE, CLAIM = "writer lock", "run lease", "claim"
ROLES = (WRITER_LOCK, RUN_LEASE, CLAIM)


class LeaseFile:
    """One lease file in one role (``WRITER_LOCK`` | ``RUN_LEASE`` | ``CLAIM``): acquire, keep
    (heartbeat), check (``held``), release."""

    def __init__(self, lock_path, run_id: str, *, lease_s: float = 120.0, heartbeat_s: float = 10.0,
                 cache_name: str | None = None, role: str = WRITER_LOCK):
        if role not in ROLES:
            raise ValueError(f"unknown lease-file role {role!r}")
        self.role = role
        self.path = Path(lock_path)
        self.run_id = str(run_id)
        self.lease_s = float(lease_s)
        self.heartbeat_s = float(heartbeat_s)
        self.cache_name = cache_name or self.path.name.removesuffix(".lock")
        self.broke: list[str] = []      # what acquire() had to break (for logs / check)
        self._fd: int | None = None
        self._ino: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.heartbeat_error: BaseException | None = None
        self.lost = False               # set by the heartbeat once the lease cannot be kept

    # -- acquire ---------------------------------------------------------------------------
    def acquire(self) -> LeaseFile:
        if self._fd is not None:
            raise TransactionError(f"{self.role} acquired twice", expected="one acquire per lease file",
                                   actual="acquire() on a held lock", fix="release() it first")
        broke = False
        for _ in range(8):                            # bounded: a lock that keeps vanishing is busy
            try:
                created = self._try_create()
            except BaseException:
                if self._fd is not None:              # never an exception that leaves it held
                    self.release()
                raise
            if created:
                self._check_stable_identity()
                return self
            owner, st = read_lock(self.path)
            if st is None:
                continue                              # vanished between create and read: retry
            reason = judge(owner, st, self.lease_s)
            if reason is None or broke:
                raise self._busy(owner)
            if not self._break(owner, st, reason):
                raise self._busy(read_lock(self.path)[0])   # the lock that is there now
            broke = True                              # one break per acquire, then create again
        raise self._busy(read_lock(self.path)[0])

    def _check_stable_identity(self) -> None:
        """Fencing compares the lock file's identity (device, inode) with the one we created.
        Filesystems that invent inode numbers per path lookup (sshfs/SFTP) make that
        comparison meaningless, and with it every "is this still ours" check: refuse such a
        cache root at once, with the reason, instead of failing later as a lost lock."""
        owner, st = read_lock(self.path)
        if owner is not None and owner.get("run_id") == self.run_id and st is not None \
                and (st.st_dev, st.st_ino) != self._ino:
            fd, self._fd = self._fd, None
            self._stop_heartbeat()
            try:
                fsops.unlink(self.path, missing_ok=True)
            finally:
                if fd is not None:
                    os.close(fd)
                _activate(self.run_id, -1)
            raise UnsupportedFilesystemError(
                f"the cache root {self.path.parent} is on a filesystem without stable file identities "
                "(the lock file's inode number changed between two looks, as on sshfs/SFTP)",
                expected="a local disk, NFS or another POSIX filesystem with stable inode numbers",
                actual=f"inode {self._ino[1]} then {st.st_ino}",
                fix="point SEEDREUSE_CACHE_ROOT at a local folder or an NFS/CephFS/Lustre mount")

    def _busy(self, owner) -> CacheBusyError:
        who = describe(owner, None if owner else self.path)
        fix = "wait for the other run to finish (or fail), or give this run another cache name"
        if not owner:
            # judged by its age alone (judge): breakable once unchanged for the lease
            fix = (f"if a run is writing cache '{self.cache_name}', wait for it; otherwise the file is "
                   f"not a lock of a live run: it is broken once unchanged for {self.lease_s:.0f} s "
                   f"(SEEDREUSE_LEASE_S), or remove {self.path} by hand (or give this run another "
                   "cache name)")
        return CacheBusyError(
            f"cache '{self.cache_name}' is being written by {who}; "
            "wait for it to finish or use another cache name",
            expected="no other writer on this cache", actual=who, fix=fix,
            details={"owner": owner or {}, "lock": str(self.path)})

    def _payload(self) -> bytes:
        pid = os.getpid()
        return json.dumps({"host": hostname(), "pid": pid, "pid_start": pid_start(pid),
                           "pid_ns": pid_namespace(),
                           "run_id": self.run_id, "started_at": time.time(),
                           "lease_s": self.lease_s}).encode()

    def _try_create(self) -> bool:
        tmp = self.path.with_name(f"{self.path.name}{NEW_TAG}{uuid.uuid4().hex}")
        fd = fsops.open_exclusive(tmp)
        linked = False
        _activate(self.run_id, 1)   # registered before the link: never judged abandoned by us
        try:
            fsops.write_all(fd, self._payload(), tmp)
            fsops.fsync_file(fd, tmp)
            try:
                fsops.link(tmp, self.path)
                linked = True
            except (FileExistsError, FileNotFoundError):
                # EEXIST: the lock is taken.  ENOENT: the holder's recovery removed our temp
                # file as a stray; either way somebody holds the lock right now.
                return False
            except OSError as e:
                if e.errno not in fsops._LINK_FALLBACK:
                    raise
                return self._create_direct()          # no hard links here: plain O_EXCL create
            self._held(fd, os.fstat(fd))
            fd = None
            return True
        finally:
            if self._fd is None:
                _activate(self.run_id, -1)
            if fd is not None:
                os.close(fd)
            try:
                fsops.unlink(tmp, missing_ok=True)
            except OSError:
                if not linked:
                    raise
                log.warning("could not remove lock temp file %s", tmp)
            if linked:
                try:
                    fsops.fsync_dir(self.path.parent)
                except OSError:
                    self.release()
                    raise

    def _create_direct(self) -> bool:
        try:
            fd = fsops.open_exclusive(self.path)
        except FileExistsError:
            return False
        try:
            fsops.write_all(fd, self._payload(), self.path)
            fsops.fsync_file(fd, self.path)
        except BaseException:
            os.close(fd)
            fsops.unlink(self.path, missing_ok=True)
            raise
        self._held(fd, os.fstat(fd))
        return True

    def _held(self, fd: int, st) -> None:
        self._fd, self._ino = fd, (st.st_dev, st.st_ino)
        self._stop.clear()
        self.heartbeat_error, self.lost = None, False
        self._thread = threading.Thread(target=self._beat, name=f"seedreuse-heartbeat-{self.run_id}",
                                        daemon=True)
        self._thread.start()

    def _break(self, owner, st, reason: str) -> bool:
        """Take a stale lock away; True when it was broken (the caller retries once).

        Only one breaker can win the rename to a unique name.  The renamed file is then
        re-judged: if it is not the lock we judged, or it turned fresh (its owner beat in
        between), it is put back with a hard link and the caller reports busy.
        """
        broken = self.path.with_name(f"{self.path.name}{BROKEN_TAG}{uuid.uuid4().hex}")
        try:
            fsops.rename(self.path, broken)
        except FileNotFoundError:                      # somebody else broke it: retry create
            self.broke.append(f"stale {self.role} of {describe(owner)} ({reason}) was broken by another "
                              "run meanwhile")
            return True
        owner2, st2 = read_lock(broken)
        same = st2 is not None and (st2.st_dev, st2.st_ino) == (st.st_dev, st.st_ino) and \
            (owner2 or {}).get("run_id") == (owner or {}).get("run_id")
        if not same or judge(owner2, st2, self.lease_s) is None:
            try:
                fsops.link(broken, self.path)          # restore the live lock
            except FileNotFoundError:                  # removed meanwhile by the new holder
                return False
            except FileExistsError:
                log.warning("lock %s was re-taken while being restored; %s is kept", self.path, broken)
                return False
            fsops.unlink(broken, missing_ok=True)
            return False
        log.warning("breaking stale lock %s of %s: %s", self.path, describe(owner), reason)
        self.broke.append(f"broke stale {'lock' if self.role == WRITER_LOCK else self.role} of "
                          f"{describe(owner)}: {reason}")
        fsops.unlink(broken, missing_ok=True)
        return True

    # -- heartbeat / fencing / release ---------------------------------------------------------
    def _beat(self) -> None:
        """Touch the lock every heartbeat_s. A transient error (EIO, ESTALE, EINTR, EAGAIN,
        ETIMEDOUT: a network filesystem hiccup) is retried at the next beat for as long as the
        lease can still be kept (lease minus one interval since the last good beat); after
        that, or on any other error, the lease counts as lost: logged once, and held() is
        False from then on, which fences every later write of the run."""
        last_ok = time.monotonic()
        while not self._stop.wait(self.heartbeat_s):
            fd = self._fd
            if fd is None:
                return
            try:
                fsops.utime(self.path, fd=fd)
                last_ok = time.monotonic()
                continue
            except BaseException as e:  # noqa: BLE001 - recorded; held() reports the loss
                self.heartbeat_error = e
                transient = isinstance(e, OSError) and e.errno in TRANSIENT_ERRNOS
                if transient and time.monotonic() - last_ok < self.lease_s - self.heartbeat_s:
                    log.warning("heartbeat of lock %s failed (%s); retrying", self.path, e)
                    continue
            self.lost = True
            log.error("seedreuse: run %s lost its %s %s (heartbeat failing since %.0f s: %s); "
                      "its writes are refused from now on", self.run_id, self.role, self.path,
                      time.monotonic() - last_ok, self.heartbeat_error)
            return

    def held(self) -> bool:
        """Fencing: the lock path still holds *our* lock (same inode and run id) and the
        heartbeat has not given the lease up."""
        if self._fd is None or self.lost:
            return False
        owner, st = read_lock(self.path)
        return (st is not None and owner is not None and owner.get("run_id") == self.run_id
                and (st.st_dev, st.st_ino) == self._ino)

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
        self._thread = None

    def release(self) -> None:
        """Stop the heartbeat; remove the lock file only when it is still ours.

        Fenced like every write: correctness never depends on timing.  A name cannot be
        unlinked on condition of what it points to, so a check ("the lock is ours") followed by
        an unlink of the path would remove the NEXT owner's lock when this process is stopped in
        between for longer than the lease (a breaker takes it, the next writer creates its own).
        Instead the lock path is renamed to a name only this release uses; the rename is the
        one moment that decides, and what it moved is then judged on that private name, where
        nobody else can change it (only recovery of the next owner may delete it as a stray):
        our inode (the fd we hold keeps its identity unique) is unlinked; anything else is
        another owner's live lock, put back at once with a hard link (never replacing a lock
        that appeared meanwhile).
        Not guaranteed: between that rename and the put-back (microseconds, unless this
        process is stopped exactly there after being stopped past its lease before the rename)
        the other owner's lock is absent from its name: a fencing check of that owner at that
        instant fails (it fails cleanly with "lost its writer lock"), and a third writer may
        take the free name (then the put-back is refused, the other owner is fenced, and its
        file stays under the release name until the next recovery removes it as a stray).
        """
        if self._fd is None:
            return
        self._stop_heartbeat()
        try:
            if self.held():
                self._remove_own_lock()
        finally:
            _activate(self.run_id, -1)
            fd, self._fd = self._fd, None
            os.close(fd)

    def _remove_own_lock(self) -> None:
        aside = self.path.with_name(f"{self.path.name}{RELEASE_TAG}{uuid.uuid4().hex}")
        try:
            fsops.rename(self.path, aside)            # the deciding step: whatever is there now
        except FileNotFoundError:
            return                                    # broken and not re-taken: nothing to remove
        _, st = read_lock(aside)
        if st is not None and (st.st_dev, st.st_ino) == self._ino:
            fsops.unlink(aside, missing_ok=True)      # ours: the lock is gone
            return
        if st is None:
            return                                    # removed meanwhile by the next owner's recovery
        log.warning("lock %s was broken and re-taken while run %s released it; putting it back",
                    self.path, self.run_id)
        try:
            fsops.link(aside, self.path)              # restore the other owner's live lock
        except FileNotFoundError:                     # removed meanwhile by a recovery
            return
        except FileExistsError:                       # a third writer took the free name
            log.warning("lock %s was re-taken while being restored; %s is kept", self.path, aside)
            return
        except OSError as e:
            if e.errno not in fsops._LINK_FALLBACK:
                raise
            # no hard links here: a rename back could replace a lock created meanwhile, so the
            # other owner is left fenced (it fails cleanly) rather than risking two owners
            log.warning("lock %s cannot be put back without hard links; %s is kept", self.path, aside)
            return
        fsops.unlink(aside, missing_ok=True)

    def __enter__(self) -> LeaseFile:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def break_stale(path, lease_s: float) -> str | None:
    """Remove the lock-format file ``path`` (a writer lock, a run lease or a single-flight claim,
    run_lease.py) when it is stale; returns why, or None when it is live or gone. The same safe
    breaking as acquire(): only one breaker wins the rename, and a file that turned fresh (or is
    not the one judged) is put back."""
    owner, st = read_lock(path)
    reason = judge(owner, st, lease_s) if st is not None else None
    if reason is None:
        return None
    lock = LeaseFile(path, f"break-{uuid.uuid4().hex}", lease_s=lease_s)
    return reason if lock._break(owner, st, reason) else None
