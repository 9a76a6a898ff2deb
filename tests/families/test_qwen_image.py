"""Qwen-Image on the real host class (QwenImageTransformer2DModel, one full-width block) with the
Qwen-Image VAE architecture (the Wan 2.1 VAE, tiny), T2I and Edit (I2I).

The Qwen2.5-VL encoder is a stand-in with the real nodes' output structure: CONDITIONING
[[tensor(1, L, 3584), {"pooled_output": None}]], and for Edit the real TextEncodeQwenImageEdit
structure with "reference_latents" (VAE-encoded by the real VAE). Cache written on worker A,
reused on worker B with a new seed: no text encode, no VAE encode of the input image on B."""
from __future__ import annotations

from pathlib import Path

import pytest

from seedreuse_lab import graphs
from seedreuse_lab.family_graphs import QEDIT, QT2I, qwen_edit, qwen_t2i

from ._common import manifest, nonzero, slot_events

pytestmark = pytest.mark.comfy
ENCODERS = ("text_loader", "text_encode", "clip_vision_loader", "clip_vision_encode", "audio_loader", "audio_encode")


def test_qwen_image_t2i_cross_worker(ab):
    a, b, root = ab
    pa = qwen_t2i(seed=31)
    graphs.add_inspect(pa, QT2I.DECODE, node_id="90", label="image")
    graphs.add_inspect(pa, QT2I.R_POS, node_id="91", label="positive")
    ra = a.run(pa, timeout=600).raise_for_status()
    assert a.counts()["text_encode"] == 2
    assert set(manifest(root, "qwen_t2i")["slots"]) == {"positive", "negative"}
    cond = ra.inspected("91")["items"][0]["items"]
    words = len("a tiny qwen image".split())
    assert cond[0]["shape"] == [1, words + 5, 3584] and cond[1]["items"] == {"pooled_output": {"type": "NoneType",
                                                                                               "value": None}}

    pb = qwen_t2i(seed=32, reuse="require")
    graphs.add_inspect(pb, QT2I.DECODE, node_id="90", label="image")
    rb = b.run(pb, timeout=600).raise_for_status()
    assert nonzero(b.counts(), *ENCODERS) == {}
    assert QT2I.POS not in rb.executed and QT2I.NEG not in rb.executed
    assert {k: v["action"] for k, v in slot_events(rb).items()} == {"positive": "reused", "negative": "reused"}
    assert QT2I.SAMPLER in rb.executed
    img_a, img_b = ra.inspected("90"), rb.inspected("90")
    assert img_a["shape"] == img_b["shape"] == [1, 32, 32, 3]
    assert img_a["sha256"] != img_b["sha256"]


def test_qwen_image_edit_cross_worker(ab):
    a, b, root = ab
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "edit_input.png", 32, 32, seed=9)
    pa = qwen_edit("edit_input.png", seed=41)
    graphs.add_inspect(pa, QEDIT.DECODE, node_id="90", label="image")
    graphs.add_inspect(pa, QEDIT.R_POS, node_id="91", label="edit positive")
    graphs.add_inspect(pa, QEDIT.R_LATENT, node_id="92", label="image latent")
    ra = a.run(pa, timeout=600).raise_for_status()
    assert a.counts()["text_encode"] == 2
    assert set(manifest(root, "qwen_edit")["slots"]) == {"edit_positive", "edit_negative", "image_latent"}
    pos = ra.inspected("91")["items"][0]["items"]
    assert pos[0]["shape"][0] == 1 and pos[0]["shape"][2] == 3584
    refs = pos[1]["items"]["reference_latents"]["items"]
    assert len(refs) == 1 and refs[0]["shape"] == [1, 16, 1, 4, 4]        # 32x32 input, Wan 2.1 VAE /8

    pb = qwen_edit("edit_input.png", seed=42, reuse="require")
    graphs.add_inspect(pb, QEDIT.DECODE, node_id="90", label="image")
    graphs.add_inspect(pb, QEDIT.R_POS, node_id="91", label="edit positive")
    graphs.add_inspect(pb, QEDIT.R_LATENT, node_id="92", label="image latent")
    rb = b.run(pb, timeout=600).raise_for_status()
    assert nonzero(b.counts(), *ENCODERS) == {}
    for nid in (QEDIT.POS, QEDIT.NEG, QEDIT.ENCODE, QEDIT.SCALE, QEDIT.IMAGE):
        assert nid not in rb.executed, nid
    assert {k: v["action"] for k, v in slot_events(rb).items()} == {
        "edit_positive": "reused", "edit_negative": "reused", "image_latent": "reused"}
    assert rb.inspected("91") == ra.inspected("91") and rb.inspected("92") == ra.inspected("92")
    img_a, img_b = ra.inspected("90"), rb.inspected("90")
    assert img_a["shape"] == img_b["shape"]
    assert img_a["sha256"] != img_b["sha256"]
