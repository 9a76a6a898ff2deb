"""InfiniteTalk (Wan 2.1 I2V + InfiniteTalk patch, speech-to-video) with the SeedReuse nodes.

0.3.75 has no WanInfiniteTalkToVideo: SeedReuseTestInfiniteTalkToVideo stands in for it (same
inputs and outputs as the newer host's node, same audio-window and motion-frame logic; it records
the window it used). The diffusion model and the VAE are the real tiny Wan 2.1 I2V and VAE; the
text, CLIP vision and wav2vec2 encoders are the counting stand-ins.

* one clip: the text, CLIP vision and whole-track audio-encoder outputs are reused across workers
  (0 encoder executions on B); the node takes the window [0, length) of the reused features.
* a long video as a Segment Loop: text and CLIP vision reused outside the loop; segment i's
  audio (the loop's segment_audio) is the track at frames [start(i), start(i) + F),
  start(i) = i*(F-M); the body encodes it and the node continues from the loop's motion frames;
  worker B resumes A's video at N with a new seed: segments < N are not generated, B's segment N
  starts from exactly A's boundary frames, the kept frames are identical, the new ones differ.
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from harness import graphs
from harness.family_graphs import IT, infinitetalk_clip, infinitetalk_segments
from reuse_backend import video

from ._common import executed_display, manifest, nonzero, slot_events, ui_of

pytestmark = pytest.mark.comfy
SR, FPS, FREQ = 16000, 25.0, 220.0


def sine(seconds: float) -> torch.Tensor:
    """SeedReuseTestSineAudio's waveform [1, 1, n]."""
    n = int(round(seconds * SR))
    t = torch.arange(n, dtype=torch.float64) / SR
    return (0.5 * torch.sin(2 * math.pi * FREQ * t)).to(torch.float32).reshape(1, 1, n)


def tensor_sha(t: torch.Tensor) -> str:
    """The sha256 that SeedReuseTestInspect / Tap report for a tensor."""
    t = t.detach().to("cpu")
    data = repr(tuple(t.shape)).encode() + t.to(torch.float32).contiguous().numpy().tobytes()
    return hashlib.sha256(data + str(t.dtype).encode()).hexdigest()


def expected_window(wave: torch.Tensor, i: int, F: int, M: int) -> torch.Tensor:
    """The audio under segment i, computed here from first principles: frames
    [i*(F-M), i*(F-M)+F) at FPS, i.e. samples [start*SR/FPS, (start+F)*SR/FPS), zero-padded."""
    start = i * (F - M)
    a, b = round(start * SR / FPS), round((start + F) * SR / FPS)
    out = wave[..., a:b]
    return torch.nn.functional.pad(out, (0, (b - a) - out.shape[-1]))


def test_infinitetalk_clip_encoder_reuse(ab):
    a, b, root = ab
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "talk_ref.png", 64, 64, seed=3)
    pa = infinitetalk_clip("talk_ref.png", seed=51)
    graphs.add_inspect(pa, IT.DECODE, node_id="90", label="frames")
    ra = a.run(pa).raise_for_status()
    ca = a.counts()
    assert (ca["text_encode"], ca["clip_vision_encode"], ca["audio_encode"]) == (1, 1, 1)
    assert set(manifest(root, "infinitetalk_clip")["slots"]) == {"positive", "clip_vision", "audio_features"}

    pb = infinitetalk_clip("talk_ref.png", seed=52, reuse="require")
    graphs.add_inspect(pb, IT.DECODE, node_id="90", label="frames")
    rb = b.run(pb).raise_for_status()
    assert nonzero(b.counts(), "text_loader", "text_encode", "clip_vision_loader", "clip_vision_encode",
                   "audio_loader", "audio_encode") == {}
    assert {k: v["action"] for k, v in slot_events(rb).items()} == {
        "positive": "reused", "clip_vision": "reused", "audio_features": "reused"}
    win_a, win_b = ui_of(ra, IT.TALK, "infinitetalk"), ui_of(rb, IT.TALK, "infinitetalk")
    assert len(win_a) == len(win_b) == 1
    assert (win_b[0]["audio_start"], win_b[0]["audio_end"], win_b[0]["is_extend"]) == (0, 9, False)
    assert win_b[0]["window_sha256"] == win_a[0]["window_sha256"]      # the same features, not re-encoded
    img_a, img_b = ra.inspected("90"), rb.inspected("90")
    assert img_a["shape"] == img_b["shape"] == [9, 64, 64, 3]
    assert img_a["sha256"] != img_b["sha256"]


