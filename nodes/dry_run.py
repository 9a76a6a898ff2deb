"""Dry run: what would each reuse node of an API-format prompt do, without executing anything.

It computes the same keys as execution (including the host change tokens ComfyUI adds,
e.g. LoadImage's file hash) and compares them with the committed caches, read-only.
"""
from __future__ import annotations

import copy

from ..reuse_backend.errors import InvalidRequestError, ReuseError
from ..reuse_backend.keys.graph_key import is_link
from ..reuse_backend.keys.slots import decide_slot
from ..reuse_backend.media import segments
from ..reuse_backend.media.segment_plan import RESULT_FILE, SECTION, make_spec, plan_resume, valid_prefixes
from ..reuse_backend.store import Cache, roots
from . import host
from .graph_view import (ENCODE_PREFIX, PREFIX, SLOT_IO_TYPES, START_ID, GraphView, find_end_node, segment_key,
                         session_of, slot_key)


def _declared_specs(cls) -> dict:
    """name -> input spec of the declared (required and optional) inputs of a node class."""
    try:
        spec = cls.INPUT_TYPES()
    except Exception:
        return {}
    return {**(spec.get("optional") or {}), **(spec.get("required") or {})}


_COERCE = {"INT": int, "FLOAT": float, "STRING": str, "BOOLEAN": bool}


def _coerce_literals(node: dict, specs: dict) -> None:
    """Convert literal inputs the way ComfyUI's prompt validation does before execution
    (execution.validate_inputs writes ``int(v)`` / ``float(v)`` / ``str(v)`` / ``bool(v)`` back
    into the queued prompt and unwraps ``{"__value__": v}``), so the dry run computes keys from
    the same values execution sees: the frontend sends a FLOAT widget holding 1.0 as ``1``."""
    inputs = node.get("inputs")
    if not isinstance(inputs, dict):
        return
    for name, spec in specs.items():
        if name not in inputs or is_link(inputs[name]):
            continue
        v = inputs[name]
        if isinstance(v, dict) and "__value__" in v:
            v = inputs[name] = v["__value__"]
        kind = spec[0] if isinstance(spec, (list, tuple)) and spec else None
        conv = _COERCE.get(kind) if isinstance(kind, str) else None
        if conv is not None:
            try:
                inputs[name] = conv(v)
            except (TypeError, ValueError, OverflowError):
                pass  # execution rejects it at validation; the key walk sees the raw value


def fill_change_tokens(prompt: dict) -> dict:
    """A copy of ``prompt`` as execution sees it: literals coerced like ComfyUI's validation
    does, and ComfyUI's per-node ``is_changed`` values filled in."""
    out = copy.deepcopy(prompt)
    for node in out.values():
        if not isinstance(node, dict):
            continue
        ct = node.get("class_type", "")
        cls = host.node_class(ct)
        if cls is None:
            continue
        specs = _declared_specs(cls)
        _coerce_literals(node, specs)
        if ct.startswith(PREFIX):
            continue
        fn = host.change_token_fn(cls)
        if fn is None:
            continue
        literals = {k: v for k, v in (node.get("inputs") or {}).items() if k in specs and not is_link(v)}
        try:
            node["is_changed"] = [fn(**literals)]
        except Exception:
            node["is_changed"] = float("nan")
    return out


def _snapshot(name: str):
    return Cache(host.cache_root(), roots.validate_cache_name(name)).snapshot()


def _err(e: Exception) -> dict:
    return e.to_dict() if isinstance(e, ReuseError) else {"type": type(e).__name__, "message": str(e)}


def _session(view, node_id):
    sess = session_of(view, node_id)
    if not sess:
        raise ValueError(f"node {node_id} has no SeedReuse Session connected")
    return sess


def dry_run(prompt: dict) -> dict:
    view = GraphView(fill_change_tokens(prompt))
    snaps: dict = {}
    result = {"nodes": {}, "segments": {}}
    try:
        for nid, node in prompt.items():
            ct = node.get("class_type", "") if isinstance(node, dict) else ""
            if ct.startswith(ENCODE_PREFIX):
                result["nodes"][nid] = _slot_answer(view, nid, ct, snaps)
            elif ct == START_ID:
                result["segments"][nid] = _segment_answer(view, nid, snaps)
    finally:
        for s in snaps.values():
            if s is not None:
                s.close()
    return result


def _cached_snapshot(snaps, name):
    if name not in snaps:
        snaps[name] = _snapshot(name)
    return snaps[name]


def _slot_answer(view, nid, ct, snaps) -> dict:
    slot = (view.get(nid).get("inputs") or {}).get("slot")
    try:
        sess = _session(view, nid)
        name, mode = sess.get("cache_name", "default"), sess.get("reuse", "auto")
        d = decide_slot(_cached_snapshot(snaps, name), cache_name=name, slot=slot,
                        key=slot_key(view, nid, SLOT_IO_TYPES.get(ct, "*")), mode=mode)
        return {"kind": "slot", "slot": slot, "cache": name, "mode": mode, "will": d.action,
                "reason": d.reason, "mismatch": d.mismatch, "key": d.key.digest}
    except Exception as e:
        return {"kind": "slot", "slot": slot, "will": "fail", "reason": str(e), "error": _err(e)}


def _segment_answer(view, nid, snaps) -> dict:
    inputs = view.get(nid).get("inputs") or {}
    out: dict = {"kind": "segments"}
    try:
        sess = _session(view, nid)
        name, n = sess.get("cache_name", "default"), int(sess.get("reuse_prefix_segments", 0))
        F, M, fps = int(inputs["segment_frames"]), int(inputs["motion_frames"]), float(inputs["fps"])
        total = int(inputs.get("total_frames") or 0)
        out.update({"cache": name, "N": n, "F": F, "M": M})
        snap = _cached_snapshot(snaps, name)
        section = ((snap.manifest.get("sections") or {}).get(SECTION) if snap else None) or {}
        prev = section.get("spec") or {}
        if prev:
            out["previous"] = {"segments": prev.get("S"), "frames": section.get("frames"),
                               "seed": section.get("seed"), "segment_starts": section.get("segment_starts"),
                               "result": RESULT_FILE}
        audio_expected = "audio" in inputs
        if total == 0 and not audio_expected:  # what execution raises first (Segment Loop Start)
            raise InvalidRequestError("total_frames is 0 and no audio is connected",
                                      expected="total_frames > 0 or an audio input", actual=0,
                                      fix="set total_frames, or connect the audio that sets the duration")
        end_id = find_end_node(view, nid)
        if end_id is None:
            raise ValueError("no Segment Loop End is connected to this Segment Loop Start")
        if total == 0:  # duration from audio: only known at run time; use the previous run's
            total = int(prev.get("total_frames") or 0)
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
        out["prefix_frames_by_n"] = [segments.prefix_frames(i, F, M) for i in range(spec.S)]
        key = segment_key(view, end_id, spec)
        plan = plan_resume(snap, cache_name=name, N=n, spec=spec, key=key, audio_expected=audio_expected)
        valid = valid_prefixes(snap, spec, key, audio_expected)
        out.update({"valid": True, "will": "resume" if n else "generate", "plan": plan.describe(),
                    "valid_n": valid, "key": key.digest})
    except Exception as e:
        out.update({"valid": False, "will": "fail", "reason": str(e), "error": _err(e)})
    return out
