"""Segment arithmetic of long multi-segment video (InfiniteTalk style).

A video is made of ``S`` segments of ``F`` frames each; adjacent segments share ``M``
motion frames (the last ``M`` frames of segment ``i`` condition segment ``i + 1``), so
after the first segment every segment contributes only ``F - M`` new frames::

    stride      = F - M
    start(i)    = i * (F - M)              first frame of segment i (incl. its overlap)
    P(0)        = 0
    P(N)        = N * (F - M) + M, N > 0   frames of the final video owned by segments 0..N-1
    total(S)    = P(S)

Segment ``i`` contributes frames ``[0, F)`` for ``i == 0`` and ``[P(i), P(i + 1))``
otherwise (its first ``M`` frames are the overlap already owned by segment ``i - 1``).
With F=81, M=9: P(0..3) = 0, 81, 153, 225.  ``N * F`` would double-count the overlaps.

Everything here is pure integer arithmetic with validation; invalid input raises
``InvalidRequestError`` carrying expected / actual / fix.
"""
from __future__ import annotations

import hashlib
import math
from fractions import Fraction

from ..errors import InvalidRequestError

__all__ = [
    "stride", "segment_start", "prefix_frames", "new_frames_range", "total_frames",
    "segment_count", "segment_count_for_duration", "segment_seed", "audio_window",
    "validate_resume",
]

SEED_MAX = 2**64 - 1


