"""InfiniteTalk (Wan 2.1 I2V + InfiniteTalk patch, speech-to-video) with the SeedReuse nodes.

WanInfiniteTalkToVideo is selected by what the worker registers (``talk`` fixture): on a host
that has it (ComfyUI 0.33) the graphs run the STOCK node with the stock ModelPatchLoader and a
tiny MultiTalk patch (seedreuse_lab/infinitetalk_models.py: seeded random weights, 40 blocks,
the Wan 2.1 I2V widened to dim 320), in the one clip and inside the Segment Loop body, and
SeedReuseTestInfiniteTalkProbe reports what it did (which window of the features its projected
audio_embeds are, found by bit-exact comparison; is_extend and the motion latent of its sampling
wrapper). On a host without it (0.3.75) SeedReuseTestInfiniteTalkToVideo stands in (same inputs
and outputs, same audio-window and motion-frame logic; it records the window it used; the
projection and the attention patch are not run). The assertions are the same on both hosts;
the stock node adds a few (its projected window and motion latent identical on B for the kept
inputs). The diffusion model and the VAE are the real tiny Wan 2.1 I2V and VAE; CLIP
vision and the audio encoder are ComfyUI's own CLIPVisionLoader / CLIPVisionEncode (ViT-H/14) and
AudioEncoderLoader / AudioEncoderEncode (wav2vec2 base: 768 wide, 12 layers, so 13 hidden-state
layers) with full-size random-weight files (seedreuse_lab/encoder_models.py), counted from the
``executing`` events; only the text encoder (umT5-XXL) is the counting stand-in.

* one clip: the text, CLIP vision and whole-track audio-encoder outputs are reused across workers
  (0 encoder executions on B); the node takes the window [0, length) of the reused features.
* a long video as a Segment Loop: text, CLIP vision AND the whole track's audio-encoder output
  are encoded outside the loop, once, through Encode or Reuse; Segment Loop Start cuts the
  features per segment (segment_audio_features = the feature frames under video frames
  [start(i), start(i) + F), start(i) = i*(F-M)), checked here against a slice of the cached
  whole-track features computed in this file; the node continues from the loop's motion frames
  with its window at [0, F) of that cut; worker B resumes A's video at N with a new seed: the
  audio encoder and its loader do not run (cache hit), segments < N are not generated, B's
  segment N starts from exactly A's boundary frames, the kept frames are identical, the new
  ones differ.
"""
from __future__ import annotations

import hashlib
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from seedreuse_lab import graphs, host
from seedreuse_lab.family_graphs import IT, infinitetalk_clip, infinitetalk_segments
from reuse_backend.media import video
from reuse_backend.folder.cache import FolderCache

from ._common import executed_display, manifest, nonzero, slot_events, ui_of

pytestmark = pytest.mark.comfy
SR, FPS, FREQ = 16000, 25.0, 220.0
# the stock CLIP vision and audio-encoder loaders and encoders of both graphs
STOCK_ENCODERS = (IT.CV_LOADER, IT.CV_ENCODE, IT.AUDIO_LOADER, IT.AUDIO_ENCODE)


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


def feature_slice(track: dict, i: int, F: int, M: int) -> tuple[dict, tuple[int, int]]:
    """Segment i's cut of the whole-track audio-encoder output, computed here from first
    principles: wav2vec2 features run at the nominal r = 50 frames per second (the rate the
    InfiniteTalk node assumes), segment i covers video frames [start, start + F),
    start = i*(F-M), so it gets round(F*r/FPS) feature frames from round(start*r/FPS) (halves up),
    zero-padded past the end of the track; audio_samples becomes the 16 kHz length of that cut."""
    enc = track["encoded_audio"]
    r = Fraction(50)
    start = i * (F - M)
    a = math.floor(Fraction(start) * r / Fraction(FPS) + Fraction(1, 2))
    b = a + math.floor(Fraction(F) * r / Fraction(FPS) + Fraction(1, 2))

    def cut(t):
        out = t[:, a:b]
        return torch.nn.functional.pad(out, (0, 0, 0, (b - a) - out.shape[1]))

    layers = tuple(cut(t) for t in track["encoded_audio_all_layers"])
    return {"encoded_audio": cut(enc), "encoded_audio_all_layers": layers,
            "audio_samples": round((b - a) * SR / r)}, (a, b)


