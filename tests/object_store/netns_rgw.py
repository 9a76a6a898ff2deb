"""Two simulated hosts sharing one bucket of a real Ceph RGW (tests/shared_fs/env.py's topology).

    with SharedFSEnv(RGWProfile(), log=print) as env:      # root, network namespaces; no FUSE
        env.profile.url                      # s3://seedreuse-hosts/<run>: the fleet's bucket prefix
        env.profile.s3_env()                 # AWS_ENDPOINT_URL_S3=http://10.232.0.10:7480, keys, region
        env.cache_root(env.hosts[0])         # hostA's local tier (a folder of its own)
        env.cache_root()                     # the test process's own local tier (the checks')

The mon, the OSD and radosgw (tests/object_store/rgw.py) run in the server namespace of
env.py (its own netns, pid, mount and UTS namespaces: killing its init ends every daemon); the
workers in hostA / hostB reach the gateway at 10.232.0.10:7480 over their veths and the bridge,
as the workers of a fleet reach an S3 endpoint, and nothing else is shared between the hosts:
each has its own SEEDREUSE_CACHE_ROOT (its local read-through tier). env.py's machine-wide
lock keeps one such environment per machine (fixed names and subnet), and its teardown (also
of a run killed before it) removes what was created.
"""
from __future__ import annotations

import uuid

from tests.shared_fs.env import SERVER_IP, Profile, _first_line
from tests.shared_fs.harness import SharedFleet

from . import rgw as rgw_mod

BUCKET = "seedreuse-hosts"


class RGWProfile(Profile):
    name, fs = "rgw", "Ceph RGW"
    fuse = False
    binaries = tuple((b, {"radosgw-admin": "radosgw", "ceph": "ceph-common", "ceph-authtool": "ceph-common",
                          "monmaptool": "ceph-mon"}.get(b, b)) for b in rgw_mod.BINARIES)

    def __init__(self):
        self.rgw: rgw_mod.RGW | None = None
        self.url: str | None = None

    @property
    def options(self) -> str:
        return (f"one mon, one OSD (BlueStore on a 4 GiB sparse file), radosgw (beast, tcp_nodelay) at "
                f"{SERVER_IP}:7480; bucket prefix {self.url}")

    def version(self) -> str:
        return _first_line("radosgw", "--version")

    def install(self, log=print) -> None:
        rgw_mod.install(log)

    def start_server(self, env) -> None:
        self.rgw = rgw_mod.RGW(env.base / "srv", ip=SERVER_IP, runner=env.server)
        self.rgw.start()           # on failure env.setup tears the server namespace down

    def after_mount(self, env) -> None:
        self.url = f"{self.rgw.bucket(BUCKET)}/{uuid.uuid4().hex[:8]}"

    def s3_env(self) -> dict:
        """The standard AWS settings of a client of this gateway (workers and the test process)."""
        return self.rgw.env()


class BucketFleet(SharedFleet):
    """Workers on both hosts (2 on hostA, 1 on hostB by default) whose cache is the profile's
    bucket prefix (``SEEDREUSE_CACHE_URL``), each host with its own local tier; the soak's and
    the tests' own reads go through a third local tier (``cache_root``, the observer's)."""

    def __init__(self, env, base, models_dir, per_host=(2, 1), extra_env=None):
        self.cache_url = env.profile.url
        settings = env.profile.s3_env() | {"SEEDREUSE_CACHE_URL": self.cache_url} | dict(extra_env or {})
        super().__init__(env, base, models_dir, per_host=per_host, extra_env=settings)
        self.settings = settings

    def local_roots(self) -> list:
        """Each host's local tier (SEEDREUSE_CACHE_ROOT of its workers)."""
        return [self.env.cache_root(h) for h in self.env.hosts]

    def describe(self) -> str:
        return (f"{len(self.workers)} workers on 2 simulated hosts "
                f"({', '.join(f'{w.name}@{w.sim.ns_ip}' for w in self.workers)}) sharing {self.cache_url}, "
                f"each host with its own local tier; {self.env.describe()}")
