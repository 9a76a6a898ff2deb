"""The dry run's view of a segment cache's takes, for the current graph (read-only, no sampling).

For each kept take: its segments with their validity for this graph ('valid', 'invalid' with
the first differing field, 'run_time' when only the audio source changed: its samples are
compared when the request runs, before any sampling), P(N) per N, the N a resume from it
accepts and its longest valid prefix. Judged from the manifest alone (no video probe).
"""
from __future__ import annotations

from . import segment_takes, segment_validity, segments, take_output
from .segment_validity import RequestValidity

MAX_LISTED = 10_000


def assumed_request(take, static, audio_source, prompts=()) -> RequestValidity | None:
    """What the dry run can know of a request: its static key; the per-segment chains are taken
    as the take's own (the audio is only loaded at run time; dry_states says 'run_time' when its
    source changed). None for a take recorded before per-segment validity (whole key)."""
    rec = take.validity if take is not None else None
    if not rec:
        return None
    segs = rec.get("segments") or []
    chains = {name: [s.get(name) for s in segs] for name in segment_validity.CHAINS}
    chains["prompt"] = segment_validity.prompt_chain(prompts, len(segs))   # known from the graph: exact
    return RequestValidity(static, chains, audio_source, rec.get("track"))


def _longest(take, states, spec) -> tuple[int, dict | None]:
    limit = min(spec.S - 1, max(take.boundaries, default=-1) + 1, take.segments) if spec else take.segments
    for s in states[:max(limit, 0)]:
        if s["state"] in ("invalid", "unknown"):
            return s["segment"], s
    return max(limit, 0), None


def take_report(take, spec, key, static, audio_source, audio_expected: bool, prompts=()) -> dict:
    rec = take.validity
    S = take.segments
    if rec:
        states = segment_validity.dry_states(rec, static, audio_source, S, prompts)
    else:   # a take from before per-segment validity: all or nothing, by the whole segment key
        same = (take.section.get("key") or {}).get("digest") == getattr(key, "digest", None)
        states = [{"segment": i, "state": "valid" if same else "invalid",
                   **({} if same else {"field": "(segment key: recorded before per-segment validity)"})}
                  for i in range(S)]
    if take.damaged:          # unusable as a whole (a file of it is damaged): nothing to resume
        states = [{"segment": i, "state": "invalid", "field": f"damaged take ({take.damaged})"}
                  for i in range(S)]
    elif audio_expected and not take.section.get("has_audio"):
        states = [{"segment": i, "state": "invalid", "field": "audio (the take has no audio track)"}
                  for i in range(S)]
    n, stop = _longest(take, states, spec)
    F, M = (spec.F, spec.M) if spec else (int(take.section["spec"]["F"]), int(take.section["spec"]["M"]))
    listed = min(S, MAX_LISTED)
    return {"take": take.number, "latest": take.latest, "damaged": take.damaged,
            "seed": take.section.get("seed"), "segments": S,
            "frames": take.section.get("frames"), **take_output.saved(take.section),
            "created_at": take.section.get("created_at"),
            "source_take": take.section.get("source_take"), "result": take.result,
            "segment_validity": states[:listed],
            "prefix_frames_by_n": [segments.prefix_frames(i, F, M) for i in range(min(S, MAX_LISTED) + 1)],
            "valid_n": list(range(n + 1)), "longest_valid": n,
            "first_invalid": None if stop is None else {k: stop.get(k) for k in ("segment", "state", "field")}}


def takes_report(base, spec, key, static, audio_source, audio_expected: bool, from_take: int,
                 prompts=()) -> dict:
    """Every kept take's report, and which take a request with ``from_take`` resumes from."""
    takes = segment_takes.read_takes(base)
    chosen = next((t for t in takes if t.number == from_take), None) if from_take else (takes[0] if takes else None)
    reports = [take_report(t, spec, key, static, audio_source, audio_expected, prompts) for t in takes]
    mine = next((r for r in reports if chosen is not None and r["take"] == chosen.number), None)
    return {"takes": reports, "from_take": chosen.number if chosen is not None else None,
            "longest_valid": mine["longest_valid"] if mine else 0}
