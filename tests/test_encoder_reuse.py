"""Encoder Reuse in real ComfyUI workers over HTTP, with tiny models and the counting stand-in text
encoder. The I2V test runs ComfyUI's own CLIPVisionLoader / CLIPVisionEncode with the full-size
random-weight ViT-H (seedreuse_lab/encoder_models.py), counted from the ``executing`` events; the
T2V tests are about the cache's behaviour (hits, misses, failures, races, names), not about an
encoder, so they keep the free stand-ins (a real ViT-H encode costs seconds on 2 cores)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from seedreuse_lab import encoder_models, graphs
from seedreuse_lab.graphs import I2V, T2V
from seedreuse_lab.reuse_graphs import i2v_reuse, t2v_reuse

pytestmark = pytest.mark.comfy


def video_digest(worker, res, node_id=T2V.SAVE) -> str:
    files = res.output_files(node_id)
    assert files, f"no output files from node {node_id}: {res.outputs}"
    f = files[0]
    path = Path(worker.output_dir) / f.get("subfolder", "") / f["filename"]
    from reuse_backend.media import video
    return hashlib.sha256(video.decode_frames(str(path)).tobytes()).hexdigest()


def manifest(root: Path, name: str) -> dict:
    return json.loads((root / name / "manifest.json").read_text())


def slot_events(res):
    return {e["data"]["slot"]: e["data"] for e in res.events_of("seedreuse.slot")}


def test_cross_worker_hit_skips_encoder_and_loader(pair_over_empty_root):
    a, b, root = pair_over_empty_root
    ra = a.run(t2v_reuse(seed=1, reuse="off")).raise_for_status()
    assert a.counts()["text_encode"] == 1 and a.counts()["text_loader"] == 1
    m = manifest(root, "default")
    assert set(m["slots"]) == {"positive"}
    rb = b.run(t2v_reuse(seed=2, reuse="require")).raise_for_status()
    assert b.counts().get("text_encode", 0) == 0 and b.counts().get("text_loader", 0) == 0
    assert T2V.SAMPLER in rb.executed and T2V.DECODE in rb.executed
    assert T2V.POS not in rb.executed and T2V.TEXT_LOADER not in rb.executed
    assert slot_events(rb)["positive"]["action"] == "reused"
    assert video_digest(a, ra) != video_digest(b, rb)
    # an all-hit run publishes nothing new: the committed version is unchanged
    assert manifest(root, "default")["version"] == m["version"]


def test_restart_still_hits(pair_over_empty_root):
    # the module's worker a is restarted: a new process (nothing in ComfyUI's memory, counters
    # at 0) that the module's later tests use as they would a fresh one
    a, _, _ = pair_over_empty_root
    a.run(t2v_reuse(seed=1, prompt_text="restart me")).raise_for_status()
    a.restart()
    r = a.run(t2v_reuse(seed=3, prompt_text="restart me", reuse="auto")).raise_for_status()
    assert a.counts().get("text_encode", 0) == 0
    assert slot_events(r)["positive"]["action"] == "reused"


def test_changes_miss_in_auto_and_fail_in_require(comfy_workers, private_models_dir):
    a, = comfy_workers(1, models_dir=private_models_dir)
    a.run(t2v_reuse(seed=1, prompt_text="first")).raise_for_status()
    # 1. prompt text changed
    res = a.run(t2v_reuse(seed=2, prompt_text="second", reuse="require"))
    assert res.status == "error" and "value:text" in res.error["exception_message"]
    assert T2V.SAMPLER not in res.executed
    r = a.run(t2v_reuse(seed=2, prompt_text="second", reuse="auto")).raise_for_status()
    ev = slot_events(r)["positive"]
    assert ev["action"] == "encoded" and "value:text" in ev["reason"]
    # 2. encoder model file replaced in place (same name, new content)
    from seedreuse_lab import tiny_models as tm
    enc = private_models_dir / "text_encoders" / tm.TEXT_ENCODER
    data = enc.read_bytes()
    enc.unlink()  # it is a symlink into the shared model cache: replace, never write through
    enc.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    res = a.run(t2v_reuse(seed=3, prompt_text="second", reuse="require"))
    assert res.status == "error" and "clip_name@content" in res.error["exception_message"]
    r = a.run(t2v_reuse(seed=3, prompt_text="second", reuse="auto")).raise_for_status()
    assert slot_events(r)["positive"]["action"] == "encoded"


@pytest.fixture(scope="module")
def real_models_dir(tiny_models, tmp_path_factory) -> Path:
    """The tiny models + the full-size CLIP vision ViT-H and wav2vec2 base (stock loaders)."""
    return encoder_models.models_dir_with_encoders(tiny_models, encoder_models.ensure_encoder_models(),
                                                   tmp_path_factory.mktemp("real-encoder-models"))


def test_i2v_reference_image_content_change(comfy_workers, real_models_dir):
    a, b = comfy_workers(2, models_dir=real_models_dir)
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=1)
    ra = a.run(i2v_reuse("ref.png", seed=1, encoders="stock"), timeout=900).raise_for_status()
    assert ra.executed.count(I2V.CLIP_VISION_LOADER) == ra.executed.count(I2V.CLIP_VISION_ENCODE) == 1
    slots = set(manifest(comfy_workers.cache_root, "default")["slots"])
    assert slots == {"i2v_positive", "i2v_negative", "i2v_latent", "text_positive", "clip_vision"}
    rb = b.run(i2v_reuse("ref.png", seed=2, reuse="require", encoders="stock"), timeout=900).raise_for_status()
    assert b.counts().get("text_encode", 0) == 0
    assert I2V.CLIP_VISION_LOADER not in rb.executed and I2V.CLIP_VISION_ENCODE not in rb.executed
    assert I2V.WAN_I2V not in rb.executed and I2V.IMAGE not in rb.executed and I2V.SAMPLER in rb.executed
    # same path, new content: the outer slots and clip vision miss; the text slot still hits
    graphs.write_test_image(Path(b.input_dir) / "ref.png", seed=2)
    res = b.run(i2v_reuse("ref.png", seed=3, reuse="require", encoders="stock"), timeout=900)
    assert res.status == "error" and "is_changed" in res.error["exception_message"] or \
        "@content" in res.error["exception_message"]
    assert I2V.SAMPLER not in res.executed and I2V.CLIP_VISION_ENCODE not in res.executed
    r = b.run(i2v_reuse("ref.png", seed=3, reuse="auto", encoders="stock"), timeout=900).raise_for_status()
    ev = slot_events(r)
    assert ev["i2v_positive"]["action"] == "encoded" and ev["clip_vision"]["action"] == "encoded"
    assert ev["text_positive"]["action"] == "reused"
    # the miss ran the real ViT-H (loader and encoder) on B; the text encoder still did not run
    assert r.executed.count(I2V.CLIP_VISION_LOADER) == r.executed.count(I2V.CLIP_VISION_ENCODE) == 1
    assert b.counts().get("text_encode", 0) == 0
    # the committed cache holds all five slots of the successful run (text carried forward)
    assert set(manifest(comfy_workers.cache_root, "default")["slots"]) == slots


def _with_node_after_decode(p, class_type, inputs, node_id="120"):
    return graphs.insert_between(p, T2V.DECODE, 0, T2V.VIDEO, "images", class_type, inputs,
                                 input_name="value", node_id=node_id)


def test_failed_and_interrupted_runs_leave_the_last_good_cache(pair_over_empty_root):
    a, b, root = pair_over_empty_root
    a.run(t2v_reuse(seed=1, prompt_text="good")).raise_for_status()
    good = manifest(root, "default")
    # a run that fails after sampling (its encoder output was staged) publishes nothing
    p = t2v_reuse(seed=2, prompt_text="bad")
    _with_node_after_decode(p, "SeedReuseTestFail", {"fail": True, "message": "failing after sampling"})
    res = b.run(p)
    assert res.status == "error" and T2V.SAMPLER in res.executed
    assert manifest(root, "default") == good
    # an interrupted run publishes nothing either
    p = t2v_reuse(seed=3, prompt_text="interrupted")
    _with_node_after_decode(p, "SeedReuseTestSlow", {"seconds": 30.0})
    h = b.start_run(p)
    h.wait_executing("120", timeout=120)
    b.interrupt()
    assert h.wait(timeout=120).status == "interrupted"
    assert manifest(root, "default") == good
    assert not (root / "default.tmp").exists()
    # the next reuse still hits the last good run, on either worker
    r = b.run(t2v_reuse(seed=4, prompt_text="good", reuse="require")).raise_for_status()
    assert slot_events(r)["positive"]["action"] == "reused"


def test_two_prompts_racing_on_one_cache(pair_over_empty_root):
    """Issue 27: b runs while a writes the same cache; neither fails. b commits first, a (slow)
    commits after it on top of b's version: a's is the current version."""
    a, b, root = pair_over_empty_root
    pa = t2v_reuse(seed=1, prompt_text="writer a")
    _with_node_after_decode(pa, "SeedReuseTestSlow", {"seconds": 4.0})
    h = a.start_run(pa)
    h.wait_executing("120", timeout=120)      # a is staging now
    rb = b.run(t2v_reuse(seed=2, prompt_text="writer b")).raise_for_status()
    assert T2V.SAMPLER in rb.executed
    assert manifest(root, "default")["slots"]["positive"]["key"]["fields"]["value:text"] == "writer b"
    assert h.wait(timeout=120).status == "success"
    m = manifest(root, "default")
    assert m["slots"]["positive"]["key"]["fields"]["value:text"] == "writer a"
    from reuse_backend.folder.check import check
    assert check(root, "default") == []


@pytest.mark.parametrize("bad", ["../escape", "/etc", "", "a/b", "..", "name%2F..", "x" * 65])
def test_bad_cache_names_refused_at_validation(_module_pair, bad):
    from seedreuse_lab.worker import PromptRejected
    a, _, _ = _module_pair           # refused in POST /prompt: nothing runs, no cache is touched
    with pytest.raises(PromptRejected) as ei:
        a.queue(t2v_reuse(seed=1, cache_name=bad))
    assert "cache name" in json.dumps(ei.value.body).lower()
