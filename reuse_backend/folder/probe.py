"""``probe(root, peer=None)``: can the store run safely on this filesystem?

Checks every primitive the store depends on, on the real mount, in a scratch folder that is
removed afterwards:

* O_EXCL create (the lock's and every temp file's exclusivity);
* hard links and the link count (the lock is created by link(2));
* stable inode numbers (twice, fstat vs lstat, across a rename, both names of a hard link):
  fencing compares (st_dev, st_ino);
* rename of a directory to a free name, and refused over a non-empty directory (the commit);
* fsync of a file and of an O_DIRECTORY fd (durability of every step);
* O_DIRECTORY fd + dir_fd opens after a rename (a reader pins one version);
* mtime resolution (the heartbeat; 1-second resolution is fine, see lock.MTIME_SLACK_S).

With ``peer`` (another mount of the same folder, e.g. the same volume mounted by a second
FUSE client) it also checks what another host sees: a directory renamed on ``root`` is seen
under its new name on ``peer`` at once (else a reader there opens the previous version after
a commit), O_EXCL across the two mounts, the link count and mtime seen on the peer, and
whether an fd opened on the peer keeps reading a file replaced on ``root``.

The verdict is "unsafe" when any check is "unsafe"; "unsupported" items have a fallback.
What a probe cannot prove: a race it did not hit. It runs each check a few times, not for
hours; the cross-host soak (tests/shared_fs) is the longer test.
"""
from __future__ import annotations

import errno
import os
import shutil
import time
import uuid
from pathlib import Path

from ..storage import fsops
from ..store.check import ProbeReport
from . import filesystems

# What another host must see "at once". A filesystem without client-side metadata caches answers
# from the server (measured: 0.00-0.03 s on CephFS and GlusterFS strict, the rest is scheduling on
# a loaded machine); MooseFS's 1 s caches served stale entries for up to 0.41 s in one sample and
# stock GlusterFS for ~1 s, and either was enough to serve the previous version after a commit.
# 0.2 s separates the two with room for a busy 2-core machine; five rounds per check.
VISIBLE_WITHIN_S = 0.2


