"""Leases on a folder: lease files (the ``LeaseMedium`` of store/lease.py).

A lease file holds its owner record as JSON; its mtime is the heartbeat (``utime`` on the
holder's open descriptor). The holder's token is that descriptor and the file's (device, inode).

* An exclusive create (writer lock ``<name>.lock``, run lease ``<name>.tmp/<id>.lease``, claim
  ``<name>.tmp/<slot>-<digest>.claim``) writes and fsyncs the record under a unique temp name
  (``.new-``), then hard-links it to the lease's name: the link fails when the name is taken (also
  on NFS), so nobody ever sees an empty lease file. Without hard links: ``O_CREAT|O_EXCL`` + write.
* A plain create (a reader lease: a fresh name) is one ``O_EXCL`` create and write.
* A take-over renames the stale file to a unique name (``.broken.``: one breaker wins), judges
  what it moved, and puts back (hard link) anything that is not the file judged or turned fresh.
* A release renames the file to a unique name (``.release.``; the rename decides), removes it when
  it is our inode, and puts back anything else (another owner's lease, taken while we were
  stopped past our lease), never replacing a file that appeared meanwhile.

Not guaranteed: between a releaser's rename and its put-back the other owner's lease is absent
from its name (a fencing check of that owner at that instant fails cleanly; a third writer may
take the free name, and then the other owner is fenced). A name whose inode changes between two
looks (sshfs) cannot fence: such a root is refused at the first create.
"""
from __future__ import annotations

import errno
import logging
import os
import stat
import time
import uuid
from pathlib import Path

from ..errors import CorruptCacheError, UnsupportedFilesystemError
from ..storage import fsops
from ..store import lease as leases, owner as owners
from ..store.lease import LeaseLost, Seen, Taken

log = logging.getLogger("seedreuse")

NEW_TAG = ".new-"          # <lease>.new-<hex>: temp file of an acquirer
BROKEN_TAG = ".broken."    # <lease>.broken.<hex>: a lease taken away by a breaker
RELEASE_TAG = ".release."  # <lease>.release.<hex>: a lease taken away by its releaser
TEMP_TAGS = (NEW_TAG, BROKEN_TAG, RELEASE_TAG)
# heartbeat errors worth retrying (network filesystems); anything else loses the lease at once
TRANSIENT_ERRNOS = {errno.EIO, errno.ESTALE, errno.EINTR, errno.EAGAIN, errno.ETIMEDOUT}


class Token:
    """The holder's open descriptor of its lease file, the file's identity and the run id."""

    def __init__(self, fd: int | None, st: os.stat_result, run_id: str):
        self.fd, self.ident, self.run_id = fd, (st.st_dev, st.st_ino), run_id
        self.mode = stat.S_IMODE(st.st_mode)      # its permission bits after the umask


def read_lease(path) -> tuple[dict | None, os.stat_result | None]:
    """(owner or None when unreadable, lstat or None when absent) of a lease file.

    Never blocks and never reads much: only a regular file is opened (O_NONBLOCK, O_NOFOLLOW), at
    most MAX_OWNER_BYTES of it. A name that is not a regular file has no owner."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        return None, st
    try:
        fd = os.open(path, fsops.O_READ | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None
    except OSError:
        return None, st
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > owners.MAX_OWNER_BYTES:
            return None, st
        data = os.read(fd, owners.MAX_OWNER_BYTES)
    except OSError:
        return None, st
    finally:
        fsops.close_read_only(fd)     # read-only: an error (ESTALE on FUSE) loses nothing
    return owners.parse_owner(data), st


def why_unreadable(path) -> str:
    """Why read_lease found no owner in ``path`` (never blocks: only a regular file is opened)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "it is gone"
    except OSError as e:
        return f"it cannot be looked at ({e.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_size > owners.MAX_OWNER_BYTES:
        return f"it is {st.st_size} bytes, not a lease of a few hundred"
    try:
        fd = os.open(path, fsops.O_READ | os.O_NONBLOCK)
    except PermissionError:
        return f"no permission to read it (owner uid {st.st_uid})"
    except OSError as e:
        return f"it cannot be opened ({e.strerror})"
    fsops.close_read_only(fd)
    return "empty" if st.st_size == 0 else "its content is not a SeedReuse lease (JSON with a run id)"


