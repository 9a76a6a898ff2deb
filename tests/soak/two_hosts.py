"""The soak across two simulated hosts sharing the cache folder through sshfs (not in CI: root,
network namespaces, FUSE and an sshd are needed).

    sudo tests/soak/run_two_hosts.sh [--requests 12] [--profile sshfs-strict|sshfs-default|bind|all] [--keep]
    (= .venv/bin/python -m tests.soak.two_hosts ...)

Layout (all names prefixed ``sr2h-``, removed again at the end)::

    root netns:  sshd on 10.231.1.1:2222 and 10.231.2.1:2222 (sftp of <base>/shared, the real folder)
    netns sr2h-a ("hostA", veth 10.231.1.2):  sshfs <- 10.231.1.1  mounted at <base>/mnt-hostA
    netns sr2h-b ("hostB", veth 10.231.2.2):  sshfs <- 10.231.2.1  mounted at <base>/mnt-hostB

Profiles: ``sshfs-strict`` (no client-side metadata caching), ``sshfs-default`` (sshfs 3.7
defaults) and ``bind`` (a control: a bind mount of the real folder per host, no sshd, so the
cross-host semantics run on a filesystem the store supports).

Each host has its own FUSE client (its own attribute / entry / directory caches) over the
one real folder. The sshfs clients run with ``nsenter --net`` only (the mount lives in the
root mount namespace, visible to every process); workers run as
``nsenter --net=<netns> unshare --uts sh -c 'hostname hostX && exec python main.py ...'`` with
SEEDREUSE_CACHE_ROOT on their host's mount, listening on the netns' veth address, and the
test process drives them over the veths. hostA runs two workers (one FUSE client shared by
two processes), hostB one.

Three stages:

1. ``probe``: the filesystem primitives the store relies on, exercised through the mounts
   (hard links, O_EXCL from both hosts, rename over an existing file / directory, fsync of a
   file and of a directory fd, openat relative to an O_DIRECTORY fd, whether a directory fd
   or a /proc/self/fd reopen pins a version that the other host renamed away, inode identity
   of hard links, cross-host visibility delay);
2. ``pack``: reuse_backend itself across the hosts (writer lock + commit on hostA, snapshot
   and load on hostB, lock contention and stale-lock handling across hosts);
3. ``soak``: tests/soak/soak.py with the three workers (reduced size), checked against the
   real folder: on a root the pack accepts, its mandatory phase (every fault kind, a resume, an
   extension of a finished take, a longest-valid-prefix resume, a resume from an older kept
   take) must all happen (assert_coverage); on a refused root every request must be refused.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.soak.soak import (REPO_ROOT, Soak, SoakConfig, assert_clean, assert_coverage, format_report)

from seedreuse_lab import graphs
from seedreuse_lab.worker import ComfyWorker, RunHandle, _quiet

import websocket

PREFIX = "sr2h"
SSH_PORT = 2222
PROFILES = {
    # sshfs 3.7 with no client-side metadata caching: every lookup / getattr goes to the server
    "sshfs-strict": ["dir_cache=no", "entry_timeout=0", "attr_timeout=0", "negative_timeout=0"],
    # sshfs 3.7 defaults: directory cache 20 s, kernel entry/attr caches 1 s
    "sshfs-default": [],
    # control: a bind mount of the real folder per host (one kernel, coherent, real inodes):
    # the cross-host semantics (hostnames, the lock's same-host logic, busy across hosts)
    # with a filesystem the store supports
    "bind": None,
}
# what the pack answers on a cache root it cannot lock (sshfs: no stable st_ino)
REFUSALS = ("without stable file identities", "is being written by")
REQUIRED_TOOLS = ("ip", "nsenter", "unshare", "sshfs", "/usr/sbin/sshd", "ssh-keygen", "fusermount3")


@dataclass
class SimHost:
    name: str        # hostname inside the UTS namespace
    netns: str
    root_ip: str     # veth end in the root netns (sshd listens here)
    ns_ip: str       # veth end inside the netns (workers listen here)
    mount: Path


def _sh(*cmd, check=True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], check=check, capture_output=True, text=True, **kw)


def is_mounted(path) -> bool:
    """From /proc/self/mounts (os.path.ismount misses a bind mount within one filesystem)."""
    target = os.path.realpath(path)
    try:
        with open("/proc/self/mounts") as f:
            return any(line.split()[1].replace("\\040", " ") == target for line in f)
    except OSError:
        return os.path.ismount(path)


def missing_tools() -> list[str]:
    return [t for t in REQUIRED_TOOLS if shutil.which(t) is None and not os.path.exists(t)]


class TwoHostEnv:
    """Network namespaces + veths + one sshd + one sshfs mount per simulated host."""

    def __init__(self, base: Path, profile: str = "sshfs-strict"):
        self.base = Path(base)
        self.profile = profile
        self.shared = self.base / "shared"
        self.ssh = self.base / "ssh"
        self.hosts = [SimHost("hostA", f"{PREFIX}-a", "10.231.1.1", "10.231.1.2", self.base / "mnt-hostA"),
                      SimHost("hostB", f"{PREFIX}-b", "10.231.2.1", "10.231.2.2", self.base / "mnt-hostB")]
        self.sshd: subprocess.Popen | None = None
        self.sshfs: dict[str, subprocess.Popen] = {}
        self._links: list[str] = []
        self._netns: list[str] = []

    # ---------------------------------------------------------------- setup / teardown
    def setup(self) -> "TwoHostEnv":
        if os.geteuid() != 0:
            raise RuntimeError("two_hosts needs root (network namespaces, FUSE mounts, sshd)")
        miss = missing_tools()
        if miss:
            raise RuntimeError(f"missing tools {miss}: apt-get install -y iproute2 sshfs openssh-server util-linux")
        self.shared.mkdir(parents=True, exist_ok=True)
        self.ssh.mkdir(parents=True, exist_ok=True)
        os.chmod(self.ssh, 0o700)
        try:
            self._network()
            if self.profile != "bind":
                self._start_sshd()
            for h in self.hosts:
                self._mount(h)
        except BaseException:
            self.teardown()
            raise
        return self

    def _network(self) -> None:
        for i, h in enumerate(self.hosts):
            root_if, ns_if = f"{PREFIX}{i}r", f"{PREFIX}{i}n"
            _sh("ip", "netns", "del", h.netns, check=False)      # leftovers of a crashed run
            _sh("ip", "link", "del", root_if, check=False)
            _sh("ip", "netns", "add", h.netns)
            self._netns.append(h.netns)
            _sh("ip", "link", "add", root_if, "type", "veth", "peer", "name", ns_if)
            self._links.append(root_if)
            _sh("ip", "link", "set", ns_if, "netns", h.netns)
            _sh("ip", "addr", "add", f"{h.root_ip}/24", "dev", root_if)
            _sh("ip", "link", "set", root_if, "up")
            _sh("ip", "netns", "exec", h.netns, "ip", "addr", "add", f"{h.ns_ip}/24", "dev", ns_if)
            _sh("ip", "netns", "exec", h.netns, "ip", "link", "set", ns_if, "up")
            _sh("ip", "netns", "exec", h.netns, "ip", "link", "set", "lo", "up")

    def _start_sshd(self) -> None:
        key, hostkey = self.ssh / "id_ed25519", self.ssh / "ssh_host_ed25519_key"
        if not key.exists():
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key)
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostkey)
        shutil.copyfile(f"{key}.pub", self.ssh / "authorized_keys")
        cfg = self.ssh / "sshd_config"
        cfg.write_text(textwrap.dedent(f"""\
            Port {SSH_PORT}
            {chr(10).join(f'ListenAddress {h.root_ip}' for h in self.hosts)}
            HostKey {hostkey}
            PidFile {self.ssh / 'sshd.pid'}
            AuthorizedKeysFile {self.ssh / 'authorized_keys'}
            PermitRootLogin prohibit-password
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            UsePAM no
            StrictModes no
            Subsystem sftp internal-sftp
            """))
        Path("/run/sshd").mkdir(exist_ok=True)
        self.sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
                                     stdout=open(self.ssh / "sshd.log", "ab"), stderr=subprocess.STDOUT)
        time.sleep(0.5)
        if self.sshd.poll() is not None:
            raise RuntimeError(f"sshd exited: {(self.ssh / 'sshd.log').read_text()[-2000:]}")

    def _mount(self, h: SimHost) -> None:
        h.mount.mkdir(parents=True, exist_ok=True)
        if self.profile == "bind":
            _sh("mount", "--bind", self.shared, h.mount)
            return
        opts = ["IdentityFile=" + str(self.ssh / "id_ed25519"), "StrictHostKeyChecking=no",
                "UserKnownHostsFile=/dev/null", "BatchMode=yes", "LogLevel=ERROR"] + PROFILES[self.profile]
        cmd = ["nsenter", f"--net=/run/netns/{h.netns}", "sshfs", "-f", "-p", str(SSH_PORT),
               "-o", ",".join(opts), f"root@{h.root_ip}:{self.shared}", str(h.mount)]
        log = open(self.base / f"sshfs-{h.name}.log", "ab")
        self.sshfs[h.name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not is_mounted(h.mount):
            if self.sshfs[h.name].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sshfs for {h.name} did not mount: "
                                   f"{(self.base / f'sshfs-{h.name}.log').read_text()[-2000:]}")
            time.sleep(0.1)

    def teardown(self) -> None:
        for h in self.hosts:
            if is_mounted(h.mount):
                if self.profile == "bind":
                    _sh("umount", "-l", h.mount, check=False)
                else:
                    _sh("fusermount3", "-u", "-z", h.mount, check=False)
            p = self.sshfs.pop(h.name, None)
            if p is not None:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
        if self.sshd is not None:
            self.sshd.terminate()
            try:
                self.sshd.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.sshd.kill()
            self.sshd = None
        for link in self._links:
            _sh("ip", "link", "del", link, check=False)
        for ns in self._netns:
            _sh("ip", "netns", "del", ns, check=False)
        self._links, self._netns = [], []

    def __enter__(self):
        return self.setup()

    def __exit__(self, *exc):
        self.teardown()

    def host_cmd(self, h: SimHost, argv: list[str]) -> list[str]:
        """argv run in h's network namespace with h's hostname (pid namespace shared)."""
        return ["nsenter", f"--net=/run/netns/{h.netns}", "unshare", "--uts", "sh", "-c",
                f'hostname {h.name} && exec "$@"', "sh"] + list(argv)

    def describe(self) -> str:
        if self.profile == "bind":
            return "2 simulated hosts (netns + UTS), each with a bind mount of the real folder"
        return (f"2 simulated hosts (netns + UTS), sshfs 3.7 profile '{self.profile}' "
                f"({','.join(PROFILES[self.profile]) or 'sshfs defaults'}), one sshd over veths")


# ---------------------------------------------------------------- stage 1: primitives

def probe_primitives(env: TwoHostEnv) -> list[dict]:
    """Each result: {name, status: ok | unsupported | unsafe | note, detail}."""
    A, B = env.hosts[0].mount, env.hosts[1].mount
    real = env.shared
    d = f"probe-{uuid.uuid4().hex[:8]}"
    for m in (real,):
        (m / d).mkdir()
    a, b, r = A / d, B / d, real / d
    out: list[dict] = []

    def rec(name, status, detail=""):
        out.append({"name": name, "status": status, "detail": detail})

    # hard links + inode identity (the lock's held() and the snapshot's ino checks use st_ino)
    (a / "f").write_bytes(b"x")
    try:
        os.link(a / "f", a / "g")
        same = os.lstat(a / "f").st_ino == os.lstat(a / "g").st_ino
        real_same = os.lstat(r / "f").st_ino == os.lstat(r / "g").st_ino
        fd = os.open(a / "f", os.O_RDONLY)
        fd_same = os.fstat(fd).st_ino == os.lstat(a / "g").st_ino
        os.close(fd)
        rec("hard link", "ok" if real_same else "unsafe", f"link() works (server: same inode {real_same})")
        rec("st_ino of two hard-linked names", "ok" if same and fd_same else "unsafe",
            f"same st_ino through the mount: {same}; fstat(fd of one name) == lstat(other name): {fd_same}"
            + ("" if same else " -> st_ino is per PATH, not per file (SFTP v3 carries no inode numbers; "
               "sshfs 3.7 has no use_ino): identity checks by (st_dev, st_ino) compare paths"))
    except OSError as e:
        rec("hard link", "unsupported", f"link() -> {e.errno} {os.strerror(e.errno)} (store falls back to copy)")

    # O_EXCL from both hosts, also with a stale negative entry on B
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    os.path.lexists(b / "x")                # B caches "x does not exist"
    fd = os.open(a / "x", flags, 0o644)
    os.close(fd)
    try:
        fd = os.open(b / "x", flags, 0o644)
        os.close(fd)
        rec("O_EXCL across hosts", "unsafe", "B created a file A had just created exclusively")
    except FileExistsError:
        rec("O_EXCL across hosts", "ok", "the second exclusive create fails with EEXIST (checked by the server)")

    # rename over an existing file, visibility on the other host
    (a / "r1").write_bytes(b"one")
    (a / "r2").write_bytes(b"two-two")
    b_before = os.lstat(b / "r2").st_size
    try:
        os.rename(a / "r1", a / "r2")
        ok = (r / "r2").read_bytes() == b"one" and not (r / "r1").exists()
        t0, seen = time.monotonic(), None
        while time.monotonic() - t0 < 30:
            if os.lstat(b / "r2").st_size == 3:
                seen = time.monotonic() - t0
                break
            time.sleep(0.05)
        rec("rename over an existing file", "ok" if ok else "unsafe",
            f"atomic replace on the server: {ok}; B saw the new size after "
            + (f"{seen:.2f} s" if seen is not None else "> 30 s") + f" (had {b_before} bytes cached)")
    except OSError as e:
        rec("rename over an existing file", "unsupported", f"{e.errno} {os.strerror(e.errno)}")

    # directory rename to a free name (the commit's renames) and over an existing empty dir
    (a / "v").mkdir()
    (a / "v" / "m").write_bytes(b"1")
    (a / "v.tmp").mkdir()
    (a / "v.tmp" / "m").write_bytes(b"2")
    dfd_b = os.open(b / "v", os.O_RDONLY | os.O_DIRECTORY)      # a reader on B pins version 1
    ffd_b = os.open(b / "v" / "m", os.O_RDONLY)                  # and one of its files
    os.rename(a / "v", a / "v.old")
    os.rename(a / "v.tmp", a / "v")
    shutil.rmtree(a / "v.old")
    try:
        via_dirfd = os.read(fd2 := os.open("m", os.O_RDONLY, dir_fd=dfd_b), 10)
        os.close(fd2)
        rec("directory fd pins a version renamed away by the other host",
            "ok" if via_dirfd == b"1" else "unsafe",
            f"openat(B's dir fd of the old version, 'm') read {via_dirfd!r} (version 1 = b'1')"
            + ("" if via_dirfd == b"1" else " -> sshfs resolves by path: a dir fd follows the NAME "
               "to the new version, so file opens after the manifest read can mix versions"))
    except OSError as e:
        rec("directory fd pins a version renamed away by the other host", "note",
            f"openat via the stale dir fd -> {e.errno} {os.strerror(e.errno)} (a reader would retry)")
    got = os.pread(ffd_b, 10, 0)
    rec("an fd opened before the other host replaced the version, after this host opened the new "
        "file by the same name", "ok" if got == b"1" else "unsafe",
        f"read {got!r} (old content b'1')" + ("" if got == b"1" else
        " -> one kernel inode (and page cache) per PATH: once the name is opened again on this host, "
        "reads through the old fd return the new file's pages"))
    try:
        re = os.open(f"/proc/self/fd/{ffd_b}", os.O_RDONLY)
        got = os.pread(re, 10, 0)
        same_ino = os.fstat(re).st_ino == os.fstat(ffd_b).st_ino
        os.close(re)
        rec("/proc/self/fd reopen of a file the other host replaced",
            "ok" if got == b"1" else ("unsafe" if same_ino else "note"),
            f"reopen read {got!r} (old content b'1'); st_ino equal to the original fd: {same_ino}"
            + (" -> a reopen would read the NEW file; Snapshot.open_file reads the pinned fd instead"
               if got != b"1" and same_ino else ""))
    except OSError as e:
        rec("/proc/self/fd reopen of a file the other host replaced", "note",
            f"{e.errno} {os.strerror(e.errno)} (Snapshot.open_file never reopens: it reads the pinned fd)")
    os.close(ffd_b)
    os.close(dfd_b)
    (a / "p").write_bytes(b"1111")
    pfd = os.open(b / "p", os.O_RDONLY)
    os.rename(a / "p", a / "p.old")
    (a / "p").write_bytes(b"2222")
    os.unlink(a / "p.old")
    got = os.pread(pfd, 10, 0)
    os.close(pfd)
    rec("an fd pins its file when the other host renames / removes it (name not reopened here)",
        "ok" if got == b"1111" else "unsafe", f"read {got!r} (old content b'1111'; the sftp handle keeps the file)")
    (a / "e1").mkdir()
    (a / "e2").mkdir()
    try:
        os.rename(a / "e1", a / "e2")
        rec("rename a directory over an existing empty directory", "ok", "")
    except OSError as e:
        rec("rename a directory over an existing empty directory", "note",
            f"{e.errno} {os.strerror(e.errno)} (the store never does this: its targets never exist)")

    # fsync of a file and of a directory fd; openat relative to an O_DIRECTORY fd
    fd = os.open(a / "s", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"sync")
    try:
        os.fsync(fd)
        rec("fsync(file)", "ok", "returns success" + ("" if env.profile == "bind" else
                                                       " (sent to the server as fsync@openssh.com)"))
    except OSError as e:
        rec("fsync(file)", "unsupported", f"{e.errno} {os.strerror(e.errno)}")
    os.close(fd)
    dfd = os.open(a, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
        rec("fsync(directory fd)", "ok" if env.profile == "bind" else "note", "returns success" + (
            "" if env.profile == "bind" else "; sshfs implements no fsyncdir (the kernel then reports success): "
            "a rename is as durable as the server makes it (internal-sftp never fsyncs a directory)"))
    except OSError as e:
        rec("fsync(directory fd)", "note", f"{e.errno} {os.strerror(e.errno)} (fsops tolerates EINVAL/EBADF only)")
    try:
        fd = os.open("s", os.O_RDONLY, dir_fd=dfd)
        os.close(fd)
        rec("openat relative to an O_DIRECTORY fd", "ok", "")
    except OSError as e:
        rec("openat relative to an O_DIRECTORY fd", "unsupported", f"{e.errno} {os.strerror(e.errno)}")
    try:
        os.utime(dfd := os.open(a / "s", os.O_RDONLY), None)
        os.close(dfd)
        rec("futimens (lock heartbeat)", "ok", "")
    except OSError as e:
        rec("futimens (lock heartbeat)", "unsupported", f"{e.errno} {os.strerror(e.errno)}")
    finally:
        pass
    shutil.rmtree(r, ignore_errors=True)
    return out


# ---------------------------------------------------------------- stage 2: the backend across hosts

_PACK_SCRIPT = r"""
import json, os, sys, time
import torch
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
from reuse_backend.errors import ReuseError
root, name, action = sys.argv[1], sys.argv[2], sys.argv[3]
c = FolderCache(root, name)
out = {{"host": os.uname().nodename}}
try:
    if action == "commit":
        tx = c.begin(RunInfo())
        out["lock_held_after_begin"] = tx.lease.held()
        tx.stage_slot("x", torch.arange(int(sys.argv[4]), dtype=torch.float32), key={{"n": int(sys.argv[4])}})
        out["version"] = tx.commit()
    elif action == "read":
        s = c.snapshot()
        out["version"] = s and s.version
        out["n"] = s and int(s.load_slot("x", verify=True).numel())
        s and s.close()
    elif action == "hold":          # take the lock and die without releasing it
        tx = c.begin(RunInfo())
        out["locked"] = True
        print(json.dumps(out), flush=True)
        os._exit(0)
