"""Segment Reuse: validate a resume request against the committed cache, before any sampling.

``plan_resume`` runs its checks in a fixed order and stops at the first failure, so the
user always gets the most fundamental problem first:

1. 0 <= N < S                         (every request generates at least one segment)
2. a committed cache exists            (a successful run to resume from)
3. it holds a segment run              (the "segments" section)
4. the segment key matches             (everything the prefix depends on; lists the fields)
5. the previous result is in the cache (published with the commit)
6. it decodes, has >= P(N) frames, keyframe layout known, audio when audio is expected
7. boundary N-1 is present and loads   (the exact motion state segment N consumes)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import segments
from . import video
from ..errors import (CorruptCacheError, InvalidRequestError, NoCommittedCacheError,
                     PreviousResultError, ReuseError)
from ..keys.key import ReuseKey, ensure_match

SECTION = "segments"
RESULT_FILE = "result.mp4"


@dataclass
class SegmentSpec:
    F: int
    M: int
    S: int
    fps: float
    total_frames: int

    def to_dict(self) -> dict:
        return {"F": self.F, "M": self.M, "S": self.S, "fps": self.fps, "total_frames": self.total_frames}


@dataclass
class ResumePlan:
    N: int
    prefix_frames: int
    boundary: object = None                 # the loaded boundary N-1 value (dict of tensors)
    prev_info: object = None                # video.VideoInfo of the previous result
    carry_boundaries: list = field(default_factory=list)

    def describe(self) -> str:
        if self.N == 0:
            return "no prefix reused: every segment is generated"
        return (f"keeping segments 0..{self.N - 1} ({self.prefix_frames} frames) of the previous result, "
                f"resuming at segment {self.N} from boundary {self.N - 1}")


def make_spec(F: int, M: int, fps: float, total_frames: int) -> SegmentSpec:
    S = segments.segment_count(total_frames, F, M)
    return SegmentSpec(F, M, S, float(fps), segments.total_frames(S, F, M))


def valid_prefixes(base, spec: SegmentSpec, key: ReuseKey, audio_expected: bool) -> list[int]:
    """Every N that plan_resume would accept, judged from the manifest alone (no video probe:
    the dry run calls this on every canvas edit; the requested N is planned in full)."""
    valid = [0]
    section = ((base.manifest.get("sections") or {}).get(SECTION) if base else None) or {}
    if not section or (section.get("key") or {}).get("digest") != key.digest \
            or RESULT_FILE not in (base.manifest.get("files") or {}) \
            or (audio_expected and not section.get("has_audio")):
        return valid
    boundaries = base.manifest.get("boundaries") or {}
    frames = int(section.get("frames") or 0)
    for cand in range(1, spec.S):
        if segments.prefix_frames(cand, spec.F, spec.M) <= frames and str(cand - 1) in boundaries:
            valid.append(cand)
    return valid


def plan_resume(base, *, cache_name: str, N: int, spec: SegmentSpec, key: ReuseKey,
                audio_expected: bool) -> ResumePlan:
    segments.validate_resume(N, spec.S)
    if N == 0:
        return ResumePlan(0, 0)
    if base is None:
        raise NoCommittedCacheError(
            f"reuse_prefix_segments={N} needs a previous successful run in cache '{cache_name}', and there is none",
            expected="a committed segment run", actual="empty cache",
            fix="run once with reuse_prefix_segments=0 and let it finish successfully")
    section = (base.manifest.get("sections") or {}).get(SECTION)
    if not section:
        raise NoCommittedCacheError(
            f"cache '{cache_name}' has no segment run to resume from",
            expected="a committed segment run", actual=f"sections {sorted(base.manifest.get('sections') or {})}",
            fix="run the segment workflow once with reuse_prefix_segments=0")
    ensure_match(section.get("key") or {}, key, cache_name=cache_name, what="a segment run (video prefix)")
    P = segments.prefix_frames(N, spec.F, spec.M)
    if RESULT_FILE not in (base.manifest.get("files") or {}):
        raise PreviousResultError(f"cache '{cache_name}' lists no previous result video",
                                  expected=RESULT_FILE, actual="missing",
                                  fix="run with reuse_prefix_segments=0 to rebuild the cache")
    try:
        with base.open_file(RESULT_FILE) as f:
            info = video.probe(f)
    except ReuseError:
        raise
    except Exception as e:
        raise PreviousResultError(f"the previous result in cache '{cache_name}' cannot be read: {e}",
                                  expected="a decodable MP4", actual=type(e).__name__,
                                  fix="run with reuse_prefix_segments=0 to rebuild the cache") from e
    if info.frames < P:
        raise PreviousResultError(
            f"the previous result has {info.frames} frames, fewer than the {P} frames of {N} segments",
            expected=f">= {P} frames (P(N) = N*(F-M)+M)", actual=info.frames,
            fix="lower reuse_prefix_segments or run with 0 to rebuild the cache")
    if audio_expected and not info.has_audio:
        raise PreviousResultError("the previous result has no audio track but this workflow has audio",
                                  expected="an audio track", actual="none",
                                  fix="run with reuse_prefix_segments=0 so the result carries the audio")
    if base.manifest.get("boundaries", {}).get(str(N - 1)) is None:
        raise CorruptCacheError(f"boundary {N - 1} is missing from cache '{cache_name}'",
                                expected=f"boundary_{N - 1:05d}", actual="missing",
                                fix="run with reuse_prefix_segments=0 to rebuild the cache")
    boundary = base.load_boundary(N - 1)
    if not isinstance(boundary, dict) or "motion_frames" not in boundary:
        raise CorruptCacheError(f"boundary {N - 1} of cache '{cache_name}' has no motion frames",
                                expected="{'motion_frames': IMAGE, ...}", actual=type(boundary).__name__,
                                fix="run with reuse_prefix_segments=0 to rebuild the cache")
    mf = boundary["motion_frames"]
    if getattr(mf, "shape", (None,))[0] != spec.M:
        raise InvalidRequestError(f"boundary {N - 1} holds {getattr(mf, 'shape', ['?'])[0]} motion frames",
                                  expected=spec.M, actual=getattr(mf, "shape", None),
                                  fix="use the same motion_frames as the cached run")
    return ResumePlan(N, P, boundary, info, list(range(N)))
