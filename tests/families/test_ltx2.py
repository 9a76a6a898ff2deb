"""LTX-2 (ComfyUI 0.33's LTX-2.3 official templates) on the host's own classes, cross-worker.

Built FROM the official templates video_ltx2_3_t2v, video_ltx2_3_i2v and video_ltx2_3_flf2v:
instrumented by the pack (the worker's /object_info), converted as the frontend does, the models
pointed at a tiny LTX-2 audio-video checkpoint (LTXAVModel, LTX video VAE, audio VAE and vocoder
of the host, detected by CheckpointLoaderSimple / LTXVAudioVAELoader) and a tiny latent
upsampler, shrunk (128 px, 9 frames at 8 fps, both passes). Every node is stock except
LTXAVTextEncoderLoader: Gemma 3 12B cannot be small, so its stand-in returns an object the stock
CLIPTextEncode and TextGenerateLTX2Prompt call (Gemma's output width 3840 and structure,
``generate`` a function of the prompt, image and seed). The templates' LoRAs are bypassed.

What is reused: the audio-video latent (LTXVConcatAVLatent: a NestedTensor of video and audio
latents, with the start image's noise masks in I2V), both conditionings after LTXVConditioning
(and LTXVAddGuide's keyframe indices and guide entries in FLF2V), and the prompt enhancer's text
(TextGenerateLTX2Prompt, shown by the template's PreviewAny: the STRING variant). Not reused, and
reported by the instrumenter: the upscale pass's LTXVImgToVideoInplace VAE-encodes the start
image into the sampled latent on every request.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from seedreuse_lab import graphs
from seedreuse_lab import official_templates as ot
from seedreuse_lab import video_family_graphs as vg

from ._video import VIDEO_ONLY, Prepared, actions, assert_hit, items, ran, require_nodes, tensor0

pytestmark = VIDEO_ONLY

OFFICIAL_TEMPLATES_RUN = {"video_ltx2_3_t2v": "test_ltx2_t2v_prompt_enhancer_and_av_latent_reused_across_workers",
                          "video_ltx2_3_i2v": "test_ltx2_i2v_start_image_latent_and_enhanced_prompt_reused",
                          "video_ltx2_3_flf2v": "test_ltx2_flf2v_guides_with_keyframe_indices_restored"}


@pytest.fixture(scope="module")
def ltx(family_workers):
    a, b, _ = family_workers
    require_nodes(a, "LTXAVTextEncoderLoader", "TextGenerateLTX2Prompt", "LTXVConcatAVLatent", "LTXVImgToVideoInplace",
                  "LTXVAddGuide")
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / vg.IMAGE, 64, 48, seed=11)
        graphs.write_test_image(Path(w.input_dir) / vg.LAST_IMAGE, 64, 48, seed=12)
    return a.object_info()


def test_ltx2_t2v_prompt_enhancer_and_av_latent_reused_across_workers(ab, ltx):
    a, b, root = ab
    api, report = vg.instrumented("video_ltx2_3_t2v", ltx)
    assert [n["class_type"] for n in report["not_wrapped"]] == ["LTXVImgToVideoInplace"]
    # the canvas' action (POST /seedreuse/instrument, the host's classes for the types) wraps the same
    route = a.post_json("/seedreuse/instrument", {"workflow": ot.load_template("video_ltx2_3_t2v"),
                                                  "name": "video_ltx2_3_t2v"})["report"]
    assert [(w["slot"], w["producer"]["node"]) for w in route["wrapped"]] == \
        [(w["slot"], w["producer"]["node"]) for w in report["wrapped"]]
    # an output node the instrumenter's table does not know (the test pack's Inspect) is one for the
    # route too: the host says so
    enhanced = {"1": {"class_type": "SeedReuseTestLTXAVTextEncoderLoader", "inputs": {}},
                "2": {"class_type": "TextGenerateLTX2Prompt", "inputs": {"clip": ["1", 0], "prompt": "a fox"}},
                "3": {"class_type": "SeedReuseTestInspect", "inputs": {"value": ["2", 0], "label": "text"}}}
    route = a.post_json("/seedreuse/instrument", {"workflow": enhanced})["report"]
    assert [(w["slot"], w["producer"]["node"]) for w in route["wrapped"]] == [("generated_text", "2")]
    pa = Prepared(api, seed=1, prefix="ltx2_t2v_a", enhancer_seed=5)
    assert set(pa.slots) == {"generated_text", "positive", "negative", "latent_image"}
    ra = a.run(pa.prompt, timeout=600).raise_for_status()
    assert actions(ra) == {s: "encoded" for s in pa.slots}
    assert ran(a.counts()) == {"text_loader": 1, "text_encode": 2, "text_generate": 1}
    text = ra.inspected(pa.inspect["generated_text"])
    assert text["type"] == "str" and text["value"].startswith("Style: ")
    pos = ra.inspected(pa.inspect["positive"])
    assert tensor0(pos)["shape"][2] == 3840            # the Gemma 3 12B projection's width
    assert items(pos)["unprocessed_ltxav_embeds"]["value"] is True and items(pos)["frame_rate"]["value"] == 8.0
    av = ra.inspected(pa.inspect["latent_image"])["items"]["samples"]
    assert av["type"] == "NestedTensor"                 # video [1, 128, T, H, W] + audio [1, 8, T, 16]
    assert av["items"][0]["shape"] == [1, 128, 2, 2, 2] and av["items"][1]["shape"][:2] == [1, 8]

    pb = Prepared(api, seed=2, prefix="ltx2_t2v_b", reuse="require", enhancer_seed=5)
    b.reset_counts()
    rb = b.run(pb.prompt, timeout=600).raise_for_status()
    assert_hit(pa, ra, pb, rb, b.counts())

    # the enhancer's own seed is part of its key: a changed one runs the language model again
    # (and re-encodes what reads its text); the audio-video latent stays reused
    b.reset_counts()
    pc = Prepared(api, seed=3, prefix="ltx2_t2v_c", enhancer_seed=6)
    rc = b.run(pc.prompt, timeout=600).raise_for_status()
    assert actions(rc) == {"generated_text": "encoded", "positive": "encoded", "negative": "encoded",
                           "latent_image": "reused"}
    assert ran(b.counts()) == {"text_loader": 1, "text_encode": 2, "text_generate": 1}
    assert rc.inspected(pc.inspect["generated_text"])["value"] != text["value"]


def test_ltx2_i2v_start_image_latent_and_enhanced_prompt_reused(ab, ltx):
    a, b, _ = ab
    api, report = vg.instrumented("video_ltx2_3_i2v", ltx)
    assert [n["class_type"] for n in report["not_wrapped"]] == ["LTXVImgToVideoInplace"]
    pa = Prepared(api, seed=7, prefix="ltx2_i2v_a", enhance=True, enhancer_seed=1)
    ra = a.run(pa.prompt, timeout=600).raise_for_status()
    assert actions(ra) == {s: "encoded" for s in ("generated_text", "positive", "negative", "latent_image")}
    assert ran(a.counts()) == {"text_loader": 1, "text_encode": 2, "text_generate": 1}
    lat = ra.inspected(pa.inspect["latent_image"])["items"]
    assert lat["samples"]["type"] == lat["noise_mask"]["type"] == "NestedTensor"
    assert lat["noise_mask"]["items"][0]["shape"] == [1, 1, 2, 1, 1]   # the start image's latent frame, masked

    pb = Prepared(api, seed=8, prefix="ltx2_i2v_b", reuse="require", enhance=True, enhancer_seed=1)
    b.reset_counts()
    rb = b.run(pb.prompt, timeout=600).raise_for_status()
    assert_hit(pa, ra, pb, rb, b.counts())
    # the reported limit: the upscale pass encodes the start image again on every request
    upscale_pass = [k for k, n in pb.prompt.items() if n["class_type"] == "LTXVImgToVideoInplace"
                    and k not in pb.covered()]
    assert len(upscale_pass) == 1 and upscale_pass[0] in rb.executed


def test_ltx2_flf2v_guides_with_keyframe_indices_restored(ab, ltx):
    a, b, _ = ab
    api, report = vg.instrumented("video_ltx2_3_flf2v", ltx)
    assert report["not_wrapped"] == []
    pa = Prepared(api, seed=21, prefix="ltx2_flf_a")
    assert set(pa.slots) == {"positive", "negative", "latent_image"}     # LTXVAddGuide's outputs, the AV latent
    ra = a.run(pa.prompt, timeout=600).raise_for_status()
    opts = items(ra.inspected(pa.inspect["positive"]))
    assert opts["keyframe_idxs"]["dtype"] == "int64" and len(opts["guide_attention_entries"]["items"]) == 2
    pb = Prepared(api, seed=22, prefix="ltx2_flf_b", reuse="require")
    b.reset_counts()
    rb = b.run(pb.prompt, timeout=600).raise_for_status()
    assert_hit(pa, ra, pb, rb, b.counts())
