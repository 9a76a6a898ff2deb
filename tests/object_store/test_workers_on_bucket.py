"""Encoder Reuse and Segment Reuse in real ComfyUI workers whose cache is a bucket on a real Ceph
RGW (``SEEDREUSE_CACHE_URL=s3://...``), on each host the suite runs.

Two workers of one module share the bucket prefix and nothing else: each has its own
``SEEDREUSE_CACHE_ROOT`` (its local read-through tier), as two hosts of a fleet would. Each test
uses caches of its own names under the module's prefix. What is asserted is what the folder store
promises (tests/test_encoder_reuse.py, test_segment_reuse.py, test_segment_takes.py): a hit on
the other worker skips the encoder and its loader; a failed run publishes nothing; a resume keeps
the exact frames of the chosen take; takes, extend and the longest valid prefix work; the cache
tool lists and checks the bucket.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from seedreuse_lab import graphs
from seedreuse_lab.graphs import T2V
from seedreuse_lab.reuse_graphs import SEG, segment_graph, set_session, t2v_reuse
from reuse_backend.bucket.store import BucketStore
from reuse_backend.media import segments, video
from reuse_backend.store import take_index

pytestmark = pytest.mark.comfy
F, M, FPS = 9, 3, 16.0
REPO = Path(__file__).resolve().parents[2]


def P(n: int) -> int:
    return segments.prefix_frames(n, F, M)


@pytest.fixture(scope="module")
def fleet(rgw, module_workers, tmp_path_factory):
    """(a, b, url, env): two workers over one bucket prefix, each with its own local tier."""
    url = f"{rgw.bucket('seedreuse-workers')}/{uuid.uuid4().hex[:8]}"
    env = rgw.env() | {"SEEDREUSE_CACHE_URL": url}
    (a,) = module_workers(1, env=env, cache_root=tmp_path_factory.mktemp("tier-a"), name_prefix="bucket-a")
    (b,) = module_workers(1, env=env, cache_root=tmp_path_factory.mktemp("tier-b"), name_prefix="bucket-b")
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
    return a, b, url, env


@pytest.fixture
def store(fleet, tmp_path, monkeypatch):
    """The test process's own view of the bucket (a third local tier)."""
    for k, v in fleet[3].items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SEEDREUSE_CACHE_ROOT", str(tmp_path / "tier-test"))
    return BucketStore(fleet[2])


def manifest(store: BucketStore, name: str) -> dict | None:
    snap = store.cache(name).snapshot(lease=False)
    if snap is None:
        return None
    with snap:
        return snap.manifest


def slot_action(res, slot: str) -> str:
    return {e["data"]["slot"]: e["data"] for e in res.events_of("seedreuse.slot")}[slot]["action"]


def tool(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reuse_backend", *args], cwd=REPO, env=os.environ | env,
                          capture_output=True, text=True, timeout=120)


def test_encoder_reuse_across_workers_through_the_bucket(fleet, store, tmp_path):
    a, b, url, env = fleet
    for w in (a, b):
        w.free(settle=0.3)
        w.reset_counts()
    a.run(t2v_reuse(seed=1, prompt_text="bucket text", cache_name="enc")).raise_for_status()
    assert a.counts()["text_encode"] == 1 and a.counts()["text_loader"] == 1
    m = manifest(store, "enc")
    assert m is not None and set(m["slots"]) == {"positive"}
    rb = b.run(t2v_reuse(seed=2, prompt_text="bucket text", cache_name="enc", reuse="require")).raise_for_status()
    assert b.counts().get("text_encode", 0) == 0 and b.counts().get("text_loader", 0) == 0
    assert T2V.SAMPLER in rb.executed and T2V.POS not in rb.executed and T2V.TEXT_LOADER not in rb.executed
    assert slot_action(rb, "positive") == "reused"
    assert manifest(store, "enc")["version"] == m["version"]       # an all-hit run publishes nothing new
    # the cache tool on the bucket: list names it, check finds nothing wrong
    local = {"SEEDREUSE_CACHE_ROOT": str(tmp_path / "tier-cli")}
    out = tool(env | local, "list")
    assert out.returncode == 0 and "enc" in out.stdout and m["version"][:12] in out.stdout, out.stdout + out.stderr
    out = tool(env | local, "check", "enc")
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout + out.stderr
    out = tool(env | local, "probe", url)
    assert out.returncode == 0 and "verdict: safe" in out.stdout, out.stdout + out.stderr


