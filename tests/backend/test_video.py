"""Chunks, probe and the segment-reuse merge on real MP4 files (PyAV only)."""
import hashlib
import logging
import math
import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import av
import numpy as np
import pytest
import torch

from reuse_backend.media import segments as seg
from reuse_backend.media import video
from seedreuse_lab.media_samples import prefix_psnr, psnr, reencode_merge, synthetic_frames
from reuse_backend.errors import InvalidRequestError, PreviousResultError

F, M, S, W, H, FPS = 9, 3, 4, 64, 48, 25
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tone(frames, sr=16000, channels=2):
    t = np.arange(int(frames * sr / FPS)) / sr
    return np.stack([0.3 * np.sin(2 * np.pi * (300 + 100 * c) * t)
                     for c in range(channels)]).astype(np.float32), sr


def seg_chunks(d, tag, first=0, variant=0, size=(W, H)):
    out = []
    for i in range(first, S):
        a, b = seg.new_frames_range(i, F, M)
        p = str(d / f"{tag}_{i}.mp4")
        info = video.write_chunk(p, synthetic_frames(a, b, *size, variant), FPS)
        assert info.frames == b - a
        out.append(p)
    return out


def starts():
    return [seg.prefix_frames(i, F, M) for i in range(S)]  # [0, 9, 15, 21]


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("full")
    total = seg.total_frames(S, F, M)
    out = str(d / "run0.mp4")
    rep = video.merge(out, chunks=seg_chunks(d, "c"), audio=("encode", *tone(total)), fps=FPS)
    return d, out, rep


def test_write_chunk_is_deterministic_and_stitchable(tmp_path):
    frames = synthetic_frames(0, 30, 160, 96)  # a size where x264's mbtree asm is not
    paths = [tmp_path / f"c{k}.mp4" for k in range(3)]  # reproducible (hence mbtree=0)
    infos = [video.write_chunk(p, frames, FPS) for p in paths]
    assert len({sha(p) for p in paths}) == 1
    info = video.probe(paths[0])
    assert (info.frames, info.width, info.height, info.fps) == (30, 160, 96, Fraction(25))
    assert info.keyframes[0] == 0 and info.codec == "h264" and not info.has_audio
    assert info.encoder_settings == {"crf": 19, "preset": "medium", "threads": 4}
    assert infos[0].extradata_sha256 == info.extradata_sha256
    # stitchable: the CRF and the content do not change SPS/PPS
    other = video.write_chunk(tmp_path / "o.mp4", synthetic_frames(50, 53, 160, 96, 3), FPS,
                              crf=30)
    assert other.extradata_sha256 == info.extradata_sha256
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_frames_conversion_and_tensor_input(tmp_path):
    t = torch.tensor([[[[0.0, 0.5, 1.0]] * 2] * 2, [[[1.2, -0.1, 0.002]] * 2] * 2])
    u = video.to_uint8(t)
    assert u.dtype == np.uint8 and u.shape == (2, 2, 2, 3)
    assert u[0, 0, 0].tolist() == [0, 128, 255] and u[1, 0, 0].tolist() == [255, 0, 1]
    frames = synthetic_frames(0, 6, W, H)
    assert video.to_uint8(frames) is not frames and np.array_equal(video.to_uint8(frames), frames)
    a = video.write_chunk(tmp_path / "a.mp4", frames, FPS)
    b = video.write_chunk(tmp_path / "b.mp4", torch.from_numpy(frames).float() / 255, FPS)
    assert a.extradata_sha256 == b.extradata_sha256 and sha(a.path) == sha(b.path)
    with pytest.raises(InvalidRequestError):
        video.write_chunk(tmp_path / "odd.mp4", np.zeros((2, 47, 64, 3), np.uint8), FPS)
    with pytest.raises(InvalidRequestError):
        video.write_chunk(tmp_path / "empty.mp4", np.zeros((0, 48, 64, 3), np.uint8), FPS)
    assert sorted(os.listdir(tmp_path)) == ["a.mp4", "b.mp4"]


