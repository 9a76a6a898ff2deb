"""Per-segment H.264 chunks and the prefix-reuse merge (PyAV only, no ffmpeg binary).

Every segment's new frames are encoded once, by :func:`write_chunk`, as a standalone MP4
whose first frame is an IDR frame.  All chunks use fixed libx264 settings with
``stitchable=1`` (x264 then writes headers that depend neither on the content nor on the
CRF), so chunks of one size / fps / preset carry identical SPS/PPS (extradata) and
:func:`merge` joins them by packet copy.  A merged result therefore has a keyframe at
every segment start, and a later resume packet-copies its first ``P(N)`` frames: the
reused prefix decodes bit-exactly to the previous result however often it is reused.
When that is impossible (no keyframe at ``P(N)``, other codec parameters, timestamps off
the frame grid) the prefix is decoded and re-encoded as chunks, with a warning.

Decisions (measured; see tests/backend/test_video.py):

* B-frames stay on (x264 defaults: 3 B-frames, pyramid).  x264 gives every chunk the
  same constant decode delay ``d`` (2 frames): coded packet ``j`` has dts ``j - d``.  After
  re-basing a chunk by its first output frame ``off`` its dts run ``off-d .. off+n-1-d``, so
  dts increase strictly across every join, the file's first dts is negative (an MP4 edit
  list, as in any x264 MP4) and ``dts <= pts`` holds.  The muxer checks monotonicity.
* libx264 threads are pinned (default 4): output is deterministic for a fixed thread
  count, but the count changes the bitstream (never the extradata), so automatic threads
  would make the bytes depend on the machine's core count.
* Frame ``k`` of every file written here has pts ``k`` in units of ``1/fps``.
"""
from __future__ import annotations

import hashlib
import heapq
import itertools
import logging
import os
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from fractions import Fraction
from operator import itemgetter

import av
import numpy as np

from .errors import InvalidRequestError, PreviousResultError, ReuseError

log = logging.getLogger("seedreuse")

__all__ = ["ChunkInfo", "VideoInfo", "MergeReport", "to_uint8", "write_chunk", "probe",
           "merge", "reencode_merge", "decode_frames", "iter_frames", "audio_packets_digest"]

DEFAULT_CRF, DEFAULT_PRESET, DEFAULT_THREADS = 19, "medium", 4
CHUNK_PARAMS = "stitchable=1:open-gop=0"
_TAG = "seedreuse-chunk"
_REORDER_WINDOW = 34  # packets after the cut checked for frames displayed before it


@dataclass(frozen=True)
class ChunkInfo:
    path: str
    frames: int
    width: int
    height: int
    fps: Fraction
    bytes: int
    extradata_sha256: str
    crf: int
    preset: str
    threads: int
    seconds: float


@dataclass(frozen=True)
class VideoInfo:
    frames: int
    fps: Fraction | None
    width: int
    height: int
    codec: str
    keyframes: tuple[int, ...]
    extradata_sha256: str
    has_audio: bool
    audio_sample_rate: int | None = None
    audio_channels: int | None = None
    audio_codec: str | None = None
    encoder_settings: dict | None = None  # crf / preset / threads of our own files


@dataclass
class MergeReport:
    frames: int
    prefix_mode: str  # "none" | "stream-copy" | "re-encode"
    seconds: float
    keyframes: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _bad(msg, expected, actual, fix, cls=InvalidRequestError):
    return cls(msg, expected=expected, actual=actual, fix=fix)


def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


# ---------------------------------------------------------------- frames in and out

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
    out = list(_iter_u8(frames))
    return np.stack(out) if out else np.zeros((0, 0, 0, 3), np.uint8)


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
        raise _bad(f"cannot open the {role} video", "a readable MP4 file", f"{src!r}: {e}",
                   f"check that the {role} video exists",
                   PreviousResultError if role == "previous result" else InvalidRequestError
                   ) from e


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
    out = list(iter_frames(src, start, count))
    return np.stack(out) if out else np.zeros((0, 0, 0, 3), np.uint8)


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


# ---------------------------------------------------------------- probing

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


def _sha(b) -> str:
    return hashlib.sha256(bytes(b or b"")).hexdigest()


def _settings(container) -> dict | None:
    words = container.metadata.get("comment", "").split()
    if not words or words[0] != _TAG:
        return None
    kv = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    try:
        return {"crf": int(kv["crf"]), "preset": kv["preset"], "threads": int(kv["threads"])}
    except (KeyError, ValueError):
        return None


def probe(src) -> VideoInfo:
    """Demux (never decode) the video packets: frame count, keyframes, codec parameters."""
    with _open(src) as c:
        if not c.streams.video:
            raise _bad("no video stream", "an MP4 with video", repr(src), "pass a video file")
        v, a = c.streams.video[0], (c.streams.audio[0] if c.streams.audio else None)
        rate = v.average_rate or v.guessed_rate
        fps = Fraction(rate) if rate else None
        frames, keys = 0, []
        for p in c.demux(v):
            if p.size:
                if p.is_keyframe:
                    keys.append(_index(p.pts, p.time_base, fps) if fps else frames)
                frames += 1
        ac = a.codec_context if a else None
        return VideoInfo(
            frames=frames, fps=fps, width=v.codec_context.width, height=v.codec_context.height,
            codec=v.codec_context.name, keyframes=tuple(sorted(k for k in keys if k is not None)),
            extradata_sha256=_sha(v.codec_context.extradata), has_audio=a is not None,
            audio_sample_rate=ac.sample_rate if ac else None,
            audio_channels=ac.channels if ac else None, audio_codec=ac.name if ac else None,
            encoder_settings=_settings(c))


# ---------------------------------------------------------------- writing

