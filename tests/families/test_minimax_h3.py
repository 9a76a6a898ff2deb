"""MiniMax H3 image-to-video (ComfyUI 0.33's official template video_minimax_h3_i2v) on the host's
own classes, cross-worker.

Built FROM the official template: instrumented by the pack, converted as the frontend does, the
stock UNETLoader detecting a tiny MiniMax H3 packed DiT, the stock VAELoader loading the MiniMax
H3 audio VAE at its host-fixed full size (DAC encoder + BigVGAN decoder, 151M parameters, random
weights), shrunk (64 px, 5 frames, 2 steps). Two parts cannot be small: Qwen3-VL 32B (CLIPLoader
type minimax: a stand-in whose object the STOCK MiniMaxH3ImageToVideo calls, returning Qwen3-VL's
width 5120, one vision block per image and the per-token modality tags) and the video VAE, which
the host builds only at 2.6B parameters (a stand-in loader builds the host's own
MiniMaxH3VideoVAE at a tiny config through comfy.sd.VAE). The template's turbo LoRA is bypassed.

What is reused: MiniMaxH3ImageToVideo's two outputs, which cover its Qwen3-VL encode and the
first frame's VAE encode: the conditioning (hidden states, token tags, and the keyframe list with
the first frame's latent at frame 0) and the audio-video latent (a NestedTensor).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from seedreuse_lab import graphs
from seedreuse_lab import video_family_graphs as vg

from ._video import VIDEO_ONLY, Prepared, actions, assert_hit, items, ran, require_nodes, tensor0

pytestmark = VIDEO_ONLY

OFFICIAL_TEMPLATES_RUN = {"video_minimax_h3_i2v": "test_minimax_h3_i2v_reuses_prompt_image_and_av_latent"}
PROMPT = "the mouse turns slowly on a glass table, soft studio light"


@pytest.fixture(scope="module")
def minimax(family_workers):
    a, b, _ = family_workers
    require_nodes(a, "MiniMaxH3ImageToVideo", "EmptyMiniMaxH3LatentAV")
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / vg.IMAGE, 64, 48, seed=31)
    return a.object_info()


def test_minimax_h3_i2v_reuses_prompt_image_and_av_latent(ab, minimax):
    a, b, _ = ab
    api, report = vg.instrumented("video_minimax_h3_i2v", minimax)
    assert report["not_wrapped"] == []
    assert {w["producer"]["class_type"] for w in report["wrapped"]} == {"MiniMaxH3ImageToVideo"}
    pa = Prepared(api, seed=1, prefix="minimax_a", prompt=PROMPT)
    assert set(pa.slots) == {"positive", "latent_image"}
    ra = a.run(pa.prompt, timeout=600).raise_for_status()
    assert actions(ra) == {"positive": "encoded", "latent_image": "encoded"}
    assert ran(a.counts()) == {"text_loader": 1, "text_encode": 1}
    pos = ra.inspected(pa.inspect["positive"])
    n_tokens = tensor0(pos)["shape"][1]
    assert tensor0(pos)["shape"] == [1, n_tokens, 5120]
    opts = items(pos)
    assert opts["minimax_token_tags"]["shape"] == [n_tokens] and opts["minimax_token_tags"]["dtype"] == "int64"
    [kf] = opts["minimax_keyframes"]["items"]
    assert kf["items"]["resolved_frame_index"]["value"] == 0
    assert kf["items"]["latent"]["shape"] == [1, 24, 1, 4, 4]          # the first frame, 64 px / 16
    av = ra.inspected(pa.inspect["latent_image"])["items"]["samples"]
    assert av["type"] == "NestedTensor"
    assert [t["shape"] for t in av["items"]] == [[1, 24, 2, 4, 4], [1, 32, 2, 8]]   # 5 frames; 5/24 s of audio at 40 Hz

    pb = Prepared(api, seed=2, prefix="minimax_b", reuse="require", prompt=PROMPT)
    b.reset_counts()
    rb = b.run(pb.prompt, timeout=600).raise_for_status()
    assert_hit(pa, ra, pb, rb, b.counts())
    for ct in ("MiniMaxH3ImageToVideo", "LoadImage", "SeedReuseTestVideoCLIPLoader"):
        assert not {k for k, n in pb.prompt.items() if n["class_type"] == ct} & set(rb.executed), ct
