"""Segment arithmetic: P(N), segment counts, seeds, audio windows, resume validation."""
import hashlib
import os
import subprocess
import sys
from fractions import Fraction

import pytest

from reuse_backend.media import segments as seg
from reuse_backend.errors import InvalidRequestError, ReuseError


def test_prefix_table_of_the_reference_design():
    # F=81, M=9: P(0..3) = 0, 81, 153, 225 (the reference's table; N=2 -> 153)
    assert [seg.prefix_frames(n, 81, 9) for n in range(4)] == [0, 81, 153, 225]
    # N * F would double-count the overlaps and shift the join point
    assert [n * 81 for n in range(4)] != [seg.prefix_frames(n, 81, 9) for n in range(4)]
    assert seg.stride(81, 9) == 72
    assert [seg.segment_start(i, 81, 9) for i in range(4)] == [0, 72, 144, 216]
    assert seg.total_frames(3, 81, 9) == 225


def test_new_frame_ranges_tile_the_video():
    for F, M, S in [(81, 9, 7), (9, 3, 4), (5, 0, 3), (2, 1, 5)]:
        ranges = [seg.new_frames_range(i, F, M) for i in range(S)]
        assert ranges[0] == (0, F)
        for (a0, b0), (a1, b1) in zip(ranges, ranges[1:]):
            assert b0 == a1 and b1 - a1 == F - M
        assert ranges[-1][1] == seg.total_frames(S, F, M)
        for n in range(S + 1):
            assert seg.prefix_frames(n, F, M) == (ranges[n - 1][1] if n else 0)
        # segment i's F frames start at start(i) and end where its new frames end
        for i in range(S):
            assert seg.segment_start(i, F, M) + F == ranges[i][1]


@pytest.mark.parametrize("total,expected", [
    (0, 1), (1, 1), (81, 1), (82, 2), (153, 2), (154, 3), (225, 3), (226, 4)])
def test_segment_count(total, expected):
    S = seg.segment_count(total, 81, 9)
    assert S == expected
    assert seg.total_frames(S, 81, 9) >= total
    if S > 1:
        assert seg.total_frames(S - 1, 81, 9) < total


def test_segment_count_for_duration():
    # 20 s at 25 fps = 500 frames: P(6) = 441 < 500 <= P(7) = 513
    assert seg.segment_count_for_duration(20, 25, 81, 9) == 7
    assert seg.segment_count_for_duration(Fraction(81, 25), 25, 81, 9) == 1
    assert seg.segment_count_for_duration(3.25, 25, 81, 9) == 2  # 81.25 -> 82 frames
    assert seg.segment_count_for_duration(0, 25, 81, 9) == 1
    with pytest.raises(InvalidRequestError):
        seg.segment_count_for_duration(10, 0, 81, 9)
    with pytest.raises(InvalidRequestError):
        seg.segment_count_for_duration(-1, 25, 81, 9)


@pytest.mark.parametrize("F,M", [(81, 81), (81, 90), (0, 0), (81, -1), (8.5, 1), (True, 0)])
def test_invalid_segment_geometry(F, M):
    with pytest.raises(InvalidRequestError) as e:
        seg.prefix_frames(1, F, M)
    assert e.value.expected is not None and e.value.fix


def test_validate_resume_edges():
    seg.validate_resume(0, 1)
    seg.validate_resume(0, 4)
    seg.validate_resume(3, 4)
    for N, S in [(4, 4), (5, 4), (1, 1), (-1, 4)]:
        with pytest.raises(InvalidRequestError) as e:
            seg.validate_resume(N, S)
        err = e.value
        assert isinstance(err, ReuseError) and err.code == "invalid_request"
        assert "at least one segment" in err.message
        assert err.actual == N and err.fix and str(S - 1) in err.fix
        assert err.to_dict()["details"] == {"reuse_prefix_segments": N, "segment_count": S}
    with pytest.raises(InvalidRequestError):
        seg.validate_resume(1.0, 4)
    with pytest.raises(InvalidRequestError):
        seg.validate_resume(0, 0)


def test_segment_seed_is_stable():
    assert seg.segment_seed(42, 0) == 42
    want = int.from_bytes(hashlib.sha256(b"42:1").digest()[:8], "big")
    assert seg.segment_seed(42, 1) == want == 278651779053087998
    seeds = {seg.segment_seed(42, i) for i in range(200)}
    assert len(seeds) == 200 and all(0 <= s < 2**64 for s in seeds)
    assert seg.segment_seed(2**64 - 1, 3) < 2**64
    with pytest.raises(InvalidRequestError):
        seg.segment_seed(-1, 1)
    with pytest.raises(InvalidRequestError):
        seg.segment_seed(2**64, 1)
    # another process with another hash seed computes the same values
    code = "from reuse_backend.media.segments import segment_seed as s; print(s(42, 1), s(7, 9))"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True, cwd=os.path.dirname(os.path.dirname(
                             os.path.dirname(os.path.abspath(__file__))))).stdout.split()
    assert out == [str(seg.segment_seed(42, 1)), str(seg.segment_seed(7, 9))]


def test_audio_window():
    # 25 fps, 16 kHz: 640 samples per frame
    assert seg.audio_window(0, 81, 9, 25, 16000) == (0, 81 * 640)
    assert seg.audio_window(1, 81, 9, 25, 16000) == (72 * 640, 153 * 640)
    a0, b0 = seg.audio_window(2, 81, 9, 25, 16000)
    a1, b1 = seg.audio_window(3, 81, 9, 25, 16000)
    assert b0 - a1 == 9 * 640  # the motion frames' audio is shared
    # NTSC rate: exact rational arithmetic, windows never drift
    w = [seg.audio_window(i, 81, 9, Fraction(30000, 1001), 48000) for i in range(100)]
    assert w[99][0] == round(99 * 72 * 48000 * 1001 / 30000)
    assert all(b - a in (129729, 129730) for a, b in w)
    with pytest.raises(InvalidRequestError):
        seg.audio_window(0, 81, 9, 0, 16000)
    with pytest.raises(InvalidRequestError):
        seg.audio_window(0, 81, 9, 25, 0)
