"""The prefix-reuse merge: packet-copy the previous result's first P(N) frames, append the new
chunks, mux the complete audio track."""
from __future__ import annotations

import itertools
import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from fractions import Fraction

import av

from ...storage import fsops
from ...errors import PreviousResultError, ReuseError
from .frames import _REORDER_WINDOW, _bad, _fps, _open, _sha, _short, _ts, iter_frames
from .probe import VideoInfo, probe
from .encode import _finish, _mux_all, _temp_next_to, write_chunk

log = logging.getLogger("seedreuse")


@dataclass
class MergeReport:
    frames: int
    prefix_mode: str  # "none" | "stream-copy" | "re-encode"
    seconds: float
    keyframes: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


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


def _decode_delay(src, fps: Fraction) -> int:
    """Frames between the first packet's display and decode time (x264: 2 with B-frames; 0 for a
    chunk of 1 or 2 frames, which x264 codes without reordering)."""
    with _open(src) as c:
        for p in c.demux(c.streams.video[0]):
            if p.size:
                t = _ts(p, fps)
                return 0 if t is None else max(0, t[0] - t[1])
    return 0


def _copied(pieces, fps: Fraction, ov, keyframes: list):
    """Packet-copy each (source, frames) piece in order, re-based so frame k has pts k. A piece
    with a shorter decode delay than the longest one's has its dts moved earlier by the
    difference (a constant per piece: its decode order is kept and dts <= pts still holds), so
    dts increase across every join (a 1-frame chunk after a B-frame chunk would otherwise
    repeat a dts)."""
    tb, offset, last = 1 / fps, 0, None
    delays = [_decode_delay(src, fps) for src, _ in pieces]
    longest = max(delays, default=0)
    for (src, count), delay in zip(pieces, delays):
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
                d += offset - (longest - delay)
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
            fsops.unlink(t, missing_ok=True)
    return MergeReport(frames=sum(n for _, n in pieces), prefix_mode=mode,
                       seconds=time.perf_counter() - t0, keyframes=sorted(keyframes),
                       warnings=warnings)


def cut(out_path, src, frames: int, fps) -> MergeReport:
    """The first ``frames`` frames of ``src`` with every audio packet of ``src``, by packet copy
    (no decode, no encode). ``src`` needs a keyframe at ``frames`` that nothing before it is
    decoded after (a chunk boundary of :func:`merge`'s output: Segment Loop End splits the last
    segment's chunk where the output ends); otherwise nothing is written and the error says why."""
    fps, t0 = _fps(fps), time.perf_counter()
    info, P = probe(src), int(frames)
    if not 0 < P <= info.frames:
        raise _bad("cannot cut the video there", f"1..{info.frames} frames", P,
                   "cut at most the video's own frame count")
    reason = None if P == info.frames else _copy_blocker(src, P, fps, info)
    if reason is not None:
        raise _bad(f"the first {P} frames cannot be packet-copied ({reason})", f"a keyframe at frame {P}",
                   reason, "split the chunk at that frame (write it as two chunks) before merging")
    keyframes: list = []

    def write(tmp):
        with ExitStack() as stack:
            out = stack.enter_context(av.open(tmp, "w", format="mp4"))
            sc = stack.enter_context(_open(src))
            out.metadata.update({k: v for k, v in sc.metadata.items() if k == "comment"})
            ov = out.add_stream_from_template(sc.streams.video[0])
            ov.time_base = 1 / fps
            _mux_all(out, stack, _copied([(src, P)], fps, ov, keyframes), ("copy", src) if info.has_audio else None)

    _finish(out_path, write)
    return MergeReport(frames=P, prefix_mode="stream-copy", seconds=time.perf_counter() - t0,
                       keyframes=sorted(keyframes))
