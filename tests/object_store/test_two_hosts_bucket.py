"""Two simulated hosts sharing ONE bucket of a real Ceph RGW, with real ComfyUI workers.

The topology of tests/shared_fs/env.py (network namespaces hostA / hostB / server, veths, a
bridge), without a shared filesystem: the mon, OSD and radosgw run in the server namespace
(netns_rgw.py), 2 workers on hostA and 1 on hostB reach the gateway over their veths
(``SEEDREUSE_CACHE_URL=s3://seedreuse-hosts/<run>``), and each host has its own local tier
(``SEEDREUSE_CACHE_ROOT``). What is asserted:

* a serial chain over the three workers (Segment Reuse: new takes, resumes at N, both slots)
  where every request after the first reuses: the encoders run once in all (the first request)
  and never again on any worker, and every request downloads into its host's local tier exactly
  the files it loads that the host did not hold (its slots, the resumed take's result and
  boundary N-1; nothing of the other takes, boundaries or the tail), so a host's first hit
  downloads only what it loads;
* a batch of 8 seeds sent at once to the 3 workers over the 2 hosts: 0 failures, each encoder
  once in all (single flight across hosts through claim objects), every success a take (the
  last K kept, each its request's saved output), nothing left behind;
* the soak (tests/soak/soak.py through harness.CrossHostSoak) on the bucket: serial requests with
  injected failures, interrupts and SIGKILLs (late, held in a slow node, while uploading its
  staged files, right after its commit record, right after the client saw success), the
  concurrent bursts, and a read through each host's local tier after every step; its checks read
  the cache through the store interface (bucket_view.py); then every lease has expired, one
  collection runs, and nothing of a dead run is left. 0 contention failures, 0 corruptions,
  0 lost successes, 0 violations, 0 stale reads.

Runs once per scripts/test.sh run, on ComfyUI 0.33.0 (marker ``one_host``, tests/conftest.py: the
current upstream ComfyUI, what fleets deploy, and the host where concurrent single flight found a
bug before, commit 753bce0), to keep CI under 60 minutes; a plain pytest run runs it on its host. Needs root
and network namespaces (no FUSE); installs Debian's radosgw, ceph-mon and ceph-osd when missing.
Where CI=true a missing prerequisite fails, elsewhere the module skips and says why.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import pytest

from seedreuse_lab import graphs
from seedreuse_lab.reuse_graphs import SEG, segment_graph
from reuse_backend.bucket.location import parse
from reuse_backend.media import segments as segmod
from reuse_backend.store import take_index

from tests import tier_gate
from tests.shared_fs.env import Missing, SharedFSEnv, base_missing
from tests.shared_fs.harness import CrossHostSoak, assert_soak_clean, soak_config, soak_summary
from tests.soak.bucket_view import BucketView
from tests.soak.soak import assert_coverage, format_report
from tests.soak.take_model import records as take_records

from . import rgw as rgw_mod
from .netns_rgw import BucketFleet, RGWProfile

pytestmark = [pytest.mark.comfy, pytest.mark.one_host("0.33.0")]

LEASE_S = "30"     # the fleet's run lease: a dead run's claim and objects expire this long after it
F, M, TOTAL, FPS = 9, 3, 27, 16.0
S = segmod.segment_count(TOTAL, F, M)
ENCODERS = ("text_encode", "text_loader", "clip_vision_encode", "clip_vision_loader")
REQUESTS = int(os.environ.get("SEEDREUSE_BUCKET_SOAK_REQUESTS", "80"))
TIME_BUDGET_S = float(os.environ.get("SEEDREUSE_BUCKET_SOAK_TIME_BUDGET", "45"))
SEED = int(os.environ.get("SEEDREUSE_BUCKET_SOAK_SEED", "11"))
# the soak's mandatory phase on a bucket: every fault kind, the bucket's commit-phase kills, a resume
SUITE_KINDS = ("fail", "interrupt", "kill:late", "kill:upload", "kill:record", "resume")


@pytest.fixture(scope="module")
def two_hosts(models_dir, tmp_path_factory):
    """(env, fleet): RGW in the server namespace, 2 workers on hostA and 1 on hostB."""
    prof = RGWProfile()
    if prof.install_check() and not base_missing(fuse=False) and shutil.which("apt-get"):
        try:
            prof.install()
        except Exception as e:  # noqa: BLE001 - reported as what is missing
            tier_gate.require("the object-store tier",
                              f"installing {' '.join(rgw_mod.PACKAGES)} failed: {str(e)[-800:]}")
    env = SharedFSEnv(prof, log=print)
    try:
        env.setup()
    except Missing as e:
        tier_gate.require("the object-store tier", f"two hosts on a bucket: {e}")
    try:
        print(f"[two hosts] {prof.version()}: up in {env.timings['setup_s']} s, bucket {prof.url}")
        fleet = BucketFleet(env, tmp_path_factory.mktemp("bucket-hosts"), models_dir,
                            extra_env={"SEEDREUSE_LEASE_S": LEASE_S})
        fleet.start()
        print(f"[two hosts] {len(fleet.workers)} workers up in {fleet.start_seconds} s")
        try:
            yield env, fleet
        finally:
            fleet.stop()
    finally:
        env.teardown()


@pytest.fixture
def fleet(two_hosts, monkeypatch):
    """The fleet, with this process's boto3 settings on the gateway and its own local tier."""
    env, fl = two_hosts
    for k, v in fl.settings.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SEEDREUSE_CACHE_ROOT", str(env.cache_root()))
    return fl


