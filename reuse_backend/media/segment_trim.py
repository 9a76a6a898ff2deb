"""Ending the merged video with its audio: the last segment's surplus frames.

S segments of F frames (M shared) make ``P(S) = S*(F-M)+M`` frames, usually more than the
audio needs: a 10 s track at 16 fps is ``A = 160`` frames, and F=81, M=9 gives S=3 segments of
``P(3) = 225`` frames (14.06 s). The merged output video keeps frames ``[0, A)`` only and the
complete audio track, so it ends with its audio (its length is ``A / fps``, which is at most one
frame longer than the audio: ``A = ceil(seconds * fps)``).

Invariants, and where they are kept:

* Only the last segment's surplus is cut: the trim needs ``P(S-1) < A <= P(S)`` (for S = 1,
  ``0 < A <= F``). Segment Loop Start computes S from A when ``total_frames`` is 0, which always
  gives that (``segments.segment_count``); with an explicit ``total_frames`` the audio may end
  earlier or later, and then nothing is cut and ``TrimPlan.reason`` says why.
* The cache keeps the untrimmed result (all P(S) frames), the untrimmed segment starts and
  boundaries: a resume at N < S copies ``P(N) <= P(S-1) < A`` frames, and an extension (N = the
  old S) copies all ``P(S)`` frames and starts from the old take's tail boundary, exactly as
  without a trim. The trimmed frames are cut from the output video only (nodes/prefix_merge.py).
* Segment Loop End encodes the last segment's new frames as two chunks split at A, so the
  untrimmed result has a keyframe at A and the output is a packet copy of its first A frames
  (video.cut); no frame is encoded twice.

Not guaranteed: the audio track keeps the encoder's padding (AAC: up to one 1024-sample frame
after the last sample), so a player may report the file's duration a few milliseconds past A/fps.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from . import segments


def audio_frames(samples: int, sample_rate: int, fps: float) -> int:
    """Video frames the audio lasts: ``ceil(samples / sample_rate * fps)``, at least 1 (the
    length Segment Loop Start gives a video whose ``total_frames`` is 0). 0 when unknown."""
    if samples <= 0 or sample_rate <= 0 or fps <= 0:
        return 0
    return max(1, math.ceil(samples / float(sample_rate) * fps - 1e-9))


@dataclass(frozen=True)
class TrimPlan:
    frames: int                 # frames the segments make: P(S) (the cached result's)
    output_frames: int          # frames of the merged output video
    trimmed: int                # surplus frames cut from the end: frames - output_frames
    audio_frames: int | None    # A (None: no audio connected, 0: not known yet)
    reason: str                 # what is cut, or why nothing is
    last_start: int = 0         # first new frame of the last segment: P(S-1) (0 for S = 1)
    blocked: bool = False       # the audio does not end inside the last segment's new frames

    @property
    def last_chunk_keep(self) -> int | None:
        """New frames of the last segment that the output keeps (None: nothing is cut)."""
        return self.output_frames - self.last_start if self.trimmed else None

    def to_dict(self) -> dict:
        return asdict(self)


def plan_trim(S: int, F: int, M: int, fps: float, audio: int | None) -> TrimPlan:
    """The output video of S segments for an audio of ``audio`` frames (None: no audio)."""
    total = segments.total_frames(S, F, M)
    last = segments.new_frames_range(S - 1, F, M)[0]

    def keep(reason: str, blocked: bool = False) -> TrimPlan:
        return TrimPlan(total, total, 0, audio, reason, last, blocked)

    if audio is None:
        return keep(f"no audio connected: nothing to end the video at, it keeps all {total} frames")
    if audio <= 0:
        return keep("the audio's length is known at run time")
    sec = f"{audio} frames, {audio / fps:.2f} s at {fps:g} fps"
    if audio > total:
        return keep(f"not trimmed: the audio ({sec}) is longer than the {S} segment(s) cover ({total} frames): "
                    f"the video ends {audio - total} frame(s) before its audio; set total_frames = 0 "
                    f"(the length follows the audio) or >= {audio}", True)
    if audio == total:
        return keep(f"the video ends with its audio ({sec}): nothing to trim")
    if audio <= last:
        return keep(f"not trimmed: the audio ({sec}) ends before the last segment's new frames "
                    f"({last}..{total - 1}); total_frames asks for whole segments past the audio "
                    f"(set total_frames = 0 to follow the audio)", True)
    return TrimPlan(total, audio, total - audio, audio,
                    f"{total - audio} surplus frame(s) of the last segment will be trimmed: the merged video has "
                    f"{audio} frames ({audio / fps:.2f} s) and ends with its audio ({sec}); the cache keeps all "
                    f"{total} for later resumes", last)