def _segments(res):
    """Per generated segment, in order: (segment_audio, previous_frames, images) tap records and
    the stand-in node's window record."""
    taps = {label: [] for label in ("segment_audio", "previous_frames", "images")}
    for rec in ui_of(res, IT.TAP_AUDIO, "inspect") + ui_of(res, IT.TAP_MOTION, "inspect") + \
            ui_of(res, IT.TAP_IMAGES, "inspect"):
        taps[rec["label"]].append(rec["value"])
    return taps, ui_of(res, IT.SEG_TALK, "infinitetalk")


def test_infinitetalk_segment_loop_audio_windows_and_resume(ab):
    a, b, root = ab
    F, M, S, N = 9, 5, 3, 1
    total = S * (F - M) + M                                    # 17 frames
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "talk_ref.png", 64, 64, seed=3)
    wave = sine(total / FPS)

    ra = a.run(infinitetalk_segments("talk_ref.png", seed=61, F=F, M=M, total_frames=total)).raise_for_status()
    assert a.counts()["audio_encode"] == S and a.counts()["text_encode"] == 1
    taps_a, talk_a = _segments(ra)
    assert len(talk_a) == len(taps_a["segment_audio"]) == S
    for i in range(S):
        seg = taps_a["segment_audio"][i]["items"]
        exp = expected_window(wave, i, F, M)
        assert seg["sample_rate"]["value"] == SR
        assert seg["waveform"]["shape"] == list(exp.shape) == [1, 1, F * SR // int(FPS)]
        assert seg["waveform"]["sha256"] == tensor_sha(exp), f"segment {i}: wrong audio window"
        rec = talk_a[i]
        assert (rec["audio_start"], rec["audio_end"]) == (0, F)     # into the segment's own features
        assert rec["audio_samples_16k"] == exp.shape[-1]
        assert rec["previous_frames"] == (None if i == 0 else M) and rec["is_extend"] == (i > 0)
        if i > 0:   # segment i continues from the last M frames segment i-1 decoded
            assert rec["previous_frames_sha256"] == taps_a["previous_frames"][i]["sha256"]
    v1 = video.decode_frames(str(a.output_path(ra.output_files(IT.MERGE)[0])))
    assert v1.shape[0] == total

    b.reset_counts()
    rb = b.run(infinitetalk_segments("talk_ref.png", seed=62, F=F, M=M, total_frames=total, prefix_segments=N,
                                     reuse="require")).raise_for_status()
    cb = b.counts()
    assert nonzero(cb, "text_loader", "text_encode", "clip_vision_loader", "clip_vision_encode") == {}
    assert cb["audio_encode"] == S - N                          # only the generated segments' windows
    assert executed_display(rb, IT.SEG_SAMPLER) == S - N
    assert {k: v["action"] for k, v in slot_events(rb).items()} == {"positive": "reused", "clip_vision": "reused"}
    taps_b, talk_b = _segments(rb)
    assert len(talk_b) == S - N
    for j, i in enumerate(range(N, S)):
        exp = expected_window(wave, i, F, M)
        assert taps_b["segment_audio"][j]["items"]["waveform"]["sha256"] == tensor_sha(exp), f"segment {i}"
        assert (talk_b[j]["audio_start"], talk_b[j]["audio_end"], talk_b[j]["previous_frames"]) == (0, F, M)
        # B generates segment i with a new seed from the same inputs A had
        assert taps_b["images"][j]["sha256"] != taps_a["images"][i]["sha256"]
    # B's first segment starts from exactly the boundary A saved
    assert taps_b["previous_frames"][0]["sha256"] == taps_a["previous_frames"][N]["sha256"]
    v2 = video.decode_frames(str(b.output_path(rb.output_files(IT.MERGE)[0])))
    p_n = N * (F - M) + M
    assert v2.shape[0] == total
    assert np.array_equal(v2[:p_n], v1[:p_n])
    assert not np.array_equal(v2[p_n:], v1[p_n:])
    assert video.audio_packets_digest(str(a.output_path(ra.output_files(IT.MERGE)[0]))) == \
        video.audio_packets_digest(str(b.output_path(rb.output_files(IT.MERGE)[0])))
