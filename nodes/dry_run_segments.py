"""The dry run's answer for one Segment Loop Start (nodes/dry_run.py calls it for each loop).

Read-only, from the manifest alone (the requested N is planned in full, as execution plans
it): the segment count, P(N) per N, the N a resume accepts, the planned frame count
(``frames`` = P(S), ``output_frames`` after the last segment's surplus past the audio's end is
trimmed, ``trim`` = media/segment_trim.TrimPlan with what is cut or why nothing is), and for each kept take its
segments with their validity for the current graph and its longest valid prefix
(media/segment_report.py). ``prefix_frames_by_n`` lists at most ``MAX_LISTED_SEGMENTS`` entries.
"""
from __future__ import annotations

from ..reuse_backend.errors import CorruptCacheError, InvalidRequestError, ReuseError
from ..reuse_backend.media import segments, take_output
from ..reuse_backend.media.segment_plan import RESULT_FILE, SECTION, make_spec, plan_resume, valid_prefixes
from ..reuse_backend.media.segment_report import assumed_request, takes_report
from ..reuse_backend.media.segment_trim import plan_trim
from ..reuse_backend.media.segment_takes import choose, read_takes
from ..reuse_backend import stores
from ..reuse_backend.store import roots
from .audio_duration import audio_total_frames
from .graph_view import (find_end_node, segment_audio_source_key, segment_key, segment_prompts, segment_static_key,
                         session_of)

MAX_LISTED_SEGMENTS = 10_000


def error_dict(e: Exception) -> dict:
    return e.to_dict() if isinstance(e, ReuseError) else {"type": type(e).__name__, "message": str(e)}


def session_settings(view, node_id):
    if not (sess := session_of(view, node_id)):
        raise ValueError(f"node {node_id} has no SeedReuse Session connected")
    return sess


class Snapshots(dict):
    """cache name -> the dry run's snapshot of it, under one cache root (the requesting user's)."""

    def __init__(self, root: str):
        super().__init__()
        self.root = root


def cached_snapshot(snaps: Snapshots, name):
    # lease=False: a dry run only looks (no reader lease written, no use recorded); an eviction
    # under it can only make its answer stale, never wrong data served to a run
    if name not in snaps:
        snaps[name] = stores.open_cache(snaps.root, roots.validate_cache_name(name)).snapshot(lease=False)
    return snaps[name]


