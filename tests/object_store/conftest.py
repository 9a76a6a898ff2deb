"""Fixtures of the object-store tier: one real Ceph RGW per session (tests/object_store/rgw.py),
and ``bucket``: the same test on the in-memory double (the fast lane) and on RGW.

Where CI=true, a missing prerequisite (not root, apt-get failing) fails the run; elsewhere the
tests skip and say what is missing. As root with apt-get available, Debian's ``radosgw``,
``ceph-mon`` and ``ceph-osd`` are installed here once (about 2 minutes).
"""
from __future__ import annotations

import contextlib
import copy
import os
import shutil
import time
import uuid

import pytest

from reuse_backend.bucket import client as clients, location, probe
from reuse_backend.store import lease as lease_rules
from tests import tier_gate

from . import rgw as rgw_mod
from .fault_proxy import FaultProxy
from .memory_bucket import MemoryS3


def _require(why: str) -> None:
    tier_gate.require("the object-store tier", why)


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


@pytest.fixture
def proxy(rgw):
    """A fault-injecting proxy in front of the session's RGW (fault_proxy.py), closed after the
    test (every held or stalled request released)."""
    with FaultProxy(rgw.endpoint, credentials=(rgw_mod.ACCESS, rgw_mod.SECRET, "us-east-1")) as p:
        yield p


@pytest.fixture
def proxied(proxy, s3env, monkeypatch):
    """``proxied(**env) -> proxy``: from now on this process's S3 clients go through the proxy,
    with ``env`` set too (e.g. SEEDREUSE_S3_TIMEOUT_S=2, AWS_MAX_ATTEMPTS=3); the clients and
    the probe's verdicts are dropped again after the test."""
    def use(**env):
        for k, v in {**proxy.env(), **env}.items():
            monkeypatch.setenv(k, str(v))
        clients.forget_clients()
        probe.forget()
        return proxy
    yield use
    clients.forget_clients()
    probe.forget()


@pytest.fixture
def gateway(rgw):
    """The session's RGW for a test that kills or restarts its gateway: started again after
    the test whatever happened."""
    try:
        yield rgw
    finally:
        rgw.ensure_gateway()
        clients.forget_clients()


class BucketUnderTest:
    """One test's prefix on the in-memory double (``kind == "memory"``: the fast lane) or on the
    session's RGW (``"rgw"``: the proof): its URL, a raw client for the test's own hand (planting
    what a stranger writes, wiping the prefix), and the clock."""

    def __init__(self, kind: str, url: str, mem=None, rgw=None):
        self.kind, self.url, self.mem, self.rgw = kind, url, mem, rgw
        self.loc = location.parse(url)

    @property
    def client(self):
        return clients.for_bucket(self.loc.bucket)

    def plant(self, key: str, body: bytes) -> None:
        self.client.put(key, body)

    def keys(self, prefix: str | None = None) -> set[str]:
        objs, _ = self.client.list(self.loc.prefix if prefix is None else prefix)
        return {o.key for o in objs}

    def wipe(self, prefix: str | None = None) -> int:
        """Delete every object under the prefix, as an operator or a lifecycle rule would."""
        gone = sorted(self.keys(prefix))
        if gone:
            self.client.delete_many(gone)
        return len(gone)

    @contextlib.contextmanager
    def counting(self):
        """The S3 operations this process sends while in the block, by name (the double's record;
        on RGW botocore's own event hook on the process's client)."""
        seen: list[str] = []
        if self.kind == "memory":
            start = len(self.mem.calls)
            yield seen
            seen += self.mem.calls[start:]
            return
        c = self.client

        def saw(model, **kw):
            seen.append(model.name)
        for s3 in (c.s3, c.s3_once):
            s3.meta.events.register("before-call.s3.*", saw)
        try:
            yield seen
        finally:
            for s3 in (c.s3, c.s3_once):
                s3.meta.events.unregister("before-call.s3.*", saw)

    def copy(self) -> dict:
        """Every object under the prefix as it is now (a replica's state to go back to)."""
        if self.kind == "memory":
            return copy.deepcopy(self.mem.buckets[self.loc.bucket])
        return {k: self.client.get(k, 1 << 30).body for k in self.keys()}

    def restore(self, saved: dict) -> None:
        """The prefix exactly as ``copy()`` saw it: a replica that is behind answers now."""
        if self.kind == "memory":
            self.mem.buckets[self.loc.bucket] = saved
            return
        extra = sorted(self.keys() - set(saved))
        if extra:
            self.client.delete_many(extra)
        for k, body in saved.items():
            self.client.put(k, body)

    def fresh_bucket(self) -> str:
        """A URL on a bucket of its own (for a test that deletes and re-creates the bucket)."""
        name = f"recreate-{uuid.uuid4().hex[:10]}"
        if self.kind == "memory":
            self.mem.install(name)
            return f"s3://{name}/p"
        return f"{self.rgw.bucket(name)}/p"

    def recreate(self, url: str) -> None:
        """Delete the bucket of ``url`` with everything in it and create it again, empty."""
        bucket = location.parse(url).bucket
        if self.kind == "memory":
            self.mem.buckets[bucket] = {}
            return
        c = clients.for_bucket(bucket)
        objs, _ = c.list("")
        if objs:
            c.delete_many([o.key for o in objs])
        c.s3.delete_bucket(Bucket=bucket)
        self.rgw.bucket(bucket)

    def expire(self, cache, *keys: str) -> None:
        """Until the lease objects ``keys`` of ``cache`` are stale on the store's clock (their
        holders must be dead or stopped): on the double the clock moves on, on RGW the test waits
        (bounded)."""
        if self.kind == "memory":
            self.mem.advance(cache.lease_s + lease_rules.SLACK_S + 1)
            return
        deadline = time.monotonic() + 4 * cache.lease_s + 30
        while True:
            now = cache.client.server_now()
            objs = {o.key: o for o in cache.client.list(cache.keys.base)[0]}
            ages = [now - objs[k].modified for k in keys if k in objs]
            if all(a > cache.lease_s + lease_rules.SLACK_S + 0.5 for a in ages):
                return
            assert time.monotonic() < deadline, f"{keys} never went stale"
            time.sleep(0.25)


def _on_the_double(request):
    mem = MemoryS3()
    name = f"mem-{uuid.uuid4().hex[:12]}"
    mem.install(name)
    try:
        yield BucketUnderTest("memory", f"s3://{name}/{request.node.originalname[:40]}", mem=mem)
    finally:
        mem.uninstall()


@pytest.fixture(params=["memory", "rgw"])
def bucket(request):
    """A fresh prefix on the in-memory double (tests/object_store/memory_bucket.py; the backend
    tier: tests/conftest.py puts these in the fast lane) and on the real RGW (this tier)."""
    if request.param == "rgw":
        yield BucketUnderTest("rgw", request.getfixturevalue("bucket_url"), rgw=request.getfixturevalue("rgw"))
        return
    yield from _on_the_double(request)


@pytest.fixture(params=["memory"])
def memory_bucket(request):
    """A fresh prefix on the in-memory double only (the fast lane): for a test whose RGW twin is
    elsewhere in this tier."""
    yield from _on_the_double(request)