def seg(seed: int, N: int, cache: str, tag: str, *, image: str = "ref.png", text: str = "a talking test head") -> dict:
    p = segment_graph(image, seed, prefix_segments=N, cache_name=cache, F=F, M=M, total_frames=TOTAL, fps=FPS,
                      prompt_text=text)
    p[SEG.MERGE]["inputs"]["filename_prefix"] = f"hosts/{tag}"
    return p


def sampled(res) -> int:
    return sum(1 for e in res.events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)


def slot_actions(res) -> dict:
    return {e["data"]["slot"]: e["data"]["action"] for e in res.events_of("seedreuse.slot")}


def tier_blobs(root: Path, url: str) -> dict:
    """sha256 -> bytes of what a host's local tier holds of the bucket."""
    d = Path(root) / ".bucket" / parse(url).store_id() / "blobs"
    return {p.name: p.stat().st_size for p in d.glob("??/*") if not p.name.startswith(".")}


def manifest(view: BucketView, name: str) -> dict | None:
    snap = view.snapshot(name)
    if snap is None:
        return None
    with snap:
        return snap.manifest


def loaded_files(m: dict | None, N: int) -> dict:
    """sha256 -> file name of what a segment request at N loads from version ``m``: its two
    slots and, for N > 0, the latest take's result and its boundary N - 1."""
    if m is None:
        return {}
    names = [s["file"] for s in m["slots"].values()]
    if N:
        latest = take_index.records(m)[0]
        names += [latest["result"], latest["boundaries"][str(N - 1)]]
    return {m["files"][f]["sha256"]: f for f in names}


def committed(view: BucketView, name: str) -> tuple[dict, set]:
    """The current manifest, and the sha256 of the files its run wrote and uploaded (the others
    it carried by reference: data objects of earlier runs)."""
    snap = view.snapshot(name)
    with snap:
        run = snap.manifest["run"]["run_id"]
        own = {rel.rsplit("/", 1)[1] for rel in snap.objects.values() if rel.startswith(f"data/{run}/")}
        return snap.manifest, own


# (worker index: 0 = hostA-w0, 1 = hostA-w1, 2 = hostB-w0; N; seed)
CHAIN = [(0, 0, 1), (2, 2, 1), (1, 1, 2), (2, 3, 3), (0, 0, 4), (1, 2, 5), (2, 1, 6)]


def test_serial_chain_reuses_after_the_first_request(fleet):
    env = fleet.env
    view = BucketView(fleet.cache_url, env.cache_root())
    first_hit: dict[str, dict] = {}
    for i, (wi, N, seed) in enumerate(CHAIN):
        w = fleet.workers[wi]
        tier = env.cache_root(w.sim)
        base = manifest(view, "chain")
        held = tier_blobs(tier, fleet.cache_url)
        for x in fleet.workers:
            x.reset_counts()
        res = w.run(seg(seed, N, "chain", f"chain_{i}"), timeout=300).raise_for_status()
        counts = {x.name: {k: x.counts().get(k, 0) for k in ENCODERS} for x in fleet.workers}
        after, own = committed(view, "chain")
        assert after["run"]["prompt_id"] == res.prompt_id and sampled(res) == S - N
        now = tier_blobs(tier, fleet.cache_url)
        fetched = set(now) - set(held) - own
        want = {sha: f for sha, f in loaded_files(base, N).items() if sha not in held}
        print(f"[chain {i}] {w.name} N={N}: fetched {len(fetched)} file(s), {sum(now[s] for s in fetched)} bytes "
              f"({sorted(want.values())}); encoders {counts}")
        if i == 0:
            assert counts[w.name] == {"text_encode": 1, "text_loader": 1, "clip_vision_encode": 1,
                                      "clip_vision_loader": 1}, counts
            assert not any(any(c.values()) for n, c in counts.items() if n != w.name), counts
            continue
        assert not any(any(c.values()) for c in counts.values()), f"request {i}: an encoder ran: {counts}"
        assert slot_actions(res) == {"positive": "reused", "clip_vision": "reused"}
        assert fetched == set(want), (f"request {i} on {w.sim.name} downloaded "
                                      f"{sorted(fetched)}, it loads and lacked {want}")
        first_hit.setdefault(w.sim.name, {"request": i, "files": sorted(want.values()),
                                          "bytes": sum(now[s] for s in fetched)})
    assert set(first_hit) == {"hostA", "hostB"}
    assert first_hit["hostB"]["files"], "hostB's first hit downloaded nothing"
    print(f"[chain] first hit per host: {first_hit}")
    assert view.problems("chain") == []
    assert BucketView(fleet.cache_url, env.cache_root(), fleet.local_roots()).left_behind(["chain"]) == []


