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
  Without B-frames the same 81 frames of 832x480 test content took 2.1x the bytes.
* ``mbtree=0``: with macroblock-tree ratecontrol on, this libx264 build (core 165, AVX-512
  asm) gave different bytes for the same frames from one call to the next in one process
  (some frame sizes, e.g. 160x96); with ``mbtree=0`` it is reproducible (so it is with
  mbtree and asm limited to AVX2, but x264-params cannot mask CPU flags portably).
  Measured cost on 832x480 test content: none in size or PSNR.
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
CHUNK_PARAMS = "stitchable=1:open-gop=0:mbtree=0"
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


def _settings(container) -> dict | None:
    """Encoder settings write_chunk records in the MP4 comment (used to re-encode a prefix)."""
    w = container.metadata.get("comment", "").split()
    kv = dict(x.split("=", 1) for x in w[1:] if "=" in x) if w[:1] == [_TAG] else {}
    if set(kv) != {"crf", "preset", "threads"} or not (kv["crf"] + kv["threads"]).isdigit():
        return None
    return {"crf": int(kv["crf"]), "preset": kv["preset"], "threads": int(kv["threads"])}


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


def _copy_blocker(src, P: int, fps: Fraction, ref: VideoInfo) -> str | None:
    """Why the first P frames of ``src`` cannot be packet-copied in front of the chunks
    (None when they can).  Demuxes only the packets up to the cut plus a short window."""
    with _open(src, "previous result") as c:
        if not c.streams.video:
            raise _bad("the previous result has no video stream", "an MP4 with video",
                       repr(src), "run without segment reuse (N=0)", PreviousResultError)
        v = c.streams.video[0]
        cc = v.codec_context
        if (cc.width, cc.height) != (ref.width, ref.height):
            raise _bad("the previous result's frame size differs from the new segments'",
                       f"{ref.width}x{ref.height}", f"{cc.width}x{cc.height}",
                       "keep the resolution, or run without segment reuse (N=0)",
                       PreviousResultError)
        if cc.name != ref.codec or _sha(cc.extradata) != ref.extradata_sha256:
            return "its codec parameters (SPS/PPS) differ from the new chunks'"
        seen, cut, after, npk = set(), False, 0, 0
        for p in c.demux(v):
            if not p.size:
                continue
            t = _ts(p, fps)
            if t is None:
                return f"its timestamps are not on the 1/{fps} s frame grid"
            i = t[0]
            if cut:  # frames displayed before the cut must not be decoded after it
                if i < P:
                    return f"frame {i} is decoded after the cut at frame {P}"
                after += 1
                if after >= _REORDER_WINDOW or p.is_keyframe:
                    break
            elif i >= P:
                if i != P or not p.is_keyframe:
                    return f"it has no keyframe at frame {P}"
                cut = True
            else:
                seen.add(i)
                npk += 1
        if not cut and npk < P:
            raise _short(P, npk)
        if npk != P or len(seen) != P or min(seen) != 0 or max(seen) != P - 1:
            return f"the packets before frame {P} are not exactly frames 0..{P - 1}"
        return None


def _copied(pieces, fps: Fraction, ov, keyframes: list):
    """Packet-copy each (source, frames) piece in order, re-based so frame k has pts k."""
    tb, offset, last = 1 / fps, 0, None
    for src, count in pieces:
        n = 0
        with _open(src) as c:
            v = c.streams.video[0]
            for p in c.demux(v):
                if not p.size:
                    continue
                t = _ts(p, fps)
                if t is None:
                    raise ReuseError("timestamps are off the frame grid", expected=f"1/{fps}",
                                     actual=(src, p.pts, p.dts), fix="use write_chunk's fps")
                i, d = t
                if i >= count:
                    break  # a prefix: from the cut on, the packets belong to the old suffix
                d += offset
                if last is not None and d <= last:
                    raise ReuseError("decode timestamps would not increase across a join",
                                     expected=f"dts > {last}", actual=d,
                                     fix="encode all chunks with the same settings")
                last = d
                p.stream, p.time_base = ov, tb
                p.pts, p.dts, p.duration = i + offset, d, 1
                if p.is_keyframe:
                    keyframes.append(i + offset)
                n += 1
                yield d * tb, p
        if n != count:
            raise _bad("a merge source has fewer frames than planned", count, n,
                       "check the source videos", PreviousResultError)
        offset += count


