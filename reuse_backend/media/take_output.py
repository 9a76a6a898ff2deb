"""The video a take saved, told and reproduced from the cache.

Prefix Merge saves the merged result cut at the audio's end (segment_trim.py: ``output_frames``
of the ``frames`` the segments made) as the user's output, and commits the untrimmed result
(so resumes and extensions chain from every frame and boundary). The take's segment section
records both counts and the trim's outcome. What the user saw is the output, so whatever shows
a take (the cache browser, the take list, the dry run) reports ``output_frames`` with the trim,
and a route that serves a take's video serves the output: the same packet copy of the cached
result's first ``output_frames`` frames (video.cut) that Prefix Merge wrote.

Invariants: a section that records no ``output_frames`` (written before the trim existed) saved
all its frames; ``output_frames < frames`` only where Prefix Merge's cut succeeded (a failed cut
saves the untrimmed result and records ``output_frames = frames``), so the cut here is the one
that was made then, from the same committed bytes.

The cut is a packet copy with PyAV: the same frames and audio packets as the saved output. Its
bytes depend only on the source and the PyAV/FFmpeg build (measured: byte-identical on every call),
which a server's successive byte-range requests rely on. Not guaranteed: the same container bytes
across PyAV builds; the output file in ComfyUI's output folder may have been edited or deleted
since, which nothing here can see. Each call cuts again (no copy is kept): a packet copy costs
about one read of the file.
"""
from __future__ import annotations

import os
import tempfile

from . import video


def _count(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def saved(section: dict) -> dict:
    """What the take's output video holds: ``output_frames`` (the frames saved), ``trimmed`` (the
    last segment's surplus frames cut from it; the cache keeps them) and ``trim`` (what was done,
    or why nothing was cut; None when the section does not say)."""
    frames = _count(section.get("frames"))
    out = _count(section.get("output_frames"))
    if out is None or frames is None or out > frames:
        out = frames
    trim = section.get("trim") if isinstance(section.get("trim"), dict) else {}
    note = trim.get("outcome") or trim.get("reason")
    return {"output_frames": out, "trimmed": (frames - out) if frames is not None else 0,
            "trim": note if isinstance(note, str) else None}


def cut_frames(section: dict) -> int | None:
    """The frames to cut the cached result to so that it is the saved output (None: the output
    is the cached result itself)."""
    s = saved(section)
    return s["output_frames"] if s["trimmed"] > 0 and s["output_frames"] else None


def open_saved(src, section: dict, temp_dir: str | None = None):
    """The saved output of the take whose cached result is ``src`` (a path or a seekable binary
    file object), as a binary file object open for reading, and its size. When nothing was
    trimmed, None: read ``src`` itself. Otherwise the cut (packet copy, no decode, no encode) is
    written to a unique temp file in ``temp_dir`` (the system's by default) that is unlinked
    before this returns: the open file is the only reference, so closing it (or the process
    ending) frees the space; on an error nothing is left behind."""
    frames = cut_frames(section)
    if frames is None:
        return None
    fps = (section.get("spec") or {}).get("fps")
    fd, path = tempfile.mkstemp(prefix="seedreuse-output-", suffix=".mp4", dir=temp_dir)
    os.close(fd)
    try:
        video.cut(path, src, frames, fps)
        f = open(path, "rb")
    finally:
        os.unlink(path)
    return f, os.fstat(f.fileno()).st_size
