"""Which filesystem a cache root is on, and whether the store may run there (checked at first use).

Decided per filesystem from measurement (docs/SHARED_FILESYSTEMS.md; ``python -m reuse_backend
probe ROOT --peer OTHER_MOUNT`` runs the full check):

* local disks, tmpfs, CephFS, GlusterFS with the strict option set: supported;
* GlusterFS with its stock options: refused. Another host kept resolving a renamed directory's
  old name (the previous version) for 42 s to over 60 s after a commit. The client options are
  read from the local FUSE client's command line and the volume options from the translators
  of its client graph (its log); what cannot be verified is refused with the fix;
* MooseFS: supported with every client metadata cache off (mfsmount -o mfsattrcacheto=0,
  mfsentrycacheto=0,mfsdirentrycacheto=0,mfsnegentrycacheto=0); refused with the defaults: a host
  was served "manifest.json is missing" for a just-committed version for up to 0.41 s
  (docs/shared-fs/moosefs.md), where the cache-free mount ran the same soak clean. The options
  are read from the mount's ``.params`` meta file. Where the platform mounts MooseFS and its
  options cannot be changed (RunPod network volumes), the refusal's fix names the object store
  (``SEEDREUSE_CACHE_URL=s3://bucket/prefix``) with an example;
* JuiceFS: refused. While another host replaces or removes a file, opens fail with ENOENT, also
  on fds opened before, so a reader can fail in the middle of a load while another host commits;
* sshfs/SFTP: refused (inode numbers are per path; the lock's identity check also catches it).

``SEEDREUSE_TRUSTED_FILESYSTEM=<fstype>`` (e.g. ``fuse.glusterfs``) lifts a refusal for that type,
for an operator who has run the probe with ``--peer`` on that volume and got "safe".
What this does not cover: a filesystem it does not recognise is allowed (local semantics
assumed); run the probe on it.
"""
from __future__ import annotations

import os
import re
import threading

from .. import settings
from ..errors import UnsupportedFilesystemError



class Refusal(str):
    """Why the store must not run on a filesystem (the string: ``why; fix``), with the fix kept
    whole in ``.fix`` for the error a user sees (a fix may itself contain ``;``)."""

    def __new__(cls, why: str, fix: str):
        self = super().__new__(cls, f"{why}; {fix}")
        self.why, self.fix = why, fix
        return self

    def __getnewargs__(self):          # copy, deepcopy and pickle rebuild it from both parts
        return self.why, self.fix

GLUSTER_CLIENT_FLAGS = ("--entry-timeout=0", "--attribute-timeout=0", "--negative-timeout=0",
                        "--fopen-keep-cache=false")
MOOSEFS_CLIENT_OPTIONS = ("mfsattrcacheto=0", "mfsentrycacheto=0", "mfsdirentrycacheto=0", "mfsnegentrycacheto=0")
GLUSTER_VOLUME_OPTIONS = ("performance.stat-prefetch", "performance.open-behind", "performance.quick-read",
                          "performance.write-behind", "performance.io-cache", "performance.read-ahead",
                          "performance.readdir-ahead")
# translators that those volume options remove from the client graph when set to off
_GLUSTER_CACHING_XLATORS = ("performance/md-cache", "performance/open-behind", "performance/quick-read",
                            "performance/write-behind", "performance/io-cache", "performance/read-ahead",
                            "performance/readdir-ahead", "performance/nl-cache")
_checked: dict[tuple, str | None] = {}
_mounts: dict[tuple, tuple[str, str, str]] = {}   # (root, st_dev) -> mount_of(root)
_guard = threading.Lock()


