"""HunyuanVideo 1.5 image-to-video (ComfyUI 0.33's official template
video_hunyuan_video_1.5_720p_i2v) on the host's own classes, cross-worker.

Built FROM the official template (its 1080p super-resolution pass is bypassed there, as shipped):
instrumented by the pack, converted as the frontend does, the stock UNETLoader detecting a tiny
HunyuanVideo 1.5 I2V DiT (HunyuanVideo15: vision_in for SigLIP's 1152, the byT5 mapper, text
width 3584), shrunk (32 px, 5 frames, 2 steps). What cannot be small stands in: the text
encoder (DualCLIPLoader type hunyuan_video_15: Qwen2.5-VL 7B + byT5 small; the stand-in returns
Qwen2.5-VL's width 3584 and, for quoted text, byT5's glyph features of width 1472 as
``conditioning_byt5small``), SigLIP so400m (CLIPVisionLoader: a real comfy.clip_vision.Output of
729 x 1152 states) and the VAE, which the host builds only at 1.26B parameters (a stand-in
loader builds the host's own vae_refiner Encoder / Decoder at a tiny width). CLIPTextEncode,
CLIPVisionEncode and HunyuanVideo15ImageToVideo are stock.

What is reused: HunyuanVideo15ImageToVideo's three outputs: both conditionings (text, byT5 glyphs,
the start image's latent and mask, SigLIP's output) and the empty latent.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from seedreuse_lab import graphs
from seedreuse_lab import video_family_graphs as vg

from ._video import VIDEO_ONLY, Prepared, actions, assert_hit, items, ran, require_nodes, tensor0

pytestmark = VIDEO_ONLY

OFFICIAL_TEMPLATES_RUN = {"video_hunyuan_video_1.5_720p_i2v": "test_hunyuan15_i2v_reuses_text_glyphs_image_and_siglip"}
PROMPT = 'a neon sign that reads "OPEN LATE" flickers above a rainy street'


@pytest.fixture(scope="module")
def hv15(family_workers):
    a, b, _ = family_workers
    require_nodes(a, "HunyuanVideo15ImageToVideo", "HunyuanVideo15SuperResolution")
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / vg.IMAGE, 48, 32, seed=41)
    return a.object_info()


def test_hunyuan15_i2v_reuses_text_glyphs_image_and_siglip(ab, hv15):
    a, b, _ = ab
    api, report = vg.instrumented("video_hunyuan_video_1.5_720p_i2v", hv15)
    assert report["not_wrapped"] == []
    pa = Prepared(api, seed=1, prefix="hv15_a", prompt=PROMPT)
    assert set(pa.slots) == {"positive", "negative", "latent_image"}
    ra = a.run(pa.prompt, timeout=600).raise_for_status()
    assert actions(ra) == {s: "encoded" for s in pa.slots}
    assert ran(a.counts()) == {"text_loader": 1, "text_encode": 2, "clip_vision_loader": 1, "clip_vision_encode": 1}
    pos = ra.inspected(pa.inspect["positive"])
    assert tensor0(pos)["shape"][2] == 3584
    opts = items(pos)
    assert opts["conditioning_byt5small"]["shape"][2] == 1472              # the quoted "OPEN LATE"
    assert opts["concat_latent_image"]["shape"] == [1, 32, 2, 2, 2] and opts["concat_mask"]["shape"] == [1, 1, 2, 2, 2]
    cv = opts["clip_vision_output"]
    assert cv["type"] == "comfy.clip_vision.Output" and cv["items"]["last_hidden_state"]["shape"] == [1, 729, 1152]
    assert "conditioning_byt5small" not in items(ra.inspected(pa.inspect["negative"]))   # no quotes there

    pb = Prepared(api, seed=2, prefix="hv15_b", reuse="require", prompt=PROMPT)
    b.reset_counts()
    rb = b.run(pb.prompt, timeout=600).raise_for_status()
    assert_hit(pa, ra, pb, rb, b.counts())
    for ct in ("CLIPTextEncode", "CLIPVisionEncode", "HunyuanVideo15ImageToVideo", "LoadImage",
               "SeedReuseTestVideoDualCLIPLoader", "SeedReuseTestSigLIPLoader"):
        assert not {k for k, n in pb.prompt.items() if n["class_type"] == ct} & set(rb.executed), ct
