"""Frame conversion and decoding helpers shared by chunk encoding, probing and merging."""
from __future__ import annotations

import hashlib
import os
from fractions import Fraction

import av
import numpy as np

from ...errors import InvalidRequestError, PreviousResultError


DEFAULT_CRF, DEFAULT_PRESET, DEFAULT_THREADS = 19, "medium", 4
CHUNK_PARAMS = "stitchable=1:open-gop=0:mbtree=0"
_TAG = "seedreuse-chunk"
_REORDER_WINDOW = 34  # packets after the cut checked for frames displayed before it


def _bad(msg, expected, actual, fix, cls=InvalidRequestError):
    return cls(msg, expected=expected, actual=actual, fix=fix)


def _short(P, got):
    return _bad("the previous result is shorter than the reused prefix", f">= {P} frames",
                got, "lower reuse_prefix_segments or run without reuse", PreviousResultError)


def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _frame_u8(f) -> np.ndarray:
    if _is_torch(f):
        import torch
        f = f.detach()
        if f.dtype != torch.uint8:
            f = (f.float() * 255.0).round_().clamp_(0, 255).to(torch.uint8)
        f = f.cpu().numpy()
    f = np.asarray(f)
    if f.dtype != np.uint8:
        if f.dtype.kind != "f":
            raise _bad("frames must be uint8 or float in 0..1", "uint8 or float",
                       str(f.dtype), "pass a ComfyUI IMAGE tensor or uint8 frames")
        f = np.clip(np.rint(f.astype(np.float32) * 255.0), 0, 255).astype(np.uint8)
    if f.ndim != 3 or f.shape[2] != 3:
        raise _bad("a frame must be H x W x 3 (RGB)", "(H, W, 3)", tuple(f.shape),
                   "pass frames as [T, H, W, 3]")
    return np.ascontiguousarray(f)


def _iter_u8(frames):
    shape = getattr(frames, "shape", None)
    if shape is not None and len(shape) != 4:
        raise _bad("frames must be a batch [T, H, W, 3]", "4 dimensions", tuple(shape),
                   "stack the segment's frames along dim 0")
    for f in frames:
        yield _frame_u8(f)


def to_uint8(frames) -> np.ndarray:
    """[T,H,W,3] uint8 array from uint8 frames or float frames in 0..1 (rounded, clamped)."""
    return _stack(list(_iter_u8(frames)))


def _stack(frames) -> np.ndarray:
    return np.stack(frames) if frames else np.zeros((0, 0, 0, 3), np.uint8)


class _Cursor:
    """File-object view with its own position, so several demuxers can share one file."""

    def __init__(self, f):
        self._f, self._pos = f, 0

    def read(self, n=-1):
        self._f.seek(self._pos)
        b = self._f.read(n)
        self._pos += len(b)
        return b

    def seek(self, off, whence=0):
        base = 0 if whence == 0 else self._pos if whence == 1 else self._f.seek(0, 2)
        self._pos = base + off
        return self._pos

    def tell(self):
        return self._pos


def _open(src, role: str = "input"):
    """Open a path or a seekable binary file object for reading."""
    try:
        if isinstance(src, (str, bytes, os.PathLike)):
            return av.open(os.fsdecode(src), "r")
        return av.open(_Cursor(src), "r")
    except (OSError, av.FFmpegError) as e:
        if role == "previous result":   # the cache's own result.mp4: unreadable, not missing
            raise _bad("the previous result video in the cache is unreadable", "a readable MP4 file",
                       f"{type(e).__name__}: {e}",
                       "run with reuse_prefix_segments=0 to rebuild the cache", PreviousResultError) from e
        raise _bad(f"cannot open the {role} video", "a readable MP4 file", f"{src!r}: {e}",
                   f"check that the {role} video exists and is an MP4 file", InvalidRequestError) from e


def iter_frames(src, start: int = 0, count: int | None = None, role: str = "input"):
    """Yield decoded RGB uint8 frames ``start .. start+count-1`` in display order."""
    with _open(src, role) as c:
        v = c.streams.video[0]
        v.thread_type = "AUTO"
        for n, frame in enumerate(c.decode(v)):
            if count is not None and n >= start + count:
                return
            if n >= start:
                yield frame.to_ndarray(format="rgb24")


def decode_frames(src, start: int = 0, count: int | None = None) -> np.ndarray:
    return _stack(list(iter_frames(src, start, count)))


def audio_packets_digest(src) -> str | None:
    """sha256 over the bytes of all audio packets (None without an audio track)."""
    with _open(src) as c:
        if not c.streams.audio:
            return None
        h = hashlib.sha256()
        for p in c.demux(c.streams.audio[0]):
            if p.size:
                h.update(bytes(p))
        return h.hexdigest()


def _fps(fps) -> Fraction:
    try:
        r = Fraction(fps).limit_denominator(1_000_000)
    except (TypeError, ValueError):
        r = Fraction(0)
    if r <= 0:
        raise _bad("fps must be positive", "fps > 0", repr(fps), "pass the video frame rate")
    return r


def _index(ts, tb, fps: Fraction) -> int | None:
    """Frame index of a timestamp, or None when it is not on the 1/fps grid."""
    if ts is None or tb is None:
        return None
    x = Fraction(ts) * tb * fps
    return x.numerator if x.denominator == 1 else None


def _ts(p, fps: Fraction):
    """(display index, decode index) of a packet, or None when off the 1/fps grid."""
    i, d = _index(p.pts, p.time_base, fps), _index(p.dts, p.time_base, fps)
    return None if i is None or (p.dts is not None and d is None) else (i, i if d is None else d)


def _sha(b) -> str:
    return hashlib.sha256(bytes(b or b"")).hexdigest()
