"""A real Ceph RADOS Gateway (S3) for the object-store tier: one mon, one OSD, one radosgw.

Debian's packages (``radosgw``, ``ceph-mon``, ``ceph-osd``: Ceph 16.2), installed by ``install()``
when missing (root + apt-get). The cluster runs from a private folder: cephx keys generated
there, BlueStore on a sparse 4 GiB file, pools of size 1, the gateway (``beast``) on a free port
of ``ip``. ``runner`` starts the daemons: the local machine (loopback), or a server network
namespace of tests/shared_fs/env.py for tests with two simulated hosts. ``stop()`` kills every
daemon it started and removes the folder.

    with RGW(tmp) as gw:
        os.environ.update(gw.env())        # AWS_ENDPOINT_URL_S3, keys, region (botocore's settings)
        gw.bucket("tier")                  # -> "s3://tier"
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import textwrap
import time
import uuid
from pathlib import Path

PACKAGES = ("radosgw", "ceph-mon", "ceph-osd")
BINARIES = ("radosgw", "radosgw-admin", "ceph-mon", "ceph-osd", "ceph", "ceph-authtool", "monmaptool")
ACCESS, SECRET = "seedreuse-test-access", "seedreuse-test-secret-key-0123456789"


class RGWError(RuntimeError):
    pass


def missing() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not os.access(f"/usr/bin/{b}", os.X_OK)]


def install(log=print) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    t0 = time.monotonic()
    log(f"[rgw] apt-get install -y {' '.join(PACKAGES)}")
    p = subprocess.run(["apt-get", "install", "-y", "-qq", *PACKAGES], env=env, capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=300)
        p = subprocess.run(["apt-get", "install", "-y", "-qq", *PACKAGES], env=env, capture_output=True,
                           text=True, timeout=900)
        if p.returncode != 0:
            raise RGWError(f"apt-get install {' '.join(PACKAGES)} failed: {(p.stdout + p.stderr)[-1500:]}")
    log(f"[rgw] installed in {time.monotonic() - t0:.0f} s")


def free_port(ip: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


class LocalRunner:
    """Runs the daemons on this machine (loopback)."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.procs: list[subprocess.Popen] = []

    def run(self, *argv, check=True, timeout=120, **kw):
        p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)
        if check and p.returncode != 0:
            raise RGWError(f"rc={p.returncode}: {' '.join(map(str, argv))}\n{(p.stdout + p.stderr)[-2000:]}")
        return p

    def popen(self, argv, name: str, env: dict | None = None) -> subprocess.Popen:
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            p = subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                 start_new_session=True)
        self.procs.append(p)
        return p

    def log_tail(self, name: str, n: int = 3000) -> str:
        try:
            return (self.logs / f"{name}.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()


def _wait(pred, timeout: float, what: str, tick: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RGWError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(tick)


class RGW:
    def __init__(self, base: Path, *, ip: str = "127.0.0.1", runner=None):
        self.base = Path(base) / f"rgw-{uuid.uuid4().hex[:8]}"
        self.ip = ip
        self.runner = runner or LocalRunner(self.base / "logs")
        self.port = free_port(ip) if ip == "127.0.0.1" else 7480
        self.mon_ports = (free_port(ip), free_port(ip)) if ip == "127.0.0.1" else (3300, 6789)
        self.conf = self.base / "ceph.conf"
        self.rgw_proc: subprocess.Popen | None = None
        self.started_s: float | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{self.port}"

    def env(self) -> dict:
        return {"AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS,
                "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(self.base / "aws-config"), "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}

    def _ceph(self, *args, check=True, timeout=60):
        return self.runner.run("ceph", "-c", self.conf, "--connect-timeout", "10", *args, check=check, timeout=timeout)

    def start(self) -> "RGW":
        t0 = time.monotonic()
        d = self.base
        for sub in ("run", "log", "mon", "osd/ceph-0", "rgw"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        (d / "aws-config").write_text("[default]\ns3 =\n    addressing_style = path\n")
        fsid, osd_uuid = str(uuid.uuid4()), str(uuid.uuid4())
        mon = f"[v2:{self.ip}:{self.mon_ports[0]},v1:{self.ip}:{self.mon_ports[1]}]"
        self.conf.write_text(textwrap.dedent(f"""\
            [global]
            fsid = {fsid}
            mon host = {mon}
            public network = {self.ip}/{32 if self.ip == '127.0.0.1' else 24}
            keyring = {d}/keyring
            run dir = {d}/run
            admin socket = {d}/run/$cluster-$name.asok
            log file = {d}/log/$cluster-$name.log
            ms bind ipv6 = false
            osd pool default size = 1
            osd pool default min size = 1
            osd pool default pg num = 8
            osd pool default pgp num = 8
            osd pool default pg autoscale mode = off
            osd crush chooseleaf type = 0
            mon allow pool size one = true
            mon warn on pool no redundancy = false
            mon data avail warn = 1
            mon data avail crit = 1
            mon max pg per osd = 1000
            auth allow insecure global id reclaim = true
            [mon]
            mon data = {d}/mon/$cluster-$id
            [osd]
            osd data = {d}/osd/$cluster-$id
            osd objectstore = bluestore
            bluestore block path = {d}/osd/block
            bluestore block create = true
            bluestore block size = {4 << 30}
            osd memory target = {1 << 30}
            [client.rgw.a]
            rgw frontends = beast endpoint={self.ip}:{self.port} tcp_nodelay=1
            rgw data = {d}/rgw
            rgw gc obj min wait = 60
            """))
        r = self.runner
        kr = d / "keyring"
        r.run("ceph-authtool", "--create-keyring", kr, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *")
        r.run("ceph-authtool", kr, "--gen-key", "-n", "client.admin", "--cap", "mon", "allow *", "--cap", "osd",
              "allow *", "--cap", "mgr", "allow *")
        r.run("ceph-authtool", kr, "--gen-key", "-n", "client.rgw.a", "--cap", "mon", "allow rw", "--cap", "osd", "allow rwx")
        r.run("ceph-authtool", kr, "--gen-key", "-n", "osd.0", "--cap", "mon", "allow profile osd", "--cap", "osd",
              "allow *", "--cap", "mgr", "allow profile osd")
        r.run("monmaptool", "--create", "--addv", "a", mon, "--fsid", fsid, d / "monmap")
        r.run("ceph-mon", "-c", self.conf, "--mkfs", "-i", "a", "--monmap", d / "monmap", "--keyring", kr, timeout=120)
        monp = r.popen(["ceph-mon", "-f", "-c", self.conf, "-i", "a"], "ceph-mon")
        _wait(lambda: (monp.poll() is None or self._died("ceph-mon"))
              and self._ceph("mon", "dump", check=False, timeout=15).returncode == 0, 90, "ceph-mon")
        osd_id = self._ceph("osd", "new", osd_uuid).stdout.strip()
        r.run("ceph-osd", "-c", self.conf, "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid, timeout=180)
        osdp = r.popen(["ceph-osd", "-f", "-c", self.conf, "-i", osd_id], "ceph-osd")
        _wait(lambda: (osdp.poll() is None or self._died("ceph-osd"))
              and '"up":1' in self._ceph("osd", "dump", "-f", "json", check=False, timeout=15).stdout.replace(" ", ""),
              120, "the OSD to be up", tick=0.5)
        self.start_gateway()
        self.runner.run("radosgw-admin", "-c", self.conf, "user", "create", "--uid", "seedreuse", "--display-name",
                        "seedreuse tests", "--access-key", ACCESS, "--secret", SECRET, timeout=120)
        self.started_s = time.monotonic() - t0
        return self

    def _died(self, name: str):
        raise RGWError(f"{name} exited: {self.runner.log_tail(name)}")

    def _answers(self) -> bool:
        try:
            with socket.create_connection((self.ip, self.port), timeout=1):
                return True
        except OSError:
            return False

    def start_gateway(self) -> None:
        self.rgw_proc = self.runner.popen(["radosgw", "-f", "-c", self.conf, "-n", "client.rgw.a"], "radosgw")
        _wait(lambda: (self.rgw_proc.poll() is None or self._died("radosgw")) and self._answers(), 120,
              "radosgw to answer", tick=0.25)

    def kill_gateway(self) -> None:
        """SIGKILL the gateway (the cluster keeps running): a server restart mid-run."""
        p, self.rgw_proc = self.rgw_proc, None
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                p.kill()
            p.wait()
        _wait(lambda: not self._answers(), 30, "radosgw to stop answering")

    def restart_gateway(self) -> None:
        """SIGKILL the gateway, then start it again on the same port (the cluster and every
        object stay): a server restarted mid-run."""
        self.kill_gateway()
        self.start_gateway()

    def ensure_gateway(self) -> None:
        """Start the gateway when a test left it stopped (its finally)."""
        if not self._answers():
            self.kill_gateway()
            self.start_gateway()

    def bucket(self, name: str) -> str:
        import boto3        # noqa: PLC0415 - the test environment's client
        s3 = boto3.session.Session().client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS,
                                           aws_secret_access_key=SECRET, region_name="us-east-1")
        try:
            s3.create_bucket(Bucket=name)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        return f"s3://{name}"

    def stop(self) -> None:
        self.runner.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> "RGW":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
