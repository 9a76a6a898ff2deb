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
8. the boundary is usable              (M float RGB frames at the previous result's frame size,
                                        which the segment key pins; finite numbers; see
                                        keys.value_checks.check_boundary)

A broken previous result or boundary (unreadable, or a value of the wrong shape) fails the
resume with what is broken and the fix: rebuild with reuse_prefix_segments=0.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import segments
from . import video
from ..errors import CorruptCacheError, NoCommittedCacheError, PreviousResultError, ReuseError
from ..keys.key import ReuseKey, ensure_match
from ..keys.value_checks import check_boundary

REBUILD = "run with reuse_prefix_segments=0 to rebuild the cache"

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
    # bounded by the boundaries the cache holds (at most manifest.MAX_BOUNDARY + 1), not by S
    for cand in sorted(int(i) + 1 for i in boundaries):
        if cand < spec.S and segments.prefix_frames(cand, spec.F, spec.M) <= frames:
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
    except Exception as e:   # the file itself is broken: never "check that the input exists"
        cause = e.__cause__ if isinstance(e, ReuseError) and e.__cause__ is not None else e
        why = cause.message if isinstance(cause, ReuseError) else (str(cause) or type(cause).__name__)
        raise PreviousResultError(
            f"the previous result in cache '{cache_name}' ({RESULT_FILE}) is unreadable: {why}",
            expected="a decodable MP4 written by Prefix Merge", actual=type(cause).__name__,
            fix=f"{REBUILD} (or clear it: python -m reuse_backend clear {cache_name} --yes)",
            details={"cache": cache_name, "file": RESULT_FILE}) from e
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
    fname = (base.manifest["boundaries"][str(N - 1)] or {}).get("file") or f"boundary_{N - 1:05d}"
    try:
        boundary = base.load_boundary(N - 1)
    except CorruptCacheError as e:
        inner = e.message.removeprefix(f"cache '{cache_name}': ").removeprefix(f"{fname}: ")
        raise CorruptCacheError(f"boundary {N - 1} in cache '{cache_name}' ({fname}) is unreadable: {inner}",
                                expected=e.expected, actual=e.actual,
                                fix=f"{REBUILD} (or clear it: python -m reuse_backend clear {cache_name} --yes)",
                                details={"cache": cache_name, "file": fname}) from None
    p = check_boundary(boundary, M=spec.M, height=info.height, width=info.width)
    if p is not None:
        raise CorruptCacheError(f"boundary {N - 1} in cache '{cache_name}' ({fname}) holds an unusable value: "
                                f"{p.text()}", expected=p.expected, actual=p.actual,
                                fix=f"{REBUILD} (or clear it: python -m reuse_backend clear {cache_name} --yes)",
                                details={"cache": cache_name, "file": fname, "path": p.path})
    return ResumePlan(N, P, boundary, info, list(range(N)))
