"""Segment Reuse: validate a resume request against the committed cache, before any sampling.

``plan_resume`` runs its checks in a fixed order and stops at the first failure, so the
user always gets the most fundamental problem first:

1. 0 <= N < S                         (every request generates at least one segment)
2. a committed cache exists            (a successful run to resume from)
3. it holds a segment run              (the chosen take: the latest, or ``from_take``)
4. the kept segments are valid         (segments 0..N-1 one by one, segment_validity: the first
                                        segment and field that differ; a take recorded before
                                        per-segment validity: the whole segment key, listing fields)
5. the take's result is in the cache   (published with the commit)
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

from . import segment_takes, segment_validity, segments
from . import video
from ..errors import CorruptCacheError, InvalidRequestError, NoCommittedCacheError, PreviousResultError, ReuseError
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
    take: object = None                     # segment_takes.Take resumed from (None: N = 0)

    def describe(self) -> str:
        if self.N == 0:
            return "no prefix reused: every segment is generated"
        of = f"take {self.take.number}" if self.take is not None else "the previous result"
        return (f"keeping segments 0..{self.N - 1} ({self.prefix_frames} frames) of {of}, "
                f"resuming at segment {self.N} from boundary {self.N - 1}")


def make_spec(F: int, M: int, fps: float, total_frames: int) -> SegmentSpec:
    S = segments.segment_count(total_frames, F, M)
    return SegmentSpec(F, M, S, float(fps), segments.total_frames(S, F, M))


def valid_prefixes(base, spec: SegmentSpec, key: ReuseKey, audio_expected: bool, *, take=None,
                   static: ReuseKey | None = None, audio_source: ReuseKey | None = None, prompts=()) -> list[int]:
    """Every N that plan_resume would accept from ``take`` (default: the latest), judged from the
    manifest alone (no video probe: the dry run calls this on every canvas edit; the requested N
    is planned in full). A take with per-segment validity is judged segment by segment (an
    audio source that changed counts as valid here: its samples are compared at run time)."""
    valid = [0]
    take = take if take is not None else next(iter(segment_takes.read_takes(base)), None)
    section = take.section if take is not None else {}
    if not section or (audio_expected and not section.get("has_audio")):
        return valid
    rec = section.get("validity")
    if rec and static is not None:
        states = segment_validity.dry_states(rec, static, audio_source, take.segments, prompts)
        ok = next((s["segment"] for s in states if s["state"] == "invalid"), len(states))
    else:
        ok = take.segments if (section.get("key") or {}).get("digest") == getattr(key, "digest", None) else 0
    frames = int(section.get("frames") or 0)
    # bounded by the boundaries the take holds (at most manifest.MAX_BOUNDARY + 1), not by S
    for cand in sorted(int(i) + 1 for i in take.boundaries):
        if cand < spec.S and cand <= ok and segments.prefix_frames(cand, spec.F, spec.M) <= frames:
            valid.append(cand)
    return valid


def _missing_run(base, cache_name: str, N: int):
    if base is None:
        return NoCommittedCacheError(
            f"reuse_prefix_segments={N} needs a previous successful run in cache '{cache_name}', and there is none",
            expected="a committed segment run", actual="empty cache",
            fix="run once with reuse_prefix_segments=0 and let it finish successfully")
    return NoCommittedCacheError(
        f"cache '{cache_name}' has no segment run to resume from",
        expected="a committed segment run", actual=f"sections {sorted(base.manifest.get('sections') or {})}",
        fix="run the segment workflow once with reuse_prefix_segments=0")


def longest_prefix(take, spec: SegmentSpec, request) -> tuple[int, str]:
    """N for reuse_prefix_segments = -1: the most leading segments of ``take`` still valid for
    this request (and < S, with their boundary kept), and why it stops there."""
    if take is None:
        return 0, "no previous take: every segment is generated"
    limit = min(spec.S - 1, max(take.boundaries, default=-1) + 1, take.segments)
    rec = take.validity
    if rec is None or request is None:
        return 0, f"take {take.number} has no per-segment validity record (made before it): generating every segment"
    n, m = segment_validity.longest_valid(rec, request, limit, spec.F, spec.M)
    why = (f"segment {m.segment} differs ({m.field})" if m is not None and m.segment < limit else
           f"every request generates at least one segment (S = {spec.S})" if limit == spec.S - 1 else
           f"take {take.number} has {take.segments} segments")
    return n, f"longest valid prefix of take {take.number}: {n} segment(s); stops because {why}"


def plan_resume(base, *, cache_name: str, N: int, spec: SegmentSpec, key: ReuseKey,
                audio_expected: bool, take=None, request=None) -> ResumePlan:
    """Check a resume at N from ``take`` (default: the latest take of ``base``). ``request``
    (segment_validity.RequestValidity) judges the kept segments one by one when the take has a
    validity record; otherwise (an older cache) the whole segment key must match."""
    segments.validate_resume(N, spec.S)
    if N == 0:
        return ResumePlan(0, 0)
    take = take if take is not None else next(iter(segment_takes.read_takes(base)), None)
    if base is None or take is None:
        raise _missing_run(base, cache_name, N)
    section = take.section
    if take.validity is not None and request is not None:
        if N > take.segments:
            raise InvalidRequestError(
                f"take {take.number} of cache '{cache_name}' has {take.segments} segments: "
                f"reuse_prefix_segments={N} keeps more than it holds",
                expected=f"reuse_prefix_segments <= {take.segments}", actual=N,
                fix=f"use reuse_prefix_segments <= {take.segments} (or -1: as many as are still valid)")
        segment_validity.ensure_valid(take.validity, request, N, cache_name=cache_name, take=take.number,
                                      F=spec.F, M=spec.M)
    else:
        ensure_match(section.get("key") or {}, key, cache_name=cache_name, what="a segment run (video prefix)")
    P = segments.prefix_frames(N, spec.F, spec.M)
    result = take.result
    if result not in (base.manifest.get("files") or {}):
        raise PreviousResultError(f"cache '{cache_name}' lists no previous result video",
                                  expected=result, actual="missing", fix=REBUILD)
    try:
        with base.open_file(result) as f:
            info = video.probe(f)
    except Exception as e:   # the file itself is broken: never "check that the input exists"
        cause = e.__cause__ if isinstance(e, ReuseError) and e.__cause__ is not None else e
        why = cause.message if isinstance(cause, ReuseError) else (str(cause) or type(cause).__name__)
        raise PreviousResultError(
            f"the previous result in cache '{cache_name}' ({result}) is unreadable: {why}",
            expected="a decodable MP4 written by Prefix Merge", actual=type(cause).__name__,
            fix=f"{REBUILD} (or clear it: python -m reuse_backend clear {cache_name} --yes)",
            details={"cache": cache_name, "file": result}) from e
    if info.frames < P:
        raise PreviousResultError(
            f"the previous result has {info.frames} frames, fewer than the {P} frames of {N} segments",
            expected=f">= {P} frames (P(N) = N*(F-M)+M)", actual=info.frames,
            fix="lower reuse_prefix_segments or run with 0 to rebuild the cache")
    if audio_expected and not info.has_audio:
        raise PreviousResultError("the previous result has no audio track but this workflow has audio",
                                  expected="an audio track", actual="none",
                                  fix="run with reuse_prefix_segments=0 so the result carries the audio")
    fname = take.boundaries.get(N - 1)
    if fname is None or fname not in base.manifest["files"]:
        raise CorruptCacheError(f"boundary {N - 1} is missing from cache '{cache_name}'"
                                + (f" (take {take.number})" if not take.latest else ""),
                                expected=f"boundary_{N - 1:05d}", actual="missing",
                                fix="lower reuse_prefix_segments, or run with reuse_prefix_segments=0 to rebuild "
                                    "the cache (a take made before take history has no boundary after its last "
                                    "segment, so it cannot be extended)")
    try:
        boundary = base.load_file_value(fname)
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
    return ResumePlan(N, P, boundary, info, list(range(N)), take=take)