def stray_files(folder, prefix: str) -> list[Path]:
    """Temp files (``.new-`` / ``.broken.`` / ``.release.``) that crashed acquirers, breakers and
    releasers of the lease files named ``prefix`` left in ``folder``."""
    try:
        entries = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(Path(folder) / e for e in entries if e.startswith(tuple(prefix + t for t in TEMP_TAGS)))


class LeaseFiles:
    """The folder's LeaseMedium. ``parent_mode``: the lease's folder (``.tmp``, ``.readers``) is
    created when a create finds it missing (bounded: it may be removed in between); ``tidy``: it is
    removed again once empty, after a release or a failed create, so a failure leaves nothing behind
    (``.tmp``; ``.readers`` stays between snapshots)."""

    def __init__(self, *, file_mode: int = 0o644, parent_mode: int | None = None, tidy: bool = False,
                 cache_name: str | None = None):
        self.file_mode, self.parent_mode, self.tidy, self.cache_name = file_mode, parent_mode, tidy, cache_name

    def where(self, name) -> str:
        return str(name)

    def unreadable(self, name) -> str:
        return why_unreadable(name)

    def now(self) -> float:
        return time.time()

    # -- create ------------------------------------------------------------------------------
    def create(self, name, body: bytes, *, exclusive: bool):
        path = Path(name)
        for _ in range(20):
            try:
                return self._create(path, body, exclusive)
            except FileNotFoundError:         # the folder is missing, or was removed and made again since
                if self.parent_mode is None:
                    raise
            except BaseException:
                if self.tidy:
                    fsops.rmdir_if_empty(path.parent)
                raise
            try:                       # the folder is missing (or was removed meanwhile): create it
                fsops.mkdir(path.parent, self.parent_mode, parents=True, exist_ok=True)
            except BaseException:
                if self.tidy:
                    fsops.rmdir_if_empty(path.parent)
                raise
        raise CorruptCacheError(f"cannot create {path.name} in {path.parent}: the folder keeps vanishing",
                                expected="a stable folder", actual="removed again and again",
                                fix="rerun; check the cache root's filesystem")

    def _create(self, path: Path, body: bytes, exclusive: bool):
        run_id = (owners.parse_owner(body) or {}).get("run_id", "")
        if not exclusive:
            # a fresh name (a reader lease): one create and write, no fsync; the descriptor is closed
            # at once (on a network filesystem close() reports the write's failure) and the
            # heartbeat touches the name
            fd = fsops.open_exclusive(path, self.file_mode)
            try:
                fsops.write_all(fd, body, path)
                st = os.fstat(fd)
            except BaseException:
                os.close(fd)
                fsops.unlink(path, missing_ok=True)
                raise
            try:
                os.close(fd)
            except OSError:
                fsops.unlink(path, missing_ok=True)
                raise
            return Token(None, st, run_id)
        tmp = path.with_name(f"{path.name}{NEW_TAG}{uuid.uuid4().hex}")
        fd = fsops.open_exclusive(tmp, self.file_mode)
        token = None
        try:
            fsops.write_all(fd, body, tmp)
            fsops.fsync_file(fd, tmp)
            try:
                fsops.link(tmp, path)
            except (FileExistsError, FileNotFoundError):
                # EEXIST: the lease is taken. ENOENT: the holder's recovery removed our temp file as
                # a stray; either way somebody holds it right now.
                raise Taken(str(path)) from None
            except OSError as e:
                if e.errno not in fsops._LINK_FALLBACK:
                    raise
                return self._create_direct(path, body, run_id)     # no hard links here
            token = Token(fd, os.fstat(fd), run_id)
            fd = None
            try:
                fsops.fsync_dir(path.parent)
                self._check_stable_identity(path, token)
            except UnsupportedFilesystemError:     # ours, just linked, but not judgeable as ours
                os.close(token.fd)
                fsops.unlink(path, missing_ok=True)
                raise
            except BaseException:
                self.remove(path, token)
                raise
            return token
        finally:
            if fd is not None:
                os.close(fd)
            try:
                fsops.unlink(tmp, missing_ok=True)
            except OSError:
                if token is None:
                    raise
                log.warning("could not remove lease temp file %s", tmp)

    def _create_direct(self, path: Path, body: bytes, run_id: str):
        try:
            fd = fsops.open_exclusive(path, self.file_mode)
        except FileExistsError:
            raise Taken(str(path)) from None
        try:
            fsops.write_all(fd, body, path)
            fsops.fsync_file(fd, path)
        except BaseException:
            os.close(fd)
            fsops.unlink(path, missing_ok=True)
            raise
        return Token(fd, os.fstat(fd), run_id)

    def _check_stable_identity(self, path: Path, token: Token) -> None:
        """Fencing compares the lease file's identity with the one we created. Filesystems that
        invent inode numbers per lookup (sshfs/SFTP) make every "is this still ours" meaningless:
        refuse such a root at once, with the reason, instead of failing later as a lost lease."""
        owner, st = read_lease(path)
        if owner is not None and owner.get("run_id") == token.run_id and st is not None \
                and (st.st_dev, st.st_ino) != token.ident:
            raise UnsupportedFilesystemError(
                f"the cache root {path.parent} is on a filesystem without stable file identities (the lease "
                "file's inode number changed between two looks, as on sshfs/SFTP)",
                expected="a local disk, NFS or another POSIX filesystem with stable inode numbers",
                actual=f"inode {token.ident[1]} then {st.st_ino}",
                fix="point SEEDREUSE_CACHE_ROOT at a local folder or an NFS/CephFS/Lustre mount")

    # -- read, judge, take over ----------------------------------------------------------------
    def read(self, name) -> Seen | None:
        owner, st = read_lease(name)
        if st is None:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise CorruptCacheError(
                f"cache '{self.cache_name}': {name} is not a regular file ({stat.filemode(st.st_mode)}): it is "
                "not a lease SeedReuse wrote, and it is refused at once rather than waited on",
                expected="a lease file (or nothing) at that name", actual=stat.filemode(st.st_mode),
                fix=f"move {name} out of the cache root; SeedReuse never creates anything else there",
                details={"cache": self.cache_name, "path": str(name)})
        return Seen(owner, st.st_mtime, (st.st_dev, st.st_ino))

    def take_over(self, name, seen: Seen, body: bytes, lease_s: float):
        """Break a stale lease file: only one breaker wins the rename to a unique name; the renamed
        file is judged again, and put back (hard link) when it is not the file judged or turned
        fresh (its owner beat in between). Returns (None, what happened): the caller creates again."""
        path = Path(name)
        broken = path.with_name(f"{path.name}{BROKEN_TAG}{uuid.uuid4().hex}")
        try:
            fsops.rename(path, broken)
        except FileNotFoundError:                   # somebody else broke it: create again
            return None, "was broken by another run meanwhile"
        owner2, st2 = read_lease(broken)
        same = st2 is not None and (st2.st_dev, st2.st_ino) == seen.token \
            and (owner2 or {}).get("run_id") == (seen.owner or {}).get("run_id")
        if not same or leases.stale_reason(owner2, st2.st_mtime, time.time(), lease_s) is None:
            try:
                fsops.link(broken, path)            # restore the live lease
            except FileNotFoundError:               # removed meanwhile by the new holder
                return None, None
            except FileExistsError:
                log.warning("lease %s was re-taken while being restored; %s is kept", path, broken)
                return None, None
            fsops.unlink(broken, missing_ok=True)
            return None, None
        log.warning("breaking stale lease %s of %s", path, owners.describe(seen.owner))
        fsops.unlink(broken, missing_ok=True)
        return None, ""

    # -- heartbeat, fencing, release -------------------------------------------------------------
    def touch(self, name, token: Token, body: bytes) -> Token:
        try:
            fsops.utime(name, fd=token.fd)      # by name when no descriptor is kept (gone: lost)
        except OSError as e:
            if e.errno in TRANSIENT_ERRNOS:
                raise
            raise LeaseLost(str(e)) from e
        return token

    def holds(self, name, token: Token) -> bool:
        owner, st = read_lease(name)
        return st is not None and owner is not None and owner.get("run_id") == token.run_id \
            and (st.st_dev, st.st_ino) == token.ident

    verify = holds

    def remove(self, name, token: Token) -> None:
        """Remove the lease file only while it is ours, by a rename that decides (module docstring);
        the descriptor is closed in any case."""
        try:
            if self.holds(name, token):
                self._remove_own(Path(name), token)
        finally:
            if token.fd is not None:
                os.close(token.fd)
            if self.tidy:
                fsops.rmdir_if_empty(Path(name).parent)

    def _remove_own(self, path: Path, token: Token) -> None:
        aside = path.with_name(f"{path.name}{RELEASE_TAG}{uuid.uuid4().hex}")
        try:
            fsops.rename(path, aside)               # the deciding step: whatever is there now
        except FileNotFoundError:
            return                                  # broken and not re-taken: nothing to remove
        _, st = read_lease(aside)
        if st is not None and (st.st_dev, st.st_ino) == token.ident:
            fsops.unlink(aside, missing_ok=True)    # ours: the lease is gone
            return
        if st is None:
            return                                  # removed meanwhile by the next owner's recovery
        log.warning("lease %s was broken and re-taken while run %s released it; putting it back", path,
                    token.run_id)
        try:
            fsops.link(aside, path)                 # restore the other owner's live lease
        except FileNotFoundError:
            return
        except FileExistsError:                     # a third writer took the free name
            log.warning("lease %s was re-taken while being restored; %s is kept", path, aside)
            return
        except OSError as e:
            if e.errno not in fsops._LINK_FALLBACK:
                raise
            # no hard links: a rename back could replace a lease created meanwhile, so the other
            # owner is left fenced (it fails cleanly) rather than risking two owners
            log.warning("lease %s cannot be put back without hard links; %s is kept", path, aside)
            return
        fsops.unlink(aside, missing_ok=True)


