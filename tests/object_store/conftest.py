"""Fixtures of the object-store tier: one real Ceph RGW per session (tests/object_store/rgw.py).

Where CI=true, a missing prerequisite (not root, apt-get failing) fails the run; elsewhere the
tests skip and say what is missing. As root with apt-get available, Debian's ``radosgw``,
``ceph-mon`` and ``ceph-osd`` are installed here once (about 2 minutes).
"""
from __future__ import annotations

import os
import shutil
import uuid

import pytest

from . import rgw as rgw_mod


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _require(why: str) -> None:
    if _in_ci():
        pytest.fail(f"CI=true and the object-store tier cannot run: {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def rgw(tmp_path_factory):
    if rgw_mod.missing():
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            _require(f"missing {rgw_mod.missing()} (install Debian's {' '.join(rgw_mod.PACKAGES)} as root)")
        try:
            rgw_mod.install()
        except rgw_mod.RGWError as e:
            _require(str(e))
    gw = rgw_mod.RGW(tmp_path_factory.mktemp("rgw"))
    with gw:
        print(f"[rgw] Ceph RGW up at {gw.endpoint} in {gw.started_s:.1f} s")
        yield gw


@pytest.fixture
def s3env(rgw, monkeypatch):
    """This process's boto3 settings pointed at the session's RGW (the clients and the probe's
    verdict are per endpoint and bucket: kept between tests)."""
    for k, v in rgw.env().items():
        monkeypatch.setenv(k, v)
    yield rgw.env()


@pytest.fixture
def bucket_url(rgw, s3env, request):
    """A fresh prefix of the tier's bucket for one test: s3://seedreuse-tier/<test>-<random>."""
    base = rgw.bucket("seedreuse-tier")
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40].strip("-")
    return f"{base}/{name}-{uuid.uuid4().hex[:8]}"
