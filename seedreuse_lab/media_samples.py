"""Synthetic video frames, their comparison and the reference design's re-encode merge: what the
backend's video tests and the merge benchmark (bench_merge.py) share (no model, no host). The
re-encode baseline lives here, not in the pack: nothing in the pack uses it.
"""
from __future__ import annotations

import math
import os
import time
from contextlib import ExitStack

import av
import numpy as np

from reuse_backend.media import video
from reuse_backend.media.video.encode import _encoded, _finish, _mux_all
from reuse_backend.media.video.frames import (DEFAULT_CRF, DEFAULT_PRESET, DEFAULT_THREADS, _fps, _index,
                                              _iter_u8, _short, iter_frames)


def synthetic_frames(start: int, stop: int, width: int, height: int, variant: int = 0):
    """Frames ``start..stop-1`` of a smooth moving test pattern (distinct per frame and
    per ``variant``), uint8 [T, H, W, 3]."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    out = np.empty((max(0, stop - start), height, width, 3), np.uint8)
    for n, k in enumerate(range(start, stop)):
        r = 128 + 60 * np.sin(x / 7 + k * 0.37 + variant) + 40 * np.cos(y / 5 - k * 0.21)
        g = 128 + 70 * np.sin((x + y) / 9 - k * 0.29 - variant * 0.5)
        b = 128 + 50 * np.cos(x / 4 + y / 11 + k * 0.17 + variant * 2)
        img = np.stack([r, g, b], -1)
        s = max(2, min(width, height) // 6)
        cx, cy = (k * 5 + variant * 11) % max(1, width - s), (k * 3) % max(1, height - s)
        img[cy:cy + s, cx:cx + s] = 255 - (k * 37 + variant * 50) % 200
        out[n] = np.clip(img, 0, 255)
    return out


def psnr(a, b) -> float:
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def prefix_psnr(path_a, path_b, count: int) -> float:
    """PSNR over the first ``count`` decoded frames of two videos (streamed)."""
    se, n = 0.0, 0
    for fa, fb in zip(video.iter_frames(path_a, 0, count), video.iter_frames(path_b, 0, count)):
        se += float(np.sum((fa.astype(np.float64) - fb) ** 2))
        n += fa.size
    if n == 0:
        raise ValueError("no frames to compare")
    return math.inf if se == 0 else 10 * math.log10(255.0 ** 2 / (se / n))


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