def node_window(features: dict, length: int) -> tuple[int, torch.Tensor]:
    """What WanInfiniteTalkToVideo (newer host) takes from features with the window [0, length):
    all layers but the first, interpolated from 50 Hz to 25 fps (int(T / 2) frames), padded with
    the first frame up to length (comfy.ldm.wan.model_multitalk.get_audio_embeds). Returns
    (interpolated frames before padding, window [length, layers, C])."""
    layers = torch.stack(features["encoded_audio_all_layers"], dim=0).squeeze(1)[1:]      # [L, T, C]
    n = int(layers.shape[1] / 50.0 * 25)
    x = torch.nn.functional.interpolate(layers.transpose(1, 2), size=n, align_corners=True, mode="linear")
    x = x.transpose(1, 2).movedim(0, 1)                                                    # [n, L, C]
    if length > n:
        x = torch.cat([x, x[:1].repeat(length - n, 1, 1)], dim=0)
    return n, x[:length]


@pytest.fixture(scope="module")
def talk(family_workers) -> str:
    """"stock" where the worker registers WanInfiniteTalkToVideo, else "standin"; a host whose
    source has the node (host.has_stock_infinitetalk: the tiny patch was generated for it) must
    register it, so a broken import fails here instead of silently testing the stand-in."""
    registered = "WanInfiniteTalkToVideo" in family_workers[0].object_info()
    assert registered == host.has_stock_infinitetalk(), \
        f"WanInfiniteTalkToVideo registered: {registered}, in the host's source: {host.has_stock_infinitetalk()}"
    return "stock" if registered else "standin"


def _talk_ids(talk: str) -> tuple[str, str]:
    """(the one clip's, the loop body's) node whose ui "infinitetalk" records the window."""
    return (IT.PROBE, IT.SEG_PROBE) if talk == "stock" else (IT.TALK, IT.SEG_TALK)


def test_infinitetalk_clip_encoder_reuse(ab, talk):
    a, b, root = ab
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "talk_ref.png", 64, 64, seed=3)
    pa = infinitetalk_clip("talk_ref.png", seed=51, talk=talk)
    graphs.add_inspect(pa, IT.DECODE, node_id="90", label="frames")
    ra = a.run(pa).raise_for_status()
    assert a.counts()["text_encode"] == 1
    assert {n: executed_display(ra, n) for n in STOCK_ENCODERS} == dict.fromkeys(STOCK_ENCODERS, 1)
    assert set(manifest(root, "infinitetalk_clip")["slots"]) == {"positive", "clip_vision", "audio_features"}

    pb = infinitetalk_clip("talk_ref.png", seed=52, reuse="require", talk=talk)
    graphs.add_inspect(pb, IT.DECODE, node_id="90", label="frames")
    rb = b.run(pb).raise_for_status()
    assert nonzero(b.counts(), "text_loader", "text_encode") == {}
    assert {n: executed_display(rb, n) for n in STOCK_ENCODERS} == dict.fromkeys(STOCK_ENCODERS, 0)
    assert executed_display(rb, IT.SAMPLER) == 1
    assert {k: v["action"] for k, v in slot_events(rb).items()} == {
        "positive": "reused", "clip_vision": "reused", "audio_features": "reused"}
    assert executed_display(rb, IT.TALK) == 1
    rec_id = _talk_ids(talk)[0]
    win_a, win_b = ui_of(ra, rec_id, "infinitetalk"), ui_of(rb, rec_id, "infinitetalk")
    assert len(win_a) == len(win_b) == 1
    assert (win_b[0]["audio_start"], win_b[0]["audio_end"], win_b[0]["is_extend"]) == (0, 9, False)
    assert win_b[0]["trim_image"] == 0
    assert win_b[0]["window_sha256"] == win_a[0]["window_sha256"]      # the same features, not re-encoded
    if talk == "stock":     # the node's own projection of that window through the patch, and its start latent
        assert win_b[0]["audio_embeds_sha256"] == win_a[0]["audio_embeds_sha256"]
        assert win_b[0]["motion_latent_sha256"] == win_a[0]["motion_latent_sha256"]
    img_a, img_b = ra.inspected("90"), rb.inspected("90")
    assert img_a["shape"] == img_b["shape"] == [9, 64, 64, 3]
    assert img_a["sha256"] != img_b["sha256"]


