"""The generated full-size encoder files (seedreuse_lab/encoder_models.py) have the layout the stock
loaders pick ViT-H / wav2vec2 base from, in fp16, and are generated once (a second call reuses them).

Read from the safetensors headers only (no model is built here); the generator itself loads both
files through comfy.clip_vision.load / load_audio_encoder_from_sd and compares every key with
the loaded model's state dict, and its report says what the loaders detected."""
from __future__ import annotations

import json
import math
import os
import struct

import pytest

from seedreuse_lab import encoder_models as em

pytestmark = pytest.mark.comfy


def header(path) -> dict:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


@pytest.fixture(scope="module")
def enc():
    return em.ensure_encoder_models()


def test_clip_vision_h_layout(enc):
    h = header(enc.path("clip_vision", em.CLIP_VISION_H))
    h.pop("__metadata__", None)
    assert {v["dtype"] for v in h.values()} == {"F16"}
    # comfy/clip_vision.py: layers.47 -> ViT-bigG, layers.30 -> ViT-H, layers.22 -> ViT-L
    assert "vision_model.encoder.layers.30.layer_norm1.weight" in h
    assert "vision_model.encoder.layers.31.layer_norm1.weight" in h
    assert "vision_model.encoder.layers.32.layer_norm1.weight" not in h
    assert h["vision_model.embeddings.position_embedding.weight"]["shape"] == [257, 1280]
    assert h["visual_projection.weight"]["shape"] == [1024, 1280]
    params = sum(1 if not v["shape"] else math.prod(v["shape"]) for v in h.values())
    assert params == enc.report["built"]["clip_vision"]["parameters"] == 632_076_800
    assert enc.report["verified"]["clip_vision"]["detected"] == "ViT-H/14"


def test_wav2vec2_base_layout(enc):
    h = header(enc.path("audio_encoders", em.WAV2VEC2_BASE))
    h.pop("__metadata__", None)
    assert {v["dtype"] for v in h.values()} == {"F16"}
    # comfy/audio_encoders/audio_encoders.py: encoder.layer_norm.bias of width 768 -> base
    assert h["encoder.layer_norm.bias"]["shape"] == [768]
    assert "encoder.layers.11.final_layer_norm.weight" in h and "encoder.layers.12.final_layer_norm.weight" not in h
    assert enc.report["verified"]["audio_encoder"] == {**enc.report["verified"]["audio_encoder"],
                                                       "detected": "wav2vec2 base", "layers": 12, "width": 768}


def test_generated_once(enc):
    again = em.ensure_encoder_models()
    assert again.generated is False and again.root == enc.root
    assert enc.path("clip_vision", em.CLIP_VISION_H).stat().st_size == enc.report["built"]["clip_vision"]["bytes"]


def test_pruning_keeps_the_other_hosts_versions(tmp_path):
    """The two hosts share <repo>/.cache/tiny-models: a new version prunes only the older ones
    generated for the same ComfyUI version (report "comfyui"; none = this host's), never the
    other host's a suite of it may be reading, nor unfinished ones. Real dirs, a child process
    with its own SEEDREUSE_TINY_MODELS_CACHE."""
    import subprocess

    from seedreuse_lab import host

    here = host.comfyui_version()
    for name, made_for in (("x-keep", here), ("x-same", here), ("x-other", here + "-other"), ("x-nokey", None)):
        (tmp_path / name).mkdir()
        report = {} if made_for is None else {"comfyui": made_for}
        (tmp_path / name / "report.json").write_text(json.dumps(report))
    (tmp_path / "x-new.tmp-123").mkdir()
    env = host.module_env(base={**os.environ, "SEEDREUSE_TINY_MODELS_CACHE": str(tmp_path)})
    subprocess.run([host.python_executable(), "-c",
                    "from seedreuse_lab import tiny_models as tm; tm.prune_older('x-', 'x-keep')"],
                   env=env, cwd=str(host.REPO_ROOT), check=True, timeout=120)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x-keep", "x-new.tmp-123", "x-other"]