def _wait_idle(fleet, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    for w in fleet.workers:
        while time.monotonic() < deadline:
            q = w.get_json("/queue", timeout=10)
            if not q.get("queue_running") and not q.get("queue_pending"):
                break
            time.sleep(0.2)


def sha256_file(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_batch_of_8_seeds_on_3_workers_over_2_hosts(fleet):
    ws = fleet.workers
    view = BucketView(fleet.cache_url, fleet.env.cache_root(), host_roots=fleet.local_roots())
    for w in ws:      # inputs no worker has seen: ComfyUI's memory holds no encoding of them
        graphs.write_test_image(Path(w.input_dir) / "batch.png", seed=8)
        w.reset_counts()
    seeds = list(range(101, 109))
    t0 = time.monotonic()
    handles = [ws[i % len(ws)].start_run(seg(s, 0, "batch", f"batch_{s}", image="batch.png", text="a batch of takes"))
               for i, s in enumerate(seeds)]
    results = [h.wait(900) for h in handles]
    secs = time.monotonic() - t0
    failures = [(s, r.status, (r.error or {}).get("exception_message")) for s, r in zip(seeds, results)
                if r.status != "success"]
    counts = {k: sum(w.counts().get(k, 0) for w in ws) for k in ENCODERS}
    actions = [slot_actions(r) for r in results]
    print(f"[batch] 8 requests on {len(ws)} workers in {secs:.1f} s: failures {failures}, encoders {counts}, "
          f"slot actions {actions}")
    assert failures == []
    # each encoder once per key over both hosts (a loader at most once: ComfyUI may hold the model)
    assert counts["text_encode"] == 1 and counts["clip_vision_encode"] == 1, counts
    assert counts["text_loader"] <= 1 and counts["clip_vision_loader"] <= 1, counts
    for slot in ("positive", "clip_vision"):
        assert sum(a.get(slot) == "encoded" for a in actions) == 1, actions
    m = manifest(view, "batch")
    recs = take_records(m)
    assert [r["take"] for r in recs] == [8, 7, 6]                     # 8 commits, the last K = 3 kept
    outputs = {}
    for s, r, i in zip(seeds, results, range(8)):
        f = r.output_files(SEG.MERGE)[0]
        outputs[s] = sha256_file(ws[i % len(ws)].output_path(f))
    for rec in recs:
        assert m["files"][rec["result"]]["sha256"] == outputs[rec["segments"]["seed"]], rec["take"]
    _wait_idle(fleet)
    assert view.problems("batch") == []
    assert view.left_behind(["batch"]) == []


def test_soak_on_the_bucket_with_kills_and_bursts(fleet, tmp_path):
    cfg = soak_config(REQUESTS, SEED, time_budget_s=TIME_BUDGET_S, mandatory_kinds=SUITE_KINDS)
    t0 = time.monotonic()
    soak = CrossHostSoak(fleet, cfg, tmp_path / "soak", log=lambda *a: print("  " + " ".join(str(x) for x in a)))
    soak.run()
    print(f"  [soak] {len(soak.steps)} steps; the epilogue (a commit on each host that the other builds on)")
    soak.epilogue()
    r = soak.report()
    settled = soak.store.settle(list(soak.models))
    print(format_report(r) + "\n  " + soak_summary(r))
    print(f"  stale reads: {r['stale_reads']} of {r['cross_host_reads']} reads through each host's local tier; "
          f"settle: {settled}; {time.monotonic() - t0:.0f} s in all")
    assert_soak_clean(r)
    assert_coverage(r)
    assert r["concurrent"]["contention_failures"] == 0, format_report(r)
    assert settled["still_live"] == [] and settled["left_after_collection"] == [], settled
    assert all(p == [] for p in settled["problems_after_collection"].values()), settled