def _segments(res, talk: str):
    """Per generated segment, in order: (segment_audio_features, previous_frames, images) tap
    records and the window record of the node (the stand-in's or the probe's of the stock node)."""
    taps = {label: [] for label in ("segment_audio_features", "previous_frames", "images")}
    for rec in ui_of(res, IT.TAP_FEATURES, "inspect") + ui_of(res, IT.TAP_MOTION, "inspect") + \
            ui_of(res, IT.TAP_IMAGES, "inspect"):
        taps[rec["label"]].append(rec["value"])
    return taps, ui_of(res, _talk_ids(talk)[1], "infinitetalk")


def _check_features(tap: dict, exp: dict, i: int) -> None:
    """The loop's segment_audio_features (a tap's describe()) is exactly the expected cut."""
    items = tap["items"]
    assert items["encoded_audio"]["shape"] == list(exp["encoded_audio"].shape)
    assert items["encoded_audio"]["sha256"] == tensor_sha(exp["encoded_audio"]), f"segment {i}: wrong features"
    layers = items["encoded_audio_all_layers"]["items"]
    assert [x["sha256"] for x in layers] == [tensor_sha(t) for t in exp["encoded_audio_all_layers"]], \
        f"segment {i}: wrong all-layers features"
    assert items["audio_samples"]["value"] == exp["audio_samples"]