def _excl(path) -> bool:
    """True when an exclusive create of an existing name fails with EEXIST."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return True
    return False


def _local_checks(rep: ProbeReport, d: Path) -> None:
    fd = os.open(d / "x", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)
    rep.add("O_EXCL create", "ok" if _excl(d / "x") else "unsafe",
            "a second exclusive create of the same name fails with EEXIST")
    try:
        os.link(d / "x", d / "y")
        same = os.lstat(d / "x").st_ino == os.lstat(d / "y").st_ino
        nlink = os.lstat(d / "x").st_nlink
        rep.add("hard link", "ok" if same and nlink == 2 else "unsafe",
                f"both names have one inode: {same}; link count {nlink} (want 2)")
    except OSError as e:
        rep.add("hard link", "unsupported", f"link() -> {errno.errorcode.get(e.errno, e.errno)}: the lock "
                "falls back to O_EXCL create + write, and carried files are copied")
    st1, st2 = os.lstat(d / "x"), os.lstat(d / "x")
    fd = os.open(d / "x", os.O_RDONLY)
    fst = os.fstat(fd)
    os.close(fd)
    os.rename(d / "x", d / "x2")
    st3 = os.lstat(d / "x2")
    stable = st1.st_ino == st2.st_ino == fst.st_ino == st3.st_ino
    rep.add("stable inode numbers", "ok" if stable else "unsafe",
            f"lstat twice, fstat and after a rename: {st1.st_ino}, {st2.st_ino}, {fst.st_ino}, {st3.st_ino}"
            + ("" if stable else " (inode numbers per path, as on sshfs: fencing cannot work)"))
    (d / "v").mkdir()
    (d / "v" / "m").write_bytes(b"1")
    (d / "w").mkdir()
    (d / "w" / "m").write_bytes(b"2")
    try:
        os.rename(d / "w", d / "v")
        rep.add("rename over a non-empty directory refused", "unsafe", "rename() replaced a non-empty directory")
    except OSError as e:
        rep.add("rename over a non-empty directory refused", "ok" if e.errno in (errno.ENOTEMPTY, errno.EEXIST)
                else "note", f"rename() -> {errno.errorcode.get(e.errno, e.errno)}")
    dfd = os.open(d / "v", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(d / "v", d / "v.old")
        os.rename(d / "w", d / "v")
        fd = os.open("m", os.O_RDONLY, dir_fd=dfd)
        got = os.read(fd, 4)
        os.close(fd)
        rep.add("directory fd pins a renamed version", "ok" if got == b"1" else "unsafe",
                f"openat(dir fd of the renamed directory, 'm') read {got!r} (want b'1')")
        try:
            os.fsync(dfd)
            rep.add("fsync of a directory fd", "ok", "")
        except OSError as e:
            rep.add("fsync of a directory fd", "note" if e.errno in (errno.EINVAL, errno.EBADF) else "unsafe",
                    f"fsync(O_DIRECTORY fd) -> {errno.errorcode.get(e.errno, e.errno)} (tolerated: EINVAL/EBADF)")
    finally:
        os.close(dfd)
    fd = os.open(d / "v" / "m", os.O_RDWR)
    try:
        os.fsync(fd)
        rep.add("fsync of a file", "ok", "")
    finally:
        os.close(fd)
    ns = []
    for i in range(3):
        t = time.time_ns() - 10**9 + 123_456_789 + i
        os.utime(d / "v" / "m", ns=(t, t))
        ns.append(os.lstat(d / "v" / "m").st_mtime_ns % 10**9)
    coarse = all(n == 0 for n in ns)
    rep.add("mtime resolution", "note" if coarse else "ok",
            "whole seconds: the lock allows for it (stale only past lease + 1 s)" if coarse
            else "sub-second")


def _visible(path, want: bool, within: float) -> float | None:
    """Seconds until os.path.lexists(path) == want (polled), or None if not within ``within``."""
    t0 = time.monotonic()
    while True:
        if os.path.lexists(path) == want:
            return time.monotonic() - t0
        if time.monotonic() - t0 > within:
            return None
        time.sleep(0.01)


def _peer_checks(rep: ProbeReport, d: Path, p: Path, rounds: int = 5) -> None:
    if _visible(p, True, 10) is None:
        rep.add("peer sees the scratch folder", "unsafe", f"{p} did not appear within 10 s: is --peer "
                "a mount of the same folder?")
        return
    # directory renames (the commit): the new name at once, the old name gone at once
    worst_new, worst_old = 0.0, 0.0
    for i in range(rounds):
        (d / f"c{i}").mkdir()
        (d / f"c{i}" / "m").write_bytes(b"a")
        os.lstat(p / f"c{i}")                      # the peer looks the old name up (caches it)
        os.rename(d / f"c{i}", d / f"n{i}")
        a = _visible(p / f"n{i}", True, 5)
        b = _visible(p / f"c{i}", False, 5)
        worst_new = max(worst_new, a if a is not None else float("inf"))
        worst_old = max(worst_old, b if b is not None else float("inf"))
    ok = worst_new <= VISIBLE_WITHIN_S and worst_old <= VISIBLE_WITHIN_S
    # a file created here in a directory the peer has just read (its listing and a negative
    # lookup cached): the commit writes manifest.json into a staging directory the other host
    # may have listed, then renames that directory into place
    worst_entry = 0.0
    for i in range(rounds):
        (d / f"s{i}").mkdir()
        os.listdir(p / f"s{i}")
        os.path.lexists(p / f"s{i}" / "manifest.json")
        (d / f"s{i}" / "manifest.json").write_bytes(b"{}")
        os.rename(d / f"s{i}", d / f"t{i}")
        t = _visible(p / f"t{i}" / "manifest.json", True, 5)
        worst_entry = max(worst_entry, t if t is not None else float("inf"))
    rep.add("new file in a directory the peer has read, seen at once", "ok" if worst_entry <= VISIBLE_WITHIN_S
            else "unsafe", f"after <= {worst_entry:.2f} s (want <= {VISIBLE_WITHIN_S} s)"
            + ("" if worst_entry <= VISIBLE_WITHIN_S else ": the peer's cached listing or negative entry hides "
               "a just-committed manifest"))
    rep.add("directory rename seen by the peer at once", "ok" if ok else "unsafe",
            f"new name after <= {worst_new:.2f} s, old name gone after <= {worst_old:.2f} s "
            f"(want <= {VISIBLE_WITHIN_S} s; 'inf' = still stale after 5 s)"
            + ("" if ok else ": a reader on the peer opens the previous version after a commit"))
    (d / "e").write_bytes(b"")
    rep.add("O_EXCL across mounts", "ok" if _excl(p / "e") else "unsafe",
            "an exclusive create on the peer of a name created here fails with EEXIST")
    try:
        os.link(d / "e", d / "e2")
        t = _visible(p / "e2", True, 5)
        n = os.lstat(p / "e").st_nlink
        rep.add("link count seen by the peer", "ok" if n == 2 else "note",
                f"peer sees the link after {t:.2f} s, link count {n}" if t is not None else "link not seen")
    except OSError as e:
        rep.add("link count seen by the peer", "unsupported", f"link() -> {errno.errorcode.get(e.errno, e.errno)}")
    same = os.lstat(d / "e").st_ino == os.lstat(p / "e").st_ino
    rep.add("same inode number on both mounts", "ok" if same else "note",
            "fencing compares inode numbers seen on one mount only" if not same else "")
    (d / "r").write_bytes(b"old")
    fd = os.open(p / "r", os.O_RDONLY)
    try:
        (d / "r.new").write_bytes(b"new")
        os.replace(d / "r.new", d / "r")
        try:
            got = os.pread(fd, 8, 0)
            rep.add("peer fd survives a replace", "ok" if got == b"old" else "unsafe",
                    f"an fd opened on the peer before the replace read {got!r} (want b'old')")
        except OSError as e:
            rep.add("peer fd survives a replace", "unsafe",
                    f"reading it -> {errno.errorcode.get(e.errno, e.errno)}: a reader's pinned version "
                    "vanishes when another host commits")
    finally:
        e = fsops.close_read_only(fd)
    if e is not None:
        rep.add("peer fd closes after a replace", "note",
                f"close() -> {errno.errorcode.get(e.errno, e.errno)}: the flush of a file replaced on the other "
                "mount; the reader ignores it (a read-only descriptor loses nothing, fsops.close_read_only)")
    enoent, t_end = 0, time.monotonic() + 1.0
    k = 0
    while time.monotonic() < t_end:
        (d / f"r.{k}").write_bytes(b"x" * 64)
        os.replace(d / f"r.{k}", d / "r")
        k += 1
        try:
            os.close(os.open(p / "r", os.O_RDONLY))
        except FileNotFoundError:
            enoent += 1
    rep.add("opens on the peer during replaces", "ok" if enoent == 0 else "unsafe",
            f"{enoent} of {k} opens failed with ENOENT while this mount replaced the file")
    t = time.time() - 3600
    os.utime(d / "r", (t, t))
    lag = None
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5:
        if abs(os.lstat(p / "r").st_mtime - t) < 2:
            lag = time.monotonic() - t0
            break
        time.sleep(0.05)
    rep.add("mtime seen by the peer", "ok" if lag is not None and lag < 2 else "unsafe",
            f"after {lag:.2f} s" if lag is not None else "not within 5 s (the heartbeat would look stale)")


def probe(root, peer=None) -> ProbeReport:
    root = Path(root)
    rep = ProbeReport(str(root), str(peer) if peer else None, filesystems.describe(root))
    name = f".seedreuse-probe-{uuid.uuid4().hex[:12]}"
    d = root / name
    d.mkdir()
    try:
        # a step that fails outright is a finding, not a crash: the report names it and the
        # checks after it in the same group do not run
        groups = [("local checks", _local_checks, (rep, d))]
        if peer is not None:
            groups.append(("peer checks", _peer_checks, (rep, d, Path(peer) / name)))
        for group, checks, args in groups:
            try:
                checks(*args)
            except OSError as e:
                rep.add(group, "unsafe", f"a step failed with {errno.errorcode.get(e.errno, e.errno)} ({e}); "
                        "the rest of this group did not run")
        policy = filesystems.policy_problem(root)
        if policy:
            rep.add("filesystem policy", "unsafe", str(policy))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return rep