def _int(name: str, value, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np  # numpy integers are fine, floats are not
            if isinstance(value, np.integer):
                value = int(value)
            else:
                raise TypeError
        except (ImportError, TypeError):
            raise InvalidRequestError(f"{name} must be an integer", expected="int",
                                      actual=repr(value), fix=f"pass {name} as a whole number")
    if minimum is not None and value < minimum:
        raise InvalidRequestError(f"{name} is out of range", expected=f"{name} >= {minimum}",
                                  actual=value, fix=f"use {name} >= {minimum}")
    return value


def _fm(F, M) -> tuple[int, int]:
    F = _int("F (frames per segment)", F, minimum=1)
    M = _int("M (motion frames)", M, minimum=0)
    if M >= F:
        raise InvalidRequestError("motion frames must be fewer than frames per segment",
                                  expected=f"0 <= M < F (F={F})", actual=f"M={M}",
                                  fix="lower motion_frame or raise the segment length")
    return F, M


def stride(F: int, M: int) -> int:
    """New frames contributed by every segment after the first: ``F - M``."""
    F, M = _fm(F, M)
    return F - M


def segment_start(i: int, F: int, M: int) -> int:
    """First frame (overlap included) of segment ``i`` in the final video: ``i * (F - M)``."""
    i = _int("segment index", i, minimum=0)
    return i * stride(F, M)


def prefix_frames(N: int, F: int, M: int) -> int:
    """Frames owned by the first ``N`` segments: ``P(0) = 0``, ``P(N) = N*(F-M) + M``."""
    N = _int("N (reused segments)", N, minimum=0)
    F, M = _fm(F, M)
    return 0 if N == 0 else N * (F - M) + M


def new_frames_range(i: int, F: int, M: int) -> tuple[int, int]:
    """``[start, end)`` of the final video's frames that segment ``i`` contributes."""
    i = _int("segment index", i, minimum=0)
    F, M = _fm(F, M)
    if i == 0:
        return 0, F
    return prefix_frames(i, F, M), prefix_frames(i + 1, F, M)


def total_frames(S: int, F: int, M: int) -> int:
    """Frames of a video of ``S`` segments: ``P(S)``."""
    S = _int("S (segment count)", S, minimum=1)
    return prefix_frames(S, F, M)


def segment_count(total: int, F: int, M: int) -> int:
    """Smallest ``S >= 1`` with ``P(S) >= total`` (the last segment may run past the end)."""
    total = _int("total frames", total, minimum=0)
    F, M = _fm(F, M)
    if total <= F:
        return 1
    return 1 + -(-(total - F) // (F - M))  # ceil((total - F) / (F - M))


def segment_count_for_duration(seconds, fps, F: int, M: int) -> int:
    """Segments needed to cover ``seconds`` of video at ``fps`` (frames rounded up)."""
    try:
        sec = Fraction(seconds)
        rate = Fraction(fps)
    except (TypeError, ValueError):
        raise InvalidRequestError("duration and fps must be numbers", expected="numbers",
                                  actual=f"seconds={seconds!r}, fps={fps!r}",
                                  fix="pass numeric seconds and fps") from None
    if sec < 0 or rate <= 0 or (isinstance(seconds, float) and not math.isfinite(seconds)):
        raise InvalidRequestError("duration must be >= 0 and fps > 0",
                                  expected="seconds >= 0, fps > 0",
                                  actual=f"seconds={seconds!r}, fps={fps!r}",
                                  fix="use a non-negative duration and a positive frame rate")
    return segment_count(math.ceil(sec * rate), F, M)


def segment_seed(seed: int, i: int) -> int:
    """Seed of segment ``i``, stable across processes, platforms and Python versions.

    Segment 0 uses ``seed`` itself (so a one-segment run matches the plain seed); segment
    ``i > 0`` uses the first 8 bytes (big endian) of ``sha256(f"{seed}:{i}")``, a value
    in ``0 .. 2**64 - 1``.  No ``hash()``, so PYTHONHASHSEED has no influence.
    """
    seed = _int("seed", seed, minimum=0)
    i = _int("segment index", i, minimum=0)
    if seed > SEED_MAX:
        raise InvalidRequestError("seed is out of range", expected=f"0 <= seed <= {SEED_MAX}",
                                  actual=seed, fix="use a 64-bit unsigned seed")
    if i == 0:
        return seed
    digest = hashlib.sha256(f"{seed}:{i}".encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big")


def audio_window(i: int, F: int, M: int, fps, sample_rate: int) -> tuple[int, int]:
    """``(start_sample, end_sample)`` of the audio under segment ``i``'s F frames.

    The segment covers frames ``[start(i), start(i) + F)``; samples are
    ``round(frame * sample_rate / fps)`` (exact rational arithmetic, half rounds up), so
    consecutive windows overlap by exactly the audio of the M motion frames.
    """
    F, M = _fm(F, M)
    sr = _int("sample_rate", sample_rate, minimum=1)
    try:
        rate = Fraction(fps)
    except (TypeError, ValueError):
        rate = Fraction(0)
    if rate <= 0:
        raise InvalidRequestError("fps must be a positive number", expected="fps > 0",
                                  actual=repr(fps), fix="pass the video frame rate")
    first = segment_start(i, F, M)

    def at(frame: int) -> int:
        return math.floor(Fraction(frame * sr) / rate + Fraction(1, 2))

    return at(first), at(first + F)


def validate_resume(N: int, S: int) -> None:
    """Check a resume request: ``0 <= N < S`` (every request must generate a segment)."""
    S = _int("S (segment count)", S, minimum=1)
    N = _int("reuse_prefix_segments", N)
    if N < 0 or N >= S:
        raise InvalidRequestError(
            "reuse_prefix_segments must be smaller than the segment count: every request "
            "must generate at least one segment",
            expected=f"0 <= reuse_prefix_segments < {S}", actual=N,
            fix=f"use reuse_prefix_segments between 0 and {S - 1}, or lengthen the video",
            details={"reuse_prefix_segments": N, "segment_count": S})


def feature_window(i: int, F: int, M: int, fps, feature_rate) -> tuple[int, int]:
    """``(start, end)`` feature frames under segment ``i`` for features at ``feature_rate`` Hz
    (e.g. wav2vec2: 50 per second): round(start(i) * rate / fps) .. round((start(i)+F) * rate / fps)."""
    F, M = _fm(F, M)
    rate, r = Fraction(fps).limit_denominator(10**6), Fraction(feature_rate).limit_denominator(10**6)
    if rate <= 0 or r <= 0:
        raise InvalidRequestError("fps and the feature rate must be positive", expected="> 0",
                                  actual=(fps, feature_rate), fix="pass the video fps and the encoder's rate")
    first = segment_start(i, F, M)

    def at(frame: int) -> int:
        return math.floor(Fraction(frame) * r / rate + Fraction(1, 2))

    return at(first), at(first + F)