def test_infinitetalk_segment_loop_audio_windows_and_resume(ab, talk):
    a, b, root = ab
    F, M, S, N = 9, 5, 3, 1
    total = S * (F - M) + M                                    # 17 frames
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "talk_ref.png", 64, 64, seed=3)
    wave = sine(total / FPS)

    ra = a.run(infinitetalk_segments("talk_ref.png", seed=61, F=F, M=M, total_frames=total,
                                     talk=talk)).raise_for_status()
    # the whole track is encoded once, outside the loop (not once per segment)
    assert a.counts()["text_encode"] == 1
    assert {n: executed_display(ra, n) for n in STOCK_ENCODERS} == dict.fromkeys(STOCK_ENCODERS, 1)
    assert executed_display(ra, IT.SEG_SAMPLER) == S
    assert set(manifest(root, "infinitetalk_segments")["slots"]) == {"positive", "clip_vision", "audio_features"}
    with FolderCache(root, "infinitetalk_segments").snapshot() as snap:
        track = snap.load_slot("audio_features")            # the whole-track features A encoded
    # the real wav2vec2 base: 12 transformer layers (+ the input of the first), 768 wide, fp32 out
    assert len(track["encoded_audio_all_layers"]) == 13
    assert track["encoded_audio"].shape[-1] == 768 and track["encoded_audio"].dtype == torch.float32
    assert torch.equal(track["encoded_audio"], track["encoded_audio_all_layers"][-1])
    # the features of the 16 kHz track (here the sine itself: SR = 16 kHz)
    assert track["audio_samples"] == wave.shape[-1] == total * SR // int(FPS)
    assert ui_of(ra, IT.TAP_TRACK, "inspect")[0]["value"]["items"]["encoded_audio"]["sha256"] == \
        tensor_sha(track["encoded_audio"])
    assert executed_display(ra, IT.SEG_TALK) == S      # the node runs in every segment's body copy
    taps_a, talk_a = _segments(ra, talk)
    assert len(talk_a) == len(taps_a["segment_audio_features"]) == S
    cuts = []
    for i in range(S):
        exp, (fa, fb) = feature_slice(track, i, F, M)
        cuts.append((fa, fb))
        _check_features(taps_a["segment_audio_features"][i], exp, i)
        n, win = node_window(exp, F)
        rec = talk_a[i]
        # the node's window is [0, F) of the segment's own cut: previous_frames is the loop's
        # M motion frames and motion_frame_count = M, so previous_frames.shape[0] - M = 0
        assert (rec["audio_start"], rec["audio_end"]) == (0, F)
        assert rec["audio_samples_16k"] == exp["audio_samples"]
        assert (rec["feature_frames"], rec["window_frames"], rec["padded_frames"]) == (n, F, F - n)
        assert rec["window_sha256"] == tensor_sha(win)
        assert rec["previous_frames"] == (None if i == 0 else M) and rec["is_extend"] == (i > 0)
        assert rec["trim_image"] == (0 if i == 0 else M)
        if i > 0:   # segment i continues from the last M frames segment i-1 decoded
            assert rec["previous_frames_sha256"] == taps_a["previous_frames"][i]["sha256"]
    # the cuts follow start(i) = i*(F-M) through the track (2F feature frames each at 50 Hz, 25 fps)
    # and the last one reaches the end of the track
    assert [fa for fa, _ in cuts] == sorted({fa for fa, _ in cuts}) and cuts[-1][1] >= track["encoded_audio"].shape[1]
    assert {fb - fa for fa, fb in cuts} == {2 * F}
    v1 = video.decode_frames(str(a.output_path(ra.output_files(IT.MERGE)[0])))
    assert v1.shape[0] == total

    b.reset_counts()
    rb = b.run(infinitetalk_segments("talk_ref.png", seed=62, F=F, M=M, total_frames=total, prefix_segments=N,
                                     reuse="require", talk=talk)).raise_for_status()
    # cache hit: no encoder and no encoder loader runs on B, the audio encoder included
    assert nonzero(b.counts(), "text_loader", "text_encode") == {}
    assert {n: executed_display(rb, n) for n in STOCK_ENCODERS} == dict.fromkeys(STOCK_ENCODERS, 0)
    assert executed_display(rb, IT.SEG_SAMPLER) == S - N
    assert {k: v["action"] for k, v in slot_events(rb).items()} == {
        "positive": "reused", "clip_vision": "reused", "audio_features": "reused"}
    assert ui_of(rb, IT.TAP_TRACK, "inspect")[0]["value"]["items"]["encoded_audio"]["sha256"] == \
        tensor_sha(track["encoded_audio"])                   # B's reused features are A's
    assert executed_display(rb, IT.SEG_TALK) == S - N
    taps_b, talk_b = _segments(rb, talk)
    assert len(talk_b) == len(taps_b["segment_audio_features"]) == S - N
    for j, i in enumerate(range(N, S)):
        exp, _ = feature_slice(track, i, F, M)
        _check_features(taps_b["segment_audio_features"][j], exp, i)
        assert (talk_b[j]["audio_start"], talk_b[j]["audio_end"], talk_b[j]["previous_frames"]) == (0, F, M)
        assert talk_b[j]["window_sha256"] == talk_a[i]["window_sha256"]
        if talk == "stock":
            assert talk_b[j]["audio_embeds_sha256"] == talk_a[i]["audio_embeds_sha256"]
        # B generates segment i with a new seed from the same inputs A had
        assert taps_b["images"][j]["sha256"] != taps_a["images"][i]["sha256"]
    # B's first segment starts from exactly the boundary A saved
    assert taps_b["previous_frames"][0]["sha256"] == taps_a["previous_frames"][N]["sha256"]
    if talk == "stock":     # ... and the stock node pins B's first latent frames to the same motion latent
        assert talk_b[0]["motion_latent_sha256"] == talk_a[N]["motion_latent_sha256"]
        assert talk_b[0]["motion_latent_frames"] == (M - 1) // 4 + 1
    v2 = video.decode_frames(str(b.output_path(rb.output_files(IT.MERGE)[0])))
    p_n = N * (F - M) + M
    assert v2.shape[0] == total
    assert np.array_equal(v2[:p_n], v1[:p_n])
    assert not np.array_equal(v2[p_n:], v1[p_n:])
    assert video.audio_packets_digest(str(a.output_path(ra.output_files(IT.MERGE)[0]))) == \
        video.audio_packets_digest(str(b.output_path(rb.output_files(IT.MERGE)[0])))
