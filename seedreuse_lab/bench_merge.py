"""Micro-benchmark of the segment-reuse merge: packet-copy prefix vs full re-encode.

``bench_merge`` builds a full run of S segments (one chunk per segment, merged), then
resumes at N = S // 2 five times in a chain (each run's result is the next run's prefix
source), once with :func:`video.merge` (stream-copy prefix) and once with
:func:`reencode_merge` (the reference design: decode, trim, concat, re-encode).
It reports merge wall times and the PSNR of the reused prefix against the first video
after the chain (``inf`` = bit-exact).  Synthetic frames, no model needed.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from contextlib import ExitStack

import av

from reuse_backend.media import segments as seg
from reuse_backend.media import video
from reuse_backend.media.video.encode import _encoded, _finish, _mux_all
from reuse_backend.media.video.frames import (DEFAULT_CRF, DEFAULT_PRESET, DEFAULT_THREADS, _fps, _index,
                                              _iter_u8, _short, iter_frames)

from .media_samples import psnr, synthetic_frames

__all__ = ["synthetic_frames", "psnr", "prefix_psnr", "bench_merge", "reencode_merge"]


def prefix_psnr(path_a, path_b, count: int) -> float:
    """PSNR over the first ``count`` decoded frames of two videos (streamed)."""
    se, n = 0.0, 0
    for fa, fb in zip(video.iter_frames(path_a, 0, count), video.iter_frames(path_b, 0, count)):
        se += float(np.sum((fa.astype(np.float64) - fb) ** 2))
        n += fa.size
    if n == 0:
        raise ValueError("no frames to compare")
    return math.inf if se == 0 else 10 * math.log10(255.0 ** 2 / (se / n))


def bench_merge(tmpdir, S: int, F: int, M: int, width: int, height: int, *, fps=25,
                reuse: int | None = None, chain: int = 5, preset: str = video.DEFAULT_PRESET,
                crf: int = video.DEFAULT_CRF) -> dict:
    """Time stream-copy merge vs reencode_merge on the same video; PSNR after chaining."""
    N = max(1, S // 2) if reuse is None else reuse
    seg.validate_resume(N, S)
    tmpdir = os.fspath(tmpdir)
    os.makedirs(tmpdir, exist_ok=True)
    P, total = seg.prefix_frames(N, F, M), seg.total_frames(S, F, M)
    sr = 16000
    t = np.arange(int(total * sr / fps)) / sr
    wave = (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None]

    def chunks(first: int, variant: int, tag: str):
        out = []
        for i in range(first, S):
            a, b = seg.new_frames_range(i, F, M)
            path = os.path.join(tmpdir, f"{tag}_{i:03d}.mp4")
            video.write_chunk(path, synthetic_frames(a, b, width, height, variant), fps,
                              crf=crf, preset=preset)
            out.append(path)
        return out

    t0 = time.perf_counter()
    full_chunks = chunks(0, 0, "full")
    encode_s = time.perf_counter() - t0
    first = os.path.join(tmpdir, "run0.mp4")
    full = video.merge(first, chunks=full_chunks, audio=("encode", wave, sr), fps=fps)
    suffix = chunks(N, 1, "suffix")
    copy_s, re_s, modes = [], [], []
    prev_c = prev_r = first
    for k in range(1, chain + 1):
        out_c = os.path.join(tmpdir, f"copy{k}.mp4")
        rep = video.merge(out_c, chunks=suffix, prefix_source=prev_c, prefix_frames=P,
                          audio=("copy", prev_c), fps=fps)
        copy_s.append(rep.seconds)
        modes.append(rep.prefix_mode)
        out_r = os.path.join(tmpdir, f"reenc{k}.mp4")
        rep = reencode_merge(out_r, prefix_source=prev_r, prefix_frames=P,
                                   suffix_frames_or_chunks=suffix, audio=("copy", prev_r),
                                   fps=fps, crf=crf, preset=preset)
        re_s.append(rep.seconds)
        prev_c, prev_r = out_c, out_r
    copy_psnr = prefix_psnr(first, prev_c, P)
    re_psnr = prefix_psnr(first, prev_r, P)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {
        "S": S, "F": F, "M": M, "N": N, "width": width, "height": height, "fps": float(fps),
        "frames": total, "prefix_frames": P, "chain": chain,
        "chunk_encode_s": encode_s, "full_merge_s": full.seconds,
        "copy_merge_s": mean(copy_s), "reencode_merge_s": mean(re_s),
        "copy_merge_s_all": copy_s, "reencode_merge_s_all": re_s,
        "speedup": mean(re_s) / mean(copy_s) if mean(copy_s) > 0 else math.inf,
        "prefix_modes": modes,
        "copy_prefix_psnr": copy_psnr, "reencode_prefix_psnr": re_psnr,
        "copy_prefix_bit_exact": copy_psnr == math.inf,
        "bytes_copy": os.path.getsize(prev_c), "bytes_reencode": os.path.getsize(prev_r),
    }


# The baseline lives here, not in the library: nothing in the pack uses it.
def reencode_merge(out_path, *, prefix_source, prefix_frames: int, suffix_frames_or_chunks,
                   audio=None, fps, crf: int = DEFAULT_CRF, preset: str = DEFAULT_PRESET,
                   threads: int = DEFAULT_THREADS) -> video.MergeReport:
    """Reference-design baseline: decode the previous video, keep its first
    ``prefix_frames`` frames, append the suffix (frames [T,H,W,3] or a list of chunk
    paths) and re-encode everything as one H.264 stream (x264 default GOP)."""
    fps, t0, P = _fps(fps), time.perf_counter(), int(prefix_frames)
    suffix = suffix_frames_or_chunks
    paths = isinstance(suffix, (list, tuple)) and all(
        isinstance(s, (str, os.PathLike)) for s in suffix)
    count, keyframes = [0], []

    def frames():
        parts = [iter_frames(prefix_source, 0, P, "previous result")] if P > 0 else []
        parts += [iter_frames(s) for s in suffix] if paths else [_iter_u8(suffix)]
        for k, part in enumerate(parts):
            for f in part:
                count[0] += 1
                yield f
            if k == 0 and P > 0 and count[0] < P:
                raise _short(P, count[0])

    def tagged(gen):
        for t, p in gen:
            if p.is_keyframe:
                keyframes.append(_index(p.pts, p.time_base, fps))
            yield t, p

    def write(tmp):
        with ExitStack() as stack:
            out = stack.enter_context(av.open(tmp, "w", format="mp4"))
            gen = _encoded(out, frames(), fps, crf, preset, threads, "open-gop=0:mbtree=0")
            next(gen)  # the video stream first
            _mux_all(out, stack, tagged(gen), audio)

    _finish(out_path, write)
    return video.MergeReport(frames=count[0], prefix_mode="re-encode" if P else "none",
                       seconds=time.perf_counter() - t0, keyframes=sorted(keyframes))