def _unescape(s: str) -> str:
    """/proc/self/mountinfo escapes space, tab, newline, '#' and backslash as \\ooo (octal)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mount_of(path) -> tuple[str, str, str]:
    """(mount point, fstype, source) of the mount holding ``path`` (from /proc/self/mountinfo)."""
    real = os.path.realpath(path)
    best = ("/", "unknown", "")
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return best
    for line in lines:
        left, _, right = line.partition(" - ")
        parts, rparts = left.split(), right.split()
        if len(parts) < 5 or len(rparts) < 2:
            continue
        mp = _unescape(parts[4])
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best[0]):
            best = (mp, rparts[0], _unescape(rparts[1]))
    return best


def describe(path) -> str:
    mp, fstype, source = mount_of(path)
    return f"{fstype} ({source} on {mp})"


def _fuse_client_cmdline(mountpoint: str, program: str) -> list[str] | None:
    """argv of the local FUSE client process serving ``mountpoint`` (FUSE daemons run on the
    host that mounts), or None when it is not visible from here (another pid namespace)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == program and \
                any(os.path.realpath(a) == os.path.realpath(mountpoint) for a in argv[1:]):
            return argv
    return None


def _gluster_log(argv: list[str], mountpoint: str) -> str | None:
    for a in argv:
        if a.startswith("--log-file="):
            return a.split("=", 1)[1]
    for i, a in enumerate(argv[:-1]):
        if a in ("-l", "--log-file"):
            return argv[i + 1]
    name = mountpoint.strip("/").replace("/", "-")
    return f"/var/log/glusterfs/{name}.log"


def _gluster_problem(mountpoint: str) -> Refusal | None:
    fix = ("mount it with the strict option set: volume options " + ", ".join(f"{o} off" for o in
           GLUSTER_VOLUME_OPTIONS) + "; client options " + " ".join(GLUSTER_CLIENT_FLAGS) +
           " (start the glusterfs client with them), or use a local disk or an object store "
           "(SEEDREUSE_CACHE_URL=s3://bucket/prefix)")
    argv = _fuse_client_cmdline(mountpoint, "glusterfs")
    if argv is None:
        return Refusal(f"cannot see the GlusterFS client of {mountpoint} from here, so its options cannot be "
                       f"verified (once `python -m reuse_backend probe` with --peer says safe, "
                       f"{settings.TRUSTED_FILESYSTEM}=fuse.glusterfs lifts this)", fix)
    missing = [flag for flag in GLUSTER_CLIENT_FLAGS if flag not in argv]
    if missing:
        return Refusal(f"GlusterFS client options {missing} are not set for {mountpoint}: with client caching "
                       "another host can read the previous version for up to a minute after a commit", fix)
    log = _gluster_log(argv, mountpoint)
    try:
        with open(log, errors="replace") as f:
            text = f.read()[-4_000_000:]
    except OSError:
        return Refusal(f"cannot read the GlusterFS client log {log} to verify the volume options (once "
                       f"`python -m reuse_backend probe` with --peer says safe, {settings.TRUSTED_FILESYSTEM}=fuse.glusterfs "
                       "lifts this)", fix)
    graph = text.rsplit("Final graph:", 1)
    if len(graph) < 2:
        return Refusal(f"no client graph in the GlusterFS client log {log} to verify the volume options", fix)
    present = sorted(x for x in _GLUSTER_CACHING_XLATORS if f"type {x}" in graph[1])
    if present:
        return Refusal(f"the GlusterFS volume behind {mountpoint} keeps caching translators {present} (stock "
                       "volume options): another host can read the previous version after a commit", fix)
    return None


