"""Micro-benchmark of the segment-reuse merge: packet-copy prefix vs full re-encode.

``bench_merge`` builds a full run of S segments (one chunk per segment, merged), then
resumes at N = S // 2 five times in a chain (each run's result is the next run's prefix
source), once with :func:`video.merge` (stream-copy prefix) and once with
:func:`reencode_merge` (the reference design: decode, trim, concat, re-encode; it lives in
media_samples.py, shared with the backend's video tests).
It reports merge wall times and the PSNR of the reused prefix against the first video
after the chain (``inf`` = bit-exact).  Synthetic frames, no model needed.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from reuse_backend.media import segments as seg
from reuse_backend.media import video

from .media_samples import prefix_psnr, reencode_merge, synthetic_frames

__all__ = ["bench_merge"]


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