@pytest.mark.parametrize("old_layout", ["chunks", "one-piece", "reencode_merge"])
def test_reference_synthetic_merge(tmp_path, old_layout, caplog):
    """Reference check: 4-frame prefix of a 10-frame video with audio + 5-frame suffix
    -> 9 frames carrying the old video's complete audio track."""
    old = str(tmp_path / "old.mp4")
    fr = synthetic_frames(0, 10, W, H)
    parts = [(0, 4), (4, 10)] if old_layout == "chunks" else [(0, 10)]
    cs = [video.write_chunk(tmp_path / f"o{a}.mp4", fr[a:b], FPS).path for a, b in parts]
    video.merge(old, chunks=cs, audio=("encode", *tone(10, channels=1)), fps=FPS)
    assert video.probe(old).has_audio and video.probe(old).frames == 10
    suffix = synthetic_frames(4, 9, W, H, variant=2)
    new = str(tmp_path / "new.mp4")
    if old_layout == "reencode_merge":
        rep = reencode_merge(new, prefix_source=old, prefix_frames=4,
                                   suffix_frames_or_chunks=suffix, audio=("copy", old), fps=FPS)
    else:
        chunk = video.write_chunk(tmp_path / "s.mp4", suffix, FPS).path
        with caplog.at_level(logging.WARNING, logger="seedreuse"):
            rep = video.merge(new, chunks=[chunk], prefix_source=old, prefix_frames=4,
                              audio=("copy", old), fps=FPS)
        want = "stream-copy" if old_layout == "chunks" else "re-encode"
        assert rep.prefix_mode == want and bool(rep.warnings) == (want == "re-encode")
        assert bool(caplog.records) == (want == "re-encode")
        assert rep.keyframes[:2] == [0, 4]
    info = video.probe(new)
    assert rep.frames == info.frames == 9
    assert info.has_audio and info.audio_codec == "aac" and info.audio_channels == 1
    assert video.audio_packets_digest(new) == video.audio_packets_digest(old) is not None
    dec_old, dec_new = video.decode_frames(old, 0, 4), video.decode_frames(new)
    assert dec_new.shape == (9, H, W, 3)
    if old_layout == "chunks":
        assert np.array_equal(dec_new[:4], dec_old)
    assert psnr(dec_new[:4], dec_old) > 30 and psnr(dec_new[4:], suffix) > 28


def test_full_run_then_resume_and_chained_resume(full_run, tmp_path):
    d, first, rep = full_run
    total = seg.total_frames(S, F, M)
    assert rep.frames == total == 27 and rep.prefix_mode == "none"
    assert rep.keyframes == starts()  # an IDR at every segment start
    base = video.decode_frames(first)
    assert base.shape == (27, H, W, 3) and psnr(base, synthetic_frames(0, 27, W, H)) > 30
    # resume at N=2 with a new seed (other suffix content)
    P2 = seg.prefix_frames(2, F, M)
    r2 = str(tmp_path / "run1.mp4")
    rep = video.merge(r2, chunks=seg_chunks(tmp_path, "n", 2, variant=1), prefix_source=first,
                      prefix_frames=P2, audio=("copy", first), fps=FPS)
    assert (rep.prefix_mode, rep.frames, rep.warnings) == ("stream-copy", total, [])
    assert rep.keyframes == starts()
    dec2 = video.decode_frames(r2)
    assert len(dec2) == total and np.array_equal(dec2[:P2], base[:P2])
    assert not np.array_equal(dec2[P2:], base[P2:])
    assert video.audio_packets_digest(r2) == video.audio_packets_digest(first)
    # same suffix frames -> the same video as the full run, frame for frame
    same = str(tmp_path / "same.mp4")
    video.merge(same, chunks=seg_chunks(tmp_path, "s", 2, variant=0), prefix_source=first,
                prefix_frames=P2, audio=("copy", first), fps=FPS)
    assert np.array_equal(video.decode_frames(same), base)
    # chained resume at N=3 from run1: frames < P(2) still those of the FIRST video
    P3 = seg.prefix_frames(3, F, M)
    r3 = str(tmp_path / "run2.mp4")
    rep = video.merge(r3, chunks=seg_chunks(tmp_path, "m", 3, variant=2), prefix_source=r2,
                      prefix_frames=P3, audio=("copy", r2), fps=FPS)
    assert rep.prefix_mode == "stream-copy" and rep.frames == total
    dec3 = video.decode_frames(r3)
    assert np.array_equal(dec3[:P2], base[:P2]) and np.array_equal(dec3[:P3], dec2[:P3])