def _temp_next_to(path, suffix: str = ".tmp") -> str:
    d, name = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(d, f".{name}.{uuid.uuid4().hex[:12]}{suffix}")


def _finish(out_path, write) -> None:
    """``write(tmp)`` to a unique temp next to out_path, then rename it into place."""
    tmp = _temp_next_to(out_path)
    try:
        write(tmp)
        os.replace(tmp, os.fspath(out_path))
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _encoded(out, frames, fps, crf, preset, threads, params):
    """Add a libx264 stream and encode lazily.  First yields None (the stream exists, more
    streams may be added), then (dts seconds, packet) pairs."""
    it = _iter_u8(frames)
    first = next(it, None)
    if first is None:
        raise _bad("no frames to encode", "at least one frame", 0, "pass the new frames")
    h, w = first.shape[:2]
    if w % 2 or h % 2:
        raise _bad("H.264 yuv420p needs even frame sizes", "even width and height",
                   f"{w}x{h}", "crop or pad the frames to even dimensions")
    s = out.add_stream("libx264", rate=fps)
    s.width, s.height, s.pix_fmt = w, h, "yuv420p"
    s.codec_context.thread_count = int(threads)
    s.codec_context.options = {"crf": str(crf), "preset": str(preset), "x264-params": params}
    yield None
    for n, img in enumerate(itertools.chain([first], it)):
        if img.shape[:2] != (h, w):
            raise _bad("all frames must have one size", f"{w}x{h}",
                       f"{img.shape[1]}x{img.shape[0]}", "resize the frames consistently")
        vf = av.VideoFrame.from_ndarray(img, format="rgb24")
        vf.pts = n
        for p in s.encode(vf):
            yield p.dts * p.time_base, p
    for p in s.encode(None):
        yield p.dts * p.time_base, p


def _audio(stack, out, audio):
    """Add the audio stream; return a generator of (dts seconds, packet), or None."""
    if audio is None:
        return None
    kind = audio[0] if isinstance(audio, (tuple, list)) and audio else None
    if kind == "copy" and len(audio) == 2:
        c = stack.enter_context(_open(audio[1], "previous result"))
        if not c.streams.audio:
            raise _bad("the audio source has no audio track", "an audio track to copy",
                       repr(audio[1]), "pass audio=('encode', waveform, sample_rate)",
                       PreviousResultError)
        a = c.streams.audio[0]
        oa = out.add_stream_from_template(a)

        def copy():
            for p in c.demux(a):
                if p.size and p.dts is not None:
                    p.stream = oa
                    yield p.dts * p.time_base, p
        return copy()
    if kind == "encode" and len(audio) == 3:
        wave, sr = audio[1], int(audio[2])
        wave = np.asarray(wave.detach().float().cpu().numpy() if _is_torch(wave) else wave,
                          dtype=np.float32)
        while wave.ndim > 2 and wave.shape[0] == 1:  # ComfyUI AUDIO is [B, C, T]
            wave = wave[0]
        wave = wave[None] if wave.ndim == 1 else wave
        if wave.ndim != 2 or not 1 <= wave.shape[0] <= 2 or sr <= 0:
            raise _bad("audio waveform must be [C, T] with 1 or 2 channels",
                       "float32 [C, T], C in (1, 2), sample_rate > 0",
                       f"{tuple(wave.shape)} @ {sr}", "pass a mono or stereo waveform")
        layout = "mono" if wave.shape[0] == 1 else "stereo"
        oa = out.add_stream("aac", rate=sr, layout=layout)
        oa.bit_rate = 64000 * wave.shape[0]

        def enc():
            for s0 in range(0, wave.shape[1], 1024):
                fr = av.AudioFrame.from_ndarray(np.ascontiguousarray(wave[:, s0:s0 + 1024]),
                                                format="fltp", layout=layout)
                fr.sample_rate, fr.pts, fr.time_base = sr, s0, Fraction(1, sr)
                for p in oa.encode(fr):
                    yield p.dts * p.time_base, p
            for p in oa.encode(None):
                yield p.dts * p.time_base, p
        return enc()
    raise _bad("unknown audio request", "None, ('copy', source) or ('encode', waveform, rate)",
               repr(audio)[:200], "use one of the expected forms")


def _mux_all(out, stack, video_gen, audio) -> None:
    """Interleave the video generator with the audio track by dts and mux (streaming)."""
    gens = [video_gen]
    a = _audio(stack, out, audio)
    if a is not None:
        gens.append(a)
    for _, p in heapq.merge(*gens, key=itemgetter(0)):
        out.mux(p)


def write_chunk(path, frames, fps, *, crf: int = DEFAULT_CRF, preset: str = DEFAULT_PRESET,
                threads: int = DEFAULT_THREADS) -> ChunkInfo:
    """Encode one segment's new frames as a standalone H.264 MP4 starting with an IDR
    frame (deterministic: the same frames and settings give the same bytes)."""
    fps, t0 = _fps(fps), time.perf_counter()

    def write(tmp):
        with av.open(tmp, "w", format="mp4") as out:
            out.metadata["comment"] = f"{_TAG} crf={crf} preset={preset} threads={threads}"
            gen = _encoded(out, frames, fps, crf, preset, threads, CHUNK_PARAMS)
            next(gen)
            for _, p in gen:
                out.mux(p)

    _finish(path, write)
    info = probe(path)
    return ChunkInfo(path=os.fspath(path), frames=info.frames, width=info.width,
                     height=info.height, fps=fps, bytes=os.path.getsize(path),
                     extradata_sha256=info.extradata_sha256, crf=crf, preset=preset,
                     threads=threads, seconds=time.perf_counter() - t0)
