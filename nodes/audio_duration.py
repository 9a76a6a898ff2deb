"""The length in frames of a Segment Loop Start's audio before any run, so the dry run can show
the segment timeline of a workflow whose length follows its audio (``total_frames`` = 0).

Only a LoadAudio node connected straight to the Start's ``audio`` input is read: its input file
(inside ComfyUI's input folder, as LoadAudio resolves it) is decoded with PyAV the way LoadAudio
decodes it, counting samples and keeping none, and the frame count is the one Segment Loop Start
computes at run time (``ceil(samples / sample_rate * fps)``). Anything else (another audio
source, a missing or unreadable file, a file over ``MAX_AUDIO_BYTES``) gives 0: "known at run
time". Results are kept per (path, size, mtime), so a dry run after every edit decodes a file once.
"""
from __future__ import annotations

import os

from ..reuse_backend.keys.graph_limits import is_link
from ..reuse_backend.media.segment_trim import audio_frames
from . import host

MAX_AUDIO_BYTES = 512 * 1024 * 1024
_CACHE_SIZE = 32
_samples_cache: dict = {}   # (path, size, mtime_ns) -> (samples, sample_rate)


def _decode_length(path: str) -> tuple[int, int]:
    import av

    with av.open(path) as container:
        if not container.streams.audio:
            return 0, 0
        stream = container.streams.audio[0]
        rate = int(stream.codec_context.sample_rate or 0)
        samples = sum(int(frame.samples) for frame in container.decode(streams=stream.index))
    return samples, rate


def samples_of(path: str) -> tuple[int, int]:
    """(samples per channel, sample rate) of an audio file; (0, 0) when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return 0, 0
    if st.st_size > MAX_AUDIO_BYTES:
        return 0, 0
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _samples_cache:
        try:
            found = _decode_length(path)
        except Exception:   # not audio, damaged, or a codec PyAV lacks: known at run time then
            found = (0, 0)
        if len(_samples_cache) >= _CACHE_SIZE:
            _samples_cache.pop(next(iter(_samples_cache)))
        _samples_cache[key] = found
    return _samples_cache[key]


def audio_total_frames(view, start_id: str, fps: float) -> int:
    """Frames of the video the Start node's audio sets (0 when not known before the run)."""
    link = ((view.get(start_id) or {}).get("inputs") or {}).get("audio")
    if not is_link(link):
        return 0
    src = view.get(link[0]) or {}
    if src.get("class_type") != "LoadAudio":
        return 0
    path = host.input_file_path((src.get("inputs") or {}).get("audio"))
    if not path:
        return 0
    samples, rate = samples_of(path)
    return audio_frames(samples, rate, fps)   # as Segment Loop Start computes it