def _moosefs_params(mountpoint: str) -> dict | None:
    """The running mount's parameters from MooseFS's ``<mount>/.params`` meta file (mfsmount
    rewrites its own command line, so that is where they can be read), or None."""
    try:
        fd = os.open(os.path.join(mountpoint, ".params"), os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        data = os.read(fd, 1 << 16).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    out = {}
    for line in data.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out or None


def _moosefs_problem(mountpoint: str) -> Refusal | None:
    fix = ("mount it with every metadata cache off (mfsmount -o " + ",".join(MOOSEFS_CLIENT_OPTIONS) +
           "), or, where the platform mounts it and its options cannot be changed (RunPod network volumes), "
           "put the cache in an object store: SEEDREUSE_CACHE_URL=s3://bucket/prefix (docs/OBJECT_STORAGE.md), "
           "or use a local disk")
    params = _moosefs_params(mountpoint)
    if params is None:
        return Refusal(f"cannot read {mountpoint}/.params, so the MooseFS mount options cannot be verified (once "
                       f"`python -m reuse_backend probe` with --peer says safe, {settings.TRUSTED_FILESYSTEM}=<fstype> lifts "
                       "this)", fix)
    missing = []
    for opt in MOOSEFS_CLIENT_OPTIONS:
        name = opt.split("=", 1)[0]
        try:
            if float(params.get(name, "nan")) != 0.0:
                missing.append(opt)
        except ValueError:
            missing.append(opt)
    if missing:
        return Refusal(f"MooseFS client options {missing} are not set for {mountpoint}: with its metadata caches "
                       "a host was served a just-committed version without its manifest for up to half a second",
                       fix)
    return None


def _is_moosefs(fstype: str, source: str) -> bool:
    return fstype in ("fuse.mfs", "fuse.moosefs", "fuse.mfsmount") or \
        (fstype == "fuse" and source.startswith("mfs#"))


def policy_problem(path) -> Refusal | None:
    """Why the store must not run on ``path``'s filesystem, or None."""
    mp, fstype, source = mount_of(path)
    if settings.trusted_filesystem() == fstype:
        return None
    if _is_moosefs(fstype, source):
        return _moosefs_problem(mp)
    if fstype == "fuse.sshfs":
        return Refusal("sshfs/SFTP has no stable inode numbers (they are per path), so a writer cannot tell "
                       "whether the lock and staging are still its own", "use a local disk, a supported shared "
                       "filesystem (CephFS, MooseFS, GlusterFS with the strict options) or an object store "
                       "(SEEDREUSE_CACHE_URL=s3://bucket/prefix)")
    if fstype == "fuse.juicefs":
        return Refusal("JuiceFS fails opens with ENOENT while another host replaces or removes a file, also on "
                       "fds opened before, so a reader can fail in the middle of a load during another host's "
                       "commit", "use CephFS, MooseFS, GlusterFS with the strict options, an object store "
                       "(SEEDREUSE_CACHE_URL=s3://bucket/prefix; JuiceFS itself stores its data in one), or a "
                       "local disk")
    if fstype == "fuse.glusterfs":
        return _gluster_problem(mp)
    return None


def check_root(root) -> None:
    """Refuse an unsafe cache root (UnsupportedFilesystemError), once per mount per process.

    Called for every snapshot and transaction: the mount lookup (a read of /proc/self/mountinfo)
    is remembered per (root, st_dev of root), so a remount of another filesystem there, which
    changes st_dev, is looked up again."""
    try:
        mkey = (os.path.realpath(root), os.stat(root).st_dev)
    except OSError:
        mkey = None
    with _guard:
        hit = _mounts.get(mkey) if mkey else None
    if hit is None:
        hit = mount_of(root)
        if mkey:
            with _guard:
                _mounts[mkey] = hit
    mp, fstype, source = hit
    key = (mp, fstype, source, settings.trusted_filesystem())
    with _guard:
        if key not in _checked:
            _checked[key] = policy_problem(root)
        problem = _checked[key]
    if problem:
        raise UnsupportedFilesystemError(
            f"the cache root {root} is on {fstype} ({source}), where the store cannot run safely: {problem}",
            expected="a local disk, CephFS, MooseFS or GlusterFS with the strict option set",
            actual=f"{fstype} at {mp}",
            fix=problem.fix,
            details={"root": str(root), "filesystem": fstype, "mountpoint": mp, "source": source})


def reset_cache() -> None:
    """Forget the per-mount decisions (tests, or after remounting)."""
    with _guard:
        _checked.clear()
        _mounts.clear()


