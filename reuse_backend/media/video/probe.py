"""Demux-only inspection of MP4 files: frame count, keyframes, codec parameters."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


from .frames import _TAG, _bad, _index, _open, _sha



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
