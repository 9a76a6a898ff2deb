"""SIGKILL of a real ComfyUI worker in the middle of its commit to a bucket on the real RGW, on
each host the suite runs.

Worker A reaches the bucket through the fault proxy, which parks its commit record's create
(before it is sent on, or after the gateway created it and before A hears); the test SIGKILLs A
right there. Worker B (straight to the gateway) then runs the same prompt: it serves the last
committed version or A's complete one, never a mix (both slots reused, or both encoded), and
once A's lease has run out ``check --repair`` leaves a cache that ``check`` passes.

B runs with single flight off (SEEDREUSE_SINGLE_FLIGHT_S=0) so that what it serves comes from a
committed version only: adopting a dead holder's entry is the store tests' subject
(test_single_flight_on_bucket.py).
"""
from __future__ import annotations

import time
import uuid

import pytest

from reuse_backend.bucket import leases
from reuse_backend.bucket.store import BucketStore
from seedreuse_lab.reuse_graphs import t2v_reuse

from .test_workers_on_bucket import manifest, slot_action, tool

pytestmark = pytest.mark.comfy
LEASE_S = 8
ONE = {"prompt_text": "bucket kill text one", "negative_text": "bucket kill negative one"}
TWO = {"prompt_text": "bucket kill text two", "negative_text": "bucket kill negative two"}


@pytest.fixture(scope="module")
def worker_b(rgw, module_workers, tmp_path_factory):
    """(B, url, env): a worker straight to the gateway, single flight off, its own local tier."""
    url = f"{rgw.bucket('seedreuse-kills')}/{uuid.uuid4().hex[:8]}"
    env = rgw.env() | {"SEEDREUSE_CACHE_URL": url, "SEEDREUSE_SINGLE_FLIGHT_S": "0"}
    (b,) = module_workers(1, env=env, cache_root=tmp_path_factory.mktemp("tier-b"), name_prefix="kills-b")
    return b, url, env


def _wait_no_live_run(store: BucketStore, name: str, bound_s: float = 120.0) -> None:
    cache = store.cache(name)
    deadline = time.monotonic() + bound_s
    while leases.live(cache.client, cache.keys.lease_prefix, cache.lease_s)[0]:
        assert time.monotonic() < deadline, "the killed worker's run lease never went stale"
        time.sleep(0.5)


@pytest.mark.parametrize("phase", ["before-record", "record-created"])
def test_a_worker_killed_in_its_commit_leaves_the_last_version_or_its_own(phase, worker_b, comfy_workers, proxy,
                                                                         rgw, tmp_path, monkeypatch):
    b, url, env = worker_b
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SEEDREUSE_CACHE_ROOT", str(tmp_path / "tier-test"))
    store = BucketStore(url)
    name = f"kill-{phase}"
    b.run(t2v_reuse(seed=1, cache_name=name, **ONE)).raise_for_status()
    v1 = manifest(store, name)
    hold = proxy.hold("PUT", rf"/{name}/log/\d+\.json$", when="before" if phase == "before-record" else "after")
    a = comfy_workers.one(env=rgw.env() | proxy.env() | {"SEEDREUSE_CACHE_URL": url, "SEEDREUSE_LEASE_S": str(LEASE_S)},
                          cache_root=tmp_path / "tier-a", name_prefix="kills-a")
    a.start_run(t2v_reuse(seed=2, cache_name=name, **TWO))
    hold.wait_arrived(240)
    a.kill()
    hold.release(forward=False)
    now = manifest(store, name)
    if phase == "before-record":
        assert now == v1                                          # nothing of A is visible
    else:
        assert now["version"] != v1["version"] and set(now["slots"]) == {"positive", "negative"}
    res = b.run(t2v_reuse(seed=3, cache_name=name, **TWO)).raise_for_status()
    actions = {slot_action(res, s) for s in ("positive", "negative")}
    assert actions == ({"encoded"} if phase == "before-record" else {"reused"}), actions
    _wait_no_live_run(store, name)
    local = {"SEEDREUSE_CACHE_ROOT": str(tmp_path / "tier-cli")}
    out = tool(env | local, "check", name, "--repair")
    assert out.returncode == 0, out.stdout + out.stderr
    out = tool(env | local, "check", name)
    assert out.returncode == 0 and f"cache '{name}': OK" in out.stdout, out.stdout + out.stderr
    after = manifest(store, name)            # B's version (it encoded), or A's still (B's all-hit run adds none)
    assert after["version"] != v1["version"] and (phase == "before-record" or after == now)