def test_timestamps_and_b_frames_across_joins(full_run):
    """Frame k has pts k (1/fps); dts strictly increase across chunk joins, dts <= pts,
    and B-frames are really there (decode order != display order)."""
    _, first, _ = full_run
    with av.open(first) as c:
        v = c.streams.video[0]
        pk = [(p.pts * p.time_base * FPS, p.dts * p.time_base * FPS)
              for p in c.demux(v) if p.size]
    pts, dts = [p for p, _ in pk], [d for _, d in pk]
    assert sorted(pts) == list(range(27))
    assert all(b > a for a, b in zip(dts, dts[1:])) and all(d <= p for p, d in pk)
    assert pts != sorted(pts) and dts[0] < 0


def test_chained_reuse_stays_exact_while_reencode_drifts(full_run, tmp_path):
    _, first, _ = full_run
    P = seg.prefix_frames(2, F, M)
    suffix = seg_chunks(tmp_path, "x", 2, variant=5)
    prev_c = prev_r = first
    drift = []
    for k in range(5):
        out_c, out_r = str(tmp_path / f"c{k}.mp4"), str(tmp_path / f"r{k}.mp4")
        rep = video.merge(out_c, chunks=suffix, prefix_source=prev_c, prefix_frames=P,
                          audio=("copy", prev_c), fps=FPS)
        assert rep.prefix_mode == "stream-copy"
        reencode_merge(out_r, prefix_source=prev_r, prefix_frames=P,
                             suffix_frames_or_chunks=suffix, audio=("copy", prev_r), fps=FPS)
        prev_c, prev_r = out_c, out_r
        drift.append(prefix_psnr(first, out_r, P))
        assert prefix_psnr(first, out_c, P) == math.inf
    print(f"prefix PSNR vs first video after 1..5 re-encode merges: "
          f"{[round(x, 2) for x in drift]} dB; stream-copy: inf (bit-exact)")
    assert all(math.isfinite(x) for x in drift) and drift[-1] < drift[0]
    assert video.audio_packets_digest(prev_c) == video.audio_packets_digest(first)
    assert video.audio_packets_digest(prev_r) == video.audio_packets_digest(first)


def test_fallback_without_keyframe_at_the_cut(full_run, tmp_path, caplog):
    d, first, _ = full_run
    one = str(tmp_path / "one.mp4")  # encoded in one piece: no keyframe at P(2)
    video.write_chunk(one, synthetic_frames(0, 27, W, H), FPS)
    P = seg.prefix_frames(2, F, M)
    assert P not in video.probe(one).keyframes
    out = str(tmp_path / "fb.mp4")
    with caplog.at_level(logging.WARNING, logger="seedreuse"):
        rep = video.merge(out, chunks=seg_chunks(tmp_path, "n", 2, variant=1),
                          prefix_source=one, prefix_frames=P, fps=FPS,
                          prefix_keyframes=starts()[1:2])
    assert rep.prefix_mode == "re-encode" and "no keyframe at frame 15" in rep.warnings[0]
    assert any("cannot be stream-copied" in r.getMessage() for r in caplog.records)
    assert rep.frames == video.probe(out).frames == 27
    assert rep.keyframes == starts()  # the re-encoded prefix is cut at segment starts too
    assert psnr(video.decode_frames(out, 0, P), video.decode_frames(one, 0, P)) > 30
    # the fallback's result is itself a good prefix source again
    again = video.merge(str(tmp_path / "again.mp4"), chunks=seg_chunks(tmp_path, "q", 1),
                        prefix_source=out, prefix_frames=9, fps=FPS)
    assert again.prefix_mode == "stream-copy"
    # other encoder settings (other SPS/PPS) also fall back
    fast = [video.write_chunk(tmp_path / f"f{i}.mp4",
                              synthetic_frames(*seg.new_frames_range(i, F, M), W, H), FPS,
                              preset="ultrafast").path for i in range(S)]
    prev = str(tmp_path / "fast.mp4")
    video.merge(prev, chunks=fast, fps=FPS)
    rep = video.merge(str(tmp_path / "x.mp4"), chunks=seg_chunks(tmp_path, "y", 2),
                      prefix_source=prev, prefix_frames=P, fps=FPS)
    assert rep.prefix_mode == "re-encode" and "codec parameters" in rep.warnings[0]


