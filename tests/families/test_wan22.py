"""Wan 2.2 on the real host classes: the A14B two-expert graph and the TI2V 5B graph.

Cache written on worker A, reused on worker B with a new seed: the stand-in text encoder (and,
for TI2V, the Wan 2.2 VAE encode of the start image) never run on B, and B's decoded frames
differ from A's (IMAGE sha256 through SeedReuseTestInspect)."""
from __future__ import annotations

from pathlib import Path

import pytest

from seedreuse_lab import graphs
from seedreuse_lab.family_graphs import TI2V, W22, wan22_ti2v, wan22_two_expert

from ._common import executed_display, manifest, nonzero, slot_events

pytestmark = pytest.mark.comfy
ENCODERS = ("text_loader", "text_encode", "clip_vision_loader", "clip_vision_encode", "audio_loader", "audio_encode")


def test_wan22_two_expert_shares_reused_conditioning(ab):
    a, b, root = ab
    pa = wan22_two_expert(seed=11, cache_name="wan22_experts")
    graphs.add_inspect(pa, W22.DECODE, node_id="90", label="frames")
    graphs.add_inspect(pa, W22.SAMPLER_HIGH, node_id="91", label="high-noise latent")
    ra = a.run(pa).raise_for_status()
    assert a.counts()["text_encode"] == 2
    assert set(manifest(root, "wan22_experts")["slots"]) == {"positive", "negative"}

    pb = wan22_two_expert(seed=12, cache_name="wan22_experts", reuse="require")
    graphs.add_inspect(pb, W22.DECODE, node_id="90", label="frames")
    graphs.add_inspect(pb, W22.SAMPLER_HIGH, node_id="91", label="high-noise latent")
    # both experts read the one reused pair of conditionings
    for sampler in (W22.SAMPLER_HIGH, W22.SAMPLER_LOW):
        assert pb[sampler]["inputs"]["positive"] == [W22.R_POS, 0]
        assert pb[sampler]["inputs"]["negative"] == [W22.R_NEG, 0]
    rb = b.run(pb).raise_for_status()
    assert nonzero(b.counts(), *ENCODERS) == {}
    assert W22.POS not in rb.executed and W22.NEG not in rb.executed and W22.TEXT_LOADER not in rb.executed
    ev = slot_events(rb)
    assert ev["positive"]["action"] == "reused" and ev["negative"]["action"] == "reused"
    assert executed_display(rb, W22.SAMPLER_HIGH) == 1 and executed_display(rb, W22.SAMPLER_LOW) == 1
    assert W22.HIGH in rb.executed and W22.LOW in rb.executed
    img_a, img_b = ra.inspected("90"), rb.inspected("90")
    assert img_a["shape"] == img_b["shape"] == [9, 64, 64, 3]
    assert img_a["sha256"] != img_b["sha256"]
    assert ra.inspected("91")["items"]["samples"]["sha256"] != rb.inspected("91")["items"]["samples"]["sha256"]


def test_wan22_ti2v_5b_reuses_text_and_start_latent(ab):
    a, b, root = ab
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "ti2v_start.png", 32, 32, seed=5)
    pa = wan22_ti2v("ti2v_start.png", seed=21)
    graphs.add_inspect(pa, TI2V.DECODE, node_id="90", label="frames")
    graphs.add_inspect(pa, TI2V.R_LATENT, node_id="91", label="ti2v latent")
    ra = a.run(pa, timeout=600).raise_for_status()
    assert set(manifest(root, "wan22_ti2v")["slots"]) == {"positive", "negative", "ti2v_latent"}
    lat = ra.inspected("91")["items"]
    assert lat["samples"]["shape"] == [1, 48, 2, 2, 2]          # Wan 2.2 latent: 48 channels, /16, (5-1)/4+1
    assert lat["noise_mask"]["shape"] == [1, 1, 2, 2, 2]

    pb = wan22_ti2v("ti2v_start.png", seed=22, reuse="require")
    graphs.add_inspect(pb, TI2V.DECODE, node_id="90", label="frames")
    graphs.add_inspect(pb, TI2V.R_LATENT, node_id="91", label="ti2v latent")
    rb = b.run(pb, timeout=600).raise_for_status()
    assert nonzero(b.counts(), *ENCODERS) == {}
    assert TI2V.LATENT not in rb.executed and TI2V.IMAGE not in rb.executed   # no Wan 2.2 VAE encode on B
    assert TI2V.SAMPLER in rb.executed and TI2V.DECODE in rb.executed
    assert {k: v["action"] for k, v in slot_events(rb).items()} == {
        "positive": "reused", "negative": "reused", "ti2v_latent": "reused"}
    assert rb.inspected("91") == ra.inspected("91")                 # the exact latent A encoded
    img_a, img_b = ra.inspected("90"), rb.inspected("90")
    assert img_a["shape"] == img_b["shape"] == [5, 32, 32, 3]
    assert img_a["sha256"] != img_b["sha256"]
