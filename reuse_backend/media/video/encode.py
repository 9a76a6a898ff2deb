"""Per-segment H.264 chunk encoding (fixed, stitchable libx264 settings) and muxing."""
from __future__ import annotations

import heapq
import itertools
import os
import time
import uuid
from fractions import Fraction
from operator import itemgetter

import av
import numpy as np

from ...errors import PreviousResultError
from ...storage import fsops
from .frames import CHUNK_PARAMS, DEFAULT_CRF, DEFAULT_PRESET, DEFAULT_THREADS, _TAG, _bad, _fps, _is_torch, _iter_u8, _open
from .probe import ChunkInfo, probe




def _temp_next_to(path, suffix: str = ".tmp") -> str:
    d, name = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(d, f".{name}.{uuid.uuid4().hex[:12]}{suffix}")


def _finish(out_path, write) -> None:
    """``write(tmp)`` to a unique temp next to out_path, fsync it, then rename it into place (through
    the store's hook point: a file in a run's staging is part of the lifecycle)."""
    tmp = _temp_next_to(out_path)
    try:
        write(tmp)
        fsops.fsync_file(tmp)
        fsops.rename(tmp, os.fspath(out_path))
    finally:
        fsops.unlink(tmp, missing_ok=True)


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
