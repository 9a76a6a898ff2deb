"""Fixtures of the shared-filesystem tier: the prerequisites, installed once per session.

Where CI=true, a missing prerequisite (not root, no /dev/fuse, apt install failing) fails the
run; elsewhere the tests skip and say exactly what is missing. As root with apt-get available,
the GlusterFS packages are installed here (``apt-get install -y glusterfs-server
glusterfs-client``, about 30 s) once per session.
"""
from __future__ import annotations

import shutil

import pytest

from tests import tier_gate

from .env import PROFILES, base_missing


def pytest_configure(config):
    config.addinivalue_line("markers", "sharedfs: tier - two simulated hosts on a real shared filesystem "
                                       "(root, FUSE, network namespaces; installs GlusterFS)")


def require(missing: list[str], what: str) -> None:
    if missing:
        tier_gate.require("the shared-filesystem tier", f"{what}: missing " + "; ".join(missing))


@pytest.fixture(scope="session")
def gluster_installed() -> None:
    prof = PROFILES["gluster-strict"]()
    miss = prof.install_check()
    if miss and not base_missing() and shutil.which("apt-get"):
        try:
            prof.install(log=print)
        except Exception as e:  # noqa: BLE001 - reported as what is missing
            require(prof.install_check() + [f"apt-get install failed: {str(e)[-800:]}"], "GlusterFS")
        miss = prof.install_check()
    elif miss and not shutil.which("apt-get") and not base_missing():
        miss.append("apt-get (to install them)")
    require(miss, "GlusterFS")