def test_a_failed_run_publishes_nothing_on_the_bucket(fleet, store):
    a, b, _, _ = fleet
    a.run(t2v_reuse(seed=1, prompt_text="kept text", cache_name="fail")).raise_for_status()
    before = manifest(store, "fail")
    p = t2v_reuse(seed=3, prompt_text="a new text that fails", cache_name="fail")
    graphs.insert_between(p, T2V.DECODE, 0, T2V.VIDEO, "images", "SeedReuseTestFail",
                          {"fail": True, "message": "failing on purpose"}, input_name="value", node_id="300")
    res = b.run(p)
    assert res.status == "error" and "failing on purpose" in res.error["exception_message"]
    assert manifest(store, "fail") == before                       # the last good version stands
    assert store.check("fail") == [] or all(pr.code == "collectable" for pr in store.check("fail"))


def seg(seed: int, frames: int, *, n: int = 0, from_take: int = 0) -> dict:
    p = segment_graph("ref.png", seed=seed, prefix_segments=n, cache_name="seg", F=F, M=M,
                      total_frames=frames, fps=FPS)
    p[SEG.START]["inputs"]["total_frames"] = 0          # the length follows the audio track
    p[SEG.SINE]["inputs"]["seconds"] = frames / FPS
    return set_session(p, from_take=from_take)


def frames_of(worker, res) -> np.ndarray:
    f = res.output_files(SEG.MERGE)[0]
    return video.decode_frames(str(Path(worker.output_dir) / f.get("subfolder", "") / f["filename"]))


def sampled(res) -> int:
    return sum(1 for e in res.events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)


def test_segment_reuse_takes_extend_and_longest_through_the_bucket(fleet, store):
    a, b, _, _ = fleet
    r1 = a.run(seg(1, P(4))).raise_for_status()
    assert sampled(r1) == 4
    v1 = frames_of(a, r1)
    # resume on the other worker, same seed, N = 2: segments 0-1 are the bucket's, bit-exact
    r2 = b.run(seg(1, P(4), n=2)).raise_for_status()
    assert sampled(r2) == 2
    assert np.array_equal(frames_of(b, r2), v1)
    sec = manifest(store, "seg")["sections"]["segments"]
    assert sec["prefix_mode"] == "stream-copy" and sec["reused_prefix_segments"] == 2
    # a new seed from frame 0 makes another take; a resume from the first take keeps its prefix
    r3 = b.run(seg(3, P(4))).raise_for_status()
    v3 = frames_of(b, r3)
    assert not np.array_equal(v3[:P(1)], v1[:P(1)])
    assert [t["take"] for t in take_index.records(manifest(store, "seg"))] == [3, 2, 1]
    r4 = a.run(seg(4, P(4), n=1, from_take=1)).raise_for_status()
    assert sampled(r4) == 3
    assert np.array_equal(frames_of(a, r4)[:P(1)], v1[:P(1)])
    assert manifest(store, "seg")["sections"]["segments"]["source_take"] == 1
    # extend the latest take (take 4) with a longer track: only the new segments are sampled
    v4 = frames_of(a, r4)
    r5 = b.run(seg(5, P(6), n=4)).raise_for_status()
    assert sampled(r5) == 2
    v5 = frames_of(b, r5)
    assert v5.shape[0] == P(6) and np.array_equal(v5[:P(4)], v4)
    # the longest valid prefix (N = -1) of the same request: every segment is valid and the
    # longest resume keeps S - 1 of them (the last is generated under the new seed)
    r6 = a.run(seg(6, P(6), n=-1)).raise_for_status()
    assert sampled(r6) == 1 and np.array_equal(frames_of(a, r6)[:P(5)], v5[:P(5)])
    assert [t["take"] for t in take_index.records(manifest(store, "seg"))][0] == 6
    assert [p for p in store.check("seg") if p.code != "collectable"] == []