def test_errors_leave_nothing_behind(full_run, tmp_path):
    d, first, _ = full_run
    out = tmp_path / "out.mp4"
    new = seg_chunks(tmp_path, "n", 3)
    with pytest.raises(PreviousResultError):  # the previous result is too short
        video.merge(out, chunks=new, prefix_source=first, prefix_frames=40, fps=FPS)
    with pytest.raises(PreviousResultError):
        video.merge(out, chunks=new, prefix_source=tmp_path / "missing.mp4", prefix_frames=9,
                    fps=FPS)
    with pytest.raises(InvalidRequestError):  # every request generates a segment
        video.merge(out, chunks=[], prefix_source=first, prefix_frames=9, fps=FPS)
    with pytest.raises(InvalidRequestError):
        video.merge(out, chunks=new, prefix_frames=9, fps=FPS)
    with pytest.raises(InvalidRequestError):
        video.merge(out, chunks=new, audio=("mix", first), fps=FPS)
    big = video.write_chunk(tmp_path / "big.mp4", synthetic_frames(0, 3, 96, 64), FPS).path
    with pytest.raises(InvalidRequestError):  # chunks with different parameters
        video.merge(out, chunks=new + [big], fps=FPS)
    with pytest.raises(PreviousResultError):  # another frame size than the new segments
        video.merge(out, chunks=[big], prefix_source=first, prefix_frames=9, fps=FPS)
    assert not out.exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


def test_file_objects_share_one_file(full_run, tmp_path):
    _, first, _ = full_run
    P = seg.prefix_frames(2, F, M)
    with open(first, "rb") as f:
        assert video.probe(f).frames == 27
        rep = video.merge(tmp_path / "o.mp4", chunks=seg_chunks(tmp_path, "n", 2, variant=1),
                          prefix_source=f, prefix_frames=P, audio=("copy", f), fps=FPS)
    assert rep.prefix_mode == "stream-copy"
    assert np.array_equal(video.decode_frames(tmp_path / "o.mp4", 0, P),
                          video.decode_frames(first, 0, P))
    assert video.audio_packets_digest(tmp_path / "o.mp4") == video.audio_packets_digest(first)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_stream_copy_merge_memory_does_not_grow_with_length(tmp_path):
    """Merge 40 vs 1200 frames of 320x240 (decoded: 276 MB) in fresh processes."""
    c = video.write_chunk(tmp_path / "c.mp4", synthetic_frames(0, 30, 320, 240), FPS,
                          preset="ultrafast").path
    script = textwrap.dedent(f"""
        import sys
        from reuse_backend.media import video
        n = int(sys.argv[1]); d = {str(tmp_path)!r}
        video.merge(d + f"/p{{n}}.mp4", chunks=[{c!r}] * n, fps=25)
        rep = video.merge(d + f"/r{{n}}.mp4", chunks=[{c!r}], prefix_source=d + f"/p{{n}}.mp4",
                          prefix_frames=30 * (n - 1), fps=25)
        assert rep.prefix_mode == "stream-copy", rep
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
        print(hwm[0].split()[1])  # peak RSS of this process image (KiB), unlike ru_maxrss
                                  # which keeps the parent's peak across exec
    """)
    rss = {}
    for n in (2, 40):
        out = subprocess.run([sys.executable, "-c", script, str(n)], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        rss[n] = int(out.split()[-1])  # KiB
    print("merge peak RSS (KiB) by chunk count:", rss)
    assert rss[40] - rss[2] < 24 * 1024, rss  # decoding would add ~270 MB


@pytest.mark.parametrize("fps", [Fraction(30000, 1001), Fraction(15, 2)])
def test_fractional_frame_rates(tmp_path, fps):
    def chunks(tag, first, rate):
        return [video.write_chunk(tmp_path / f"{tag}{i}.mp4",
                                  synthetic_frames(*seg.new_frames_range(i, F, M), W, H), rate).path
                for i in range(first, S)]
    full = str(tmp_path / "full.mp4")
    assert video.merge(full, chunks=chunks("a", 0, fps), fps=fps).keyframes == starts()
    assert video.probe(full).fps == fps
    out = str(tmp_path / "r.mp4")
    rep = video.merge(out, chunks=chunks("b", 2, fps), prefix_source=full, prefix_frames=15,
                      fps=fps)
    assert rep.prefix_mode == "stream-copy"
    assert np.array_equal(video.decode_frames(out), video.decode_frames(full))
    with pytest.raises(InvalidRequestError):  # chunks written at another rate
        video.merge(out, chunks=chunks("c", 2, 25), fps=fps)
    # a previous result at another frame rate (other SPS timing) is re-encoded
    rep = video.merge(out, chunks=chunks("d", 2, 25), prefix_source=full, prefix_frames=15,
                      fps=25)
    assert rep.prefix_mode == "re-encode" and video.probe(out).fps == 25