def _reencode_prefix(out_path, src, P, cuts, fps, settings, ref, temps) -> list:
    """Decode the first P frames once and re-encode them as chunks split at ``cuts``."""
    frames = iter_frames(src, 0, P, "previous result")
    bounds = [0] + sorted({int(k) for k in cuts if 0 < int(k) < P}) + [P]
    pieces = []
    for a, b in zip(bounds, bounds[1:]):
        tmp = _temp_next_to(out_path, f".prefix{a}.mp4")
        temps.append(tmp)
        part = itertools.islice(frames, b - a)
        first = next(part, None)
        if first is None:
            raise _short(P, f"< {b} frames")
        info = write_chunk(tmp, itertools.chain([first], part), fps, **settings)
        if info.frames != b - a:
            raise _short(P, f"< {b} frames")
        if info.extradata_sha256 != ref.extradata_sha256:
            raise _bad("the re-encoded prefix does not match the chunks' codec parameters",
                       ref.extradata_sha256[:12], info.extradata_sha256[:12],
                       "encode chunks with write_chunk (its settings are read back)")
        pieces.append((tmp, b - a))
    return pieces


def merge(out_path, *, chunks, prefix_source=None, prefix_frames: int = 0, audio=None,
          fps, prefix_keyframes=()) -> MergeReport:
    """Result = first ``prefix_frames`` frames of ``prefix_source`` + all chunk frames.

    The prefix is packet-copied when the previous result has a keyframe exactly at
    ``prefix_frames`` and the chunks' extradata; otherwise it is decoded and re-encoded
    with the chunks' settings (read from their metadata) as chunks split at
    ``prefix_keyframes`` (pass the segment starts P(1)..P(N-1) so that later resumes can
    stream-copy again), with a warning.  ``audio``: None, ``("copy", source)`` (every
    audio packet of ``source``) or ``("encode", waveform [C, T], sample_rate)``.
    Streams packets: memory does not grow with the video length.
    """
    fps, t0 = _fps(fps), time.perf_counter()
    chunks = list(chunks)
    if not chunks:
        raise _bad("nothing to merge: every request must generate at least one segment",
                   ">= 1 chunk", 0, "pass the new segments' chunks")
    infos = [probe(c) for c in chunks]
    ref = infos[0]
    for c, info in zip(chunks, infos):
        if info.codec != "h264" or (info.extradata_sha256, info.width, info.height) != (
                ref.extradata_sha256, ref.width, ref.height):
            raise _bad("chunks were encoded with different codec parameters",
                       f"h264 {ref.width}x{ref.height} extradata {ref.extradata_sha256[:12]}",
                       f"{c!r}: {info.codec} {info.width}x{info.height} extradata "
                       f"{info.extradata_sha256[:12]}", "encode every chunk with write_chunk")
        if 0 not in info.keyframes:
            raise _bad("a chunk does not start with a keyframe", "keyframe at frame 0",
                       repr(c), "encode chunks with write_chunk")
        if info.fps != fps:
            raise _bad("a chunk was encoded at another frame rate", f"{fps} fps",
                       f"{c!r}: {info.fps} fps", "merge at the fps the chunks were written at")
    P = int(prefix_frames)
    if P < 0 or (P > 0 and prefix_source is None):
        raise _bad("invalid prefix", "prefix_frames >= 0, with a prefix_source when > 0",
                   f"{P}, {prefix_source!r}", "pass the previous result as prefix_source")
    warnings, mode, pieces, temps, keyframes = [], "none", [], [], []
    try:
        if P > 0:
            reason = _copy_blocker(prefix_source, P, fps, ref)
            if reason is None:
                mode, pieces = "stream-copy", [(prefix_source, P)]
            else:
                mode = "re-encode"
                msg = (f"the previous result's first {P} frames cannot be stream-copied "
                       f"({reason}); decoding and re-encoding them")
                log.warning(msg)
                warnings.append(msg)
                pieces = _reencode_prefix(out_path, prefix_source, P, prefix_keyframes, fps,
                                          dict(ref.encoder_settings or {}), ref, temps)
        pieces += [(c, i.frames) for c, i in zip(chunks, infos)]

        def write(tmp):
            with ExitStack() as stack:
                out = stack.enter_context(av.open(tmp, "w", format="mp4"))
                tc = stack.enter_context(_open(chunks[0]))
                out.metadata.update({k: v for k, v in tc.metadata.items() if k == "comment"})
                ov = out.add_stream_from_template(tc.streams.video[0])
                ov.time_base = 1 / fps
                _mux_all(out, stack, _copied(pieces, fps, ov, keyframes), audio)

        _finish(out_path, write)
    finally:
        for t in temps:
            if os.path.exists(t):
                os.unlink(t)
    return MergeReport(frames=sum(n for _, n in pieces), prefix_mode=mode,
                       seconds=time.perf_counter() - t0, keyframes=sorted(keyframes),
                       warnings=warnings)


def reencode_merge(out_path, *, prefix_source, prefix_frames: int, suffix_frames_or_chunks,
                   audio=None, fps, crf: int = DEFAULT_CRF, preset: str = DEFAULT_PRESET,
                   threads: int = DEFAULT_THREADS) -> MergeReport:
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
    return MergeReport(frames=count[0], prefix_mode="re-encode" if P else "none",
                       seconds=time.perf_counter() - t0, keyframes=sorted(keyframes))