def segment_answer(view, nid, snaps, ends: dict | None = None) -> dict:
    inputs = view.get(nid).get("inputs") or {}
    out: dict = {"kind": "segments"}
    try:
        sess = session_settings(view, nid)
        name, n = sess.get("cache_name", "default"), int(sess.get("reuse_prefix_segments", 0))
        F, M, fps = int(inputs["segment_frames"]), int(inputs["motion_frames"]), float(inputs["fps"])
        total = int(inputs.get("total_frames") or 0)
        out.update({"cache": name, "N": n, "F": F, "M": M})
        try:
            snap = cached_snapshot(snaps, name)
        except CorruptCacheError as e:
            if n > 0:      # a resume needs the previous run; execution fails the same way
                raise
            snap = None    # N = 0 generates everything, and its commit replaces the broken version
            out["cache_unreadable"] = e.message
        section = ((snap.manifest.get("sections") or {}).get(SECTION) if snap else None) or {}
        prev = section.get("spec") or {}
        if prev:
            out["previous"] = {"segments": prev.get("S"), "frames": section.get("frames"),
                               "output_frames": take_output.saved(section)["output_frames"],
                               "seed": section.get("seed"), "segment_starts": section.get("segment_starts"),
                               "result": RESULT_FILE}
        audio_expected = "audio" in inputs
        if total == 0 and not audio_expected:  # what execution raises first (Segment Loop Start)
            raise InvalidRequestError("total_frames is 0 and no audio is connected",
                                      expected="total_frames > 0 or an audio input", actual=0,
                                      fix="set total_frames, or connect the audio that sets the duration")
        end_id = ends.get(nid) if ends is not None else find_end_node(view, nid)
        if end_id is None:
            raise ValueError("no Segment Loop End is connected to this Segment Loop Start")
        source, from_take = segment_audio_source_key(view, nid), int(sess.get("from_take") or 0)
        recorded = ((section.get("validity") or {}).get("audio_source") or {}).get("digest")
        if total == 0 and recorded in (None, source.digest):
            total = int(prev.get("total_frames") or 0)   # the same audio (or an older take): its duration
        if total <= 0 and (recorded is None or n == 0):
            total = audio_total_frames(view, nid, fps)   # the audio file's length, read as the loop reads it
        if total <= 0 and recorded is not None and n != 0:
            # another audio track sets the duration (an extension, say): the segment count is known at
            # run time; each take's segments are judged here, the samples when the request runs
            static = segment_static_key(view, end_id, make_spec(F, M, fps, F))
            out.update(takes_report(snap, None, None, static, source, audio_expected, from_take,
                                    segment_prompts(view, nid)))
            out.update({"valid": True, "will": "resume", "S": None, "prefix_frames_by_n": None, "valid_n": None,
                        "reason": "the segment count follows the new audio's duration, known at run time",
                        "plan": f"resume at N = {n if n >= 0 else out['longest_valid']} (checked against the "
                                "audio's samples at run time, before any sampling)"})
            return out
        if total <= 0:
            # No previous run to take the audio duration from. N = 0 needs none: a normal run whose
            # segment count follows the audio at run time. N > 0 fails as execution does (the plan
            # is checked against a spec with N + 1 segments, so only the missing run can fail it).
            if n > 0:
                plan_resume(snap, cache_name=name, N=n,
                            spec=make_spec(F, M, fps, segments.total_frames(n + 1, F, M)),
                            key=None, audio_expected=audio_expected)
            out.update({"valid": True, "will": "generate", "S": None, "prefix_frames_by_n": [0], "valid_n": [0],
                        "reason": "the segment count follows the audio duration, known at run time",
                        "plan": "no prefix reused: every segment is generated (the segment count follows "
                                "the audio duration at run time)"})
            return out
        spec = make_spec(F, M, fps, total)
        out["S"] = spec.S
        # the output's end: A = the audio file's frames (or the same track's, recorded by its last run)
        audio_len = audio_total_frames(view, nid, fps) if audio_expected else None
        if audio_len == 0 and recorded is not None and recorded == source.digest:
            audio_len = int((section.get("trim") or {}).get("audio_frames") or 0)
        trim = plan_trim(spec.S, F, M, fps, audio_len)
        out.update({"frames": spec.total_frames, "output_frames": trim.output_frames if audio_len != 0 else None,
                    "trim": trim.to_dict()})
        listed = min(spec.S, MAX_LISTED_SEGMENTS)   # P(N) = N*(F-M)+M; S may be millions
        out["prefix_frames_by_n"] = [segments.prefix_frames(i, F, M) for i in range(listed)]
        if listed < spec.S:
            out["listed_segments"] = listed
        key = segment_key(view, end_id, spec)
        # per kept take: its segments' validity for this graph, P(N), the longest valid prefix
        static = segment_static_key(view, end_id, spec)
        prompts = segment_prompts(view, nid)
        out.update(takes_report(snap, spec, key, static, source, audio_expected, from_take, prompts))
        take = choose(read_takes(snap), from_take if n else 0, name)
        n = out["N"] = out["longest_valid"] if n == -1 else n      # -1: the longest valid prefix
        plan = plan_resume(snap, cache_name=name, N=n, spec=spec, key=key, audio_expected=audio_expected,
                           take=take, request=assumed_request(take, static, source, prompts))
        valid = valid_prefixes(snap, spec, key, audio_expected, take=take, static=static, audio_source=source,
                               prompts=prompts)
        out.update({"valid": True, "will": "resume" if n else "generate", "plan": plan.describe(),
                    "valid_n": valid, "key": key.digest, "requested_n": int(sess.get("reuse_prefix_segments", 0))})
    except Exception as e:
        out.update({"valid": False, "will": "fail", "reason": str(e), "error": error_dict(e)})
    return out
