"""The output video ends with its audio: the frame-count arithmetic of segment_trim, and the
packet-copy cut of a merged result at the last segment's split (video.cut)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from reuse_backend.errors import InvalidRequestError
from reuse_backend.media import segments as seg
from reuse_backend.media import video
from reuse_backend.media.segment_trim import audio_frames, plan_trim
from seedreuse_lab.media_samples import synthetic_frames


def test_the_segment_example_ends_with_its_10_s_track():
    # example_workflows' segment example: F=81, M=9, 16 fps, speech.wav = 10 s at 16 kHz
    A = audio_frames(160_000, 16_000, 16.0)
    S = seg.segment_count(A, 81, 9)
    plan = plan_trim(S, 81, 9, 16.0, A)
    assert (A, S, plan.frames, plan.output_frames, plan.trimmed) == (160, 3, 225, 160, 65)
    assert plan.last_start == 153 and plan.last_chunk_keep == 7      # segment 2's new frames 153..159 stay
    assert "65 surplus frame(s)" in plan.reason and "160 frames (10.00 s)" in plan.reason
    assert plan.to_dict()["output_frames"] == 160


@pytest.mark.parametrize("F,M", [(81, 9), (9, 3), (5, 0), (2, 1), (33, 32)])
@pytest.mark.parametrize("fps", [16.0, 25.0, 29.97, 24000 / 1001])
def test_a_length_that_follows_the_audio_always_trims_only_the_last_segment(F, M, fps):
    for samples in list(range(1, 4000, 97)) + [160_000, 160_001, 1_234_567]:
        sr = 16_000
        A = audio_frames(samples, sr, fps)
        assert 0 <= A * sr / fps - samples < sr / fps + 1e-6      # A/fps covers the audio, within one frame
        S = seg.segment_count(A, F, M)
        plan = plan_trim(S, F, M, fps, A)
        assert plan.output_frames == A and plan.frames == seg.total_frames(S, F, M)
        assert plan.trimmed == plan.frames - A < (F if S == 1 else F - M)
        assert plan.last_start < A                                 # never a whole segment cut
        # every resume point a later request can take (N < S) lies inside the trimmed video
        assert all(seg.prefix_frames(n, F, M) <= A for n in range(S))
        if plan.trimmed:
            assert 0 < plan.last_chunk_keep < seg.new_frames_range(S - 1, F, M)[1] - plan.last_start
        else:
            assert plan.last_chunk_keep is None and "nothing to trim" in plan.reason


def test_why_nothing_is_trimmed():
    F, M, S = 9, 3, 4                                              # P(4) = 27, P(3) = 21
    none = plan_trim(S, F, M, 16.0, None)
    assert (none.output_frames, none.trimmed) == (27, 0) and "no audio connected" in none.reason
    longer = plan_trim(S, F, M, 16.0, 32)
    assert (longer.output_frames, longer.trimmed) == (27, 0)
    assert "longer than the 4 segment(s) cover (27 frames)" in longer.reason and ">= 32" in longer.reason
    assert longer.blocked and not none.blocked
    early = plan_trim(S, F, M, 16.0, 21)                           # ends where segment 3's new frames start
    assert early.trimmed == 0 and early.blocked and "ends before the last segment's new frames (21..26)" in early.reason
    assert plan_trim(S, F, M, 16.0, 22).trimmed == 5
    assert plan_trim(S, F, M, 16.0, 0).reason == "the audio's length is known at run time"
    assert audio_frames(0, 16_000, 16.0) == 0 and audio_frames(10, 0, 16.0) == 0


def tone(frames, fps, sr=16000):
    t = np.arange(int(frames * sr / fps)) / sr
    return np.stack([0.3 * np.sin(2 * np.pi * 300 * t)]).astype(np.float32), sr


@pytest.mark.parametrize("A", [22, 23, 24, 26])
def test_cut_copies_the_output_out_of_a_split_result(tmp_path, A):
    # F=9, M=3, S=4: the last segment's new frames are 21..26, split at A into parts of 1..5
    # frames (x264 codes a chunk of 1 or 2 frames without delay: the joins must still merge)
    F, M, S, fps = 9, 3, 4, 16
    plan = plan_trim(S, F, M, fps, A)
    chunks = []
    for i in range(S):
        a, b = seg.new_frames_range(i, F, M)
        frames = synthetic_frames(a, b, 64, 48)
        parts = [frames[:plan.last_chunk_keep], frames[plan.last_chunk_keep:]] if i == S - 1 else [frames]
        for k, part in enumerate(parts):                           # as Segment Loop End writes them
            chunks.append(video.write_chunk(tmp_path / f"c{i}_{k}.mp4", part, fps).path)
    result = tmp_path / "result.mp4"
    rep = video.merge(result, chunks=chunks, audio=("encode", *tone(A, fps)), fps=fps)
    assert rep.frames == 27 and A in rep.keyframes
    # packet copy across every join, the short parts' too: the result decodes to the chunks' frames
    assert np.array_equal(video.decode_frames(result), np.concatenate([video.decode_frames(c) for c in chunks]))
    out = tmp_path / "out.mp4"
    cut = video.cut(out, result, A, fps)
    info = video.probe(out)
    assert cut.frames == info.frames == A and info.has_audio and cut.prefix_mode == "stream-copy"
    assert np.array_equal(video.decode_frames(out), video.decode_frames(result, 0, A))     # bit-exact
    assert video.audio_packets_digest(out) == video.audio_packets_digest(result)           # audio intact
    # the untrimmed result is a prefix source as before: an extension copies all 27 frames
    more = video.write_chunk(tmp_path / "more.mp4", synthetic_frames(27, 33, 64, 48, 1), fps).path
    ext = video.merge(tmp_path / "ext.mp4", chunks=[more], prefix_source=result, prefix_frames=27, fps=fps)
    assert ext.prefix_mode == "stream-copy" and ext.frames == 33
    # no keyframe at the cut (the result of one unsplit chunk): refused, nothing written
    one = video.write_chunk(tmp_path / "one.mp4", synthetic_frames(0, 27, 64, 48), fps).path
    with pytest.raises(InvalidRequestError, match=f"no keyframe at frame {A}"):
        video.cut(tmp_path / "bad.mp4", one, A, fps)
    with pytest.raises(InvalidRequestError, match="cannot cut"):
        video.cut(tmp_path / "bad.mp4", one, 28, fps)
    assert not (tmp_path / "bad.mp4").exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