def lease_file(path, run_id: str, role: str = leases.WRITER_LOCK, *, lease_s: float = 120.0,
               heartbeat_s: float | None = None, cache_name: str | None = None, file_mode: int = 0o644,
               parent_mode: int | None = None, tidy: bool = False, extra: dict | None = None) -> leases.Lease:
    """A lease (not yet acquired) stored as the file ``path``."""
    name = cache_name or Path(path).name.split(".", 1)[0]
    medium = LeaseFiles(file_mode=file_mode, parent_mode=parent_mode, tidy=tidy, cache_name=name)
    return leases.Lease(medium, Path(path), run_id, role, lease_s=lease_s, heartbeat_s=heartbeat_s,
                        cache_name=name, extra=extra)


def status(path, lease_s: float = 120.0) -> dict:
    """{"state": "free" | "live" | "stale", "owner": dict|None, "reason": str|None} of a lease file
    (a read-only look; a name that is not a regular file is stale with that reason)."""
    owner, st = read_lease(path)
    if st is None:
        return {"state": "free", "owner": None, "reason": None}
    if not stat.S_ISREG(st.st_mode):
        return {"state": "stale", "owner": None, "reason": "not a regular file (not a lease SeedReuse wrote)"}
    reason = leases.stale_reason(owner, st.st_mtime, time.time(), lease_s)
    return {"state": "stale" if reason else "live", "owner": owner, "reason": reason}


def break_stale(path, lease_s: float) -> str | None:
    """Remove the lease file ``path`` when it is stale (the safe take-over: one breaker wins, a
    file that turned fresh is put back); returns why, or None when it is live, gone or not a file."""
    owner, st = read_lease(path)
    if st is None or not stat.S_ISREG(st.st_mode):
        return None
    reason = leases.stale_reason(owner, st.st_mtime, time.time(), lease_s)
    if reason is None:
        return None
    _, note = LeaseFiles().take_over(path, Seen(owner, st.st_mtime, (st.st_dev, st.st_ino)), b"", lease_s)
    return reason if note is not None else None