except ReuseError as e:
    out["error"] = type(e).__name__ + ": " + e.message
print(json.dumps(out), flush=True)
"""


def pack_probe(env: TwoHostEnv) -> list[dict]:
    """reuse_backend across the two hosts, in processes with each host's hostname."""
    script = env.base / "pack_probe.py"
    script.write_text(_PACK_SCRIPT.format())   # {{ }} escapes only
    A, B = env.hosts
    name = f"probe{uuid.uuid4().hex[:6]}"

    def run(h, *args):
        p = _sh(*env.host_cmd(h, [sys.executable, str(script), str(h.mount), name, *args]), check=False,
                timeout=120, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        try:
            return json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return {"error": f"rc={p.returncode}: {p.stderr[-800:]}"}

    out = []
    r1 = run(A, "commit", "10")
    out.append({"name": "begin + stage + commit on hostA", "status": "ok" if "version" in r1 else "fails",
                "detail": json.dumps(r1)})
    t0 = time.monotonic()
    r2 = run(B, "read")
    out.append({"name": "snapshot + load on hostB", "status": "ok" if r2.get("version") == r1.get("version")
                and r2.get("n") == 10 else "stale-or-fails", "detail": json.dumps(r2)})
    r3 = run(A, "commit", "20")
    r4 = run(B, "read")
    out.append({"name": "hostB reads hostA's second commit at once",
                "status": "ok" if r4.get("version") == r3.get("version") and r4.get("n") == 20 else "stale-or-fails",
                "detail": f"A committed {r3.get('version')}; B read {json.dumps(r4)} "
                          f"({time.monotonic() - t0:.1f} s after the first read)"})
    r5 = run(A, "hold")
    r6 = run(B, "commit", "30")
    out.append({"name": "hostB vs a dead writer's lock from hostA",
                "status": "ok" if "CacheBusyError" in r6.get("error", "") else "unexpected",
                "detail": f"A took the lock and died ({json.dumps(r5)}); B: {json.dumps(r6)} "
                          "(only the lease, 120 s, can expire a lock of another host)"})
    r7 = run(A, "commit", "40")
    out.append({"name": "hostA breaks its own dead writer's lock", "status": "ok" if "version" in r7 else "fails",
                "detail": json.dumps(r7)})
    return out


# ---------------------------------------------------------------- stage 3: the soak

class NetnsWorker(ComfyWorker):
    """A ComfyUI worker inside one simulated host (netns + hostname)."""

    def __init__(self, name, base_dir, *, env_: TwoHostEnv, host: SimHost, **kw):
        super().__init__(name, base_dir, **kw)
        self.two_env, self.sim = env_, host

    @property
    def url(self) -> str:
        return f"http://{self.sim.ns_ip}:{self.port}"

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listen") + 1] = self.sim.ns_ip
        return self.host_command(cmd)

    def host_command(self, argv: list[str]) -> list[str]:
        """argv run as a process of this worker's host: its network namespace and hostname, the
        pid namespace shared (so a lease of a dead worker of this host is provably dead there)."""
        return self.two_env.host_cmd(self.sim, argv)

    def start_run(self, prompt: dict, *, extra_data: dict | None = None) -> RunHandle:
        client_id = uuid.uuid4().hex
        ws = websocket.create_connection(f"ws://{self.sim.ns_ip}:{self.port}/ws?clientId={client_id}", timeout=30)
        prompt_id = str(uuid.uuid4())
        t0 = time.monotonic()
        try:
            self.queue(prompt, client_id, prompt_id=prompt_id, extra_data=extra_data)
        except BaseException:
            ws.close()
            raise
        return RunHandle(self, ws, prompt_id, client_id, t0)


class TwoHostFleet:
    def __init__(self, env: TwoHostEnv, base: Path, models_dir: Path, per_host=(2, 1)):
        self.env = env
        self.cache_root = env.shared / "cache"          # the real folder (checks run here)
        self.cache_root.mkdir(parents=True, exist_ok=True)
        self.workers: list[NetnsWorker] = []
        for h, n in zip(env.hosts, per_host):
            for i in range(n):
                self.workers.append(NetnsWorker(
                    f"{h.name}-w{i}", base / f"{h.name}-w{i}", env_=env, host=h, models_dir=models_dir,
                    env={"SEEDREUSE_CACHE_ROOT": str(h.mount / "cache")}))

    def start(self) -> "TwoHostFleet":
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(len(self.workers)) as ex:
            list(ex.map(lambda w: w.start(), self.workers))
        for w in self.workers:
            graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
        return self

    def stop(self) -> None:
        for w in self.workers:
            _quiet(w.stop)

    def host_of(self, w) -> str:
        return w.sim.name

    def restart(self, w) -> None:
        w.start()

    def describe(self) -> str:
        return (f"{len(self.workers)} workers on 2 simulated hosts "
                f"({', '.join(f'{w.name}@{w.sim.ns_ip}' for w in self.workers)}); {self.env.describe()}")


def run_profile(base: Path, profile: str, requests: int, seed: int, models_dir: Path, log=print) -> dict:
    base.mkdir(parents=True, exist_ok=True)
    env = TwoHostEnv(base, profile)
    result: dict = {"profile": profile, "options": PROFILES[profile]}
    with env:
        log(f"== profile '{profile}': mounts {[str(h.mount) for h in env.hosts]} over {env.shared}")
        result["primitives"] = probe_primitives(env)
        for p in result["primitives"]:
            log(f"  [{p['status']:11s}] {p['name']}: {p['detail']}")
        result["pack"] = pack_probe(env)
        for p in result["pack"]:
            log(f"  [{p['status']:11s}] {p['name']}: {p['detail']}")
        refused = result["pack"][0]["status"] != "ok"
        result["pack_refuses_this_root"] = refused
        if refused:
            log(f"  the pack cannot commit on this root: the soak now checks that every request is refused "
                f"({' / '.join(REFUSALS)}) and nothing is ever published")
        fleet = TwoHostFleet(env, base / "workers", models_dir)
        t0 = time.monotonic()
        try:
            fleet.start()
            log(f"  started {len(fleet.workers)} workers in {time.monotonic() - t0:.1f} s")
            cfg = SoakConfig(requests=requests, seed=seed, kill=0.2, min_each=1,
                             expect_refused=REFUSALS if refused else ())
            soak = Soak(fleet, cfg, base / "soak", log=lambda *a: log("  " + " ".join(str(x) for x in a)))
            r = soak.run()
            r["refusal_mode"] = refused
        finally:
            fleet.stop()
        result["soak"] = r
        log(format_report(r))
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.soak.two_hosts", description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=12)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--profile", choices=list(PROFILES) + ["all"], default="all")
    ap.add_argument("--base-dir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    from seedreuse_lab import tiny_models as tm
    base = a.base_dir or Path(tempfile.mkdtemp(prefix="seedreuse-2hosts-"))
    models = tm.ensure_tiny_models().link_models_dir(base / "models")
    results, ok = [], True
    for prof in (list(PROFILES) if a.profile == "all" else [a.profile]):
        try:
            res = run_profile(base / prof, prof, a.requests, a.seed, models)
            try:
                assert_clean(res["soak"], min_requests=min(a.requests, 1))
                if not res["pack_refuses_this_root"]:
                    assert_coverage(res["soak"])
                res["verdict"] = "clean"
            except AssertionError as e:
                res["verdict"] = f"FAILED: {str(e).splitlines()[0]}"
                ok = False
        except Exception as e:  # noqa: BLE001 - report and go on with the next profile
            res = {"profile": prof, "verdict": f"ERROR: {type(e).__name__}: {e}"}
            ok = False
        results.append(res)
        print(f"== profile {prof}: {res['verdict']}", flush=True)
    (base / "two-hosts-report.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"report: {base / 'two-hosts-report.json'}")
    left = [str(p) for p in base.rglob("mnt-host*") if is_mounted(p)]
    if left:     # never delete through a mount that is still there
        print(f"still mounted, base dir kept: {left}", file=sys.stderr)
        return 1
    if ok and not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    sys.exit(main())
