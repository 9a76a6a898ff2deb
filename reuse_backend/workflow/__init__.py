"""Make a workflow reusable: insert one SeedReuse Session and Encode-or-Reuse nodes after every
seed-independent encoder output (subgraphs included), and say what was and was not wrapped.

    new_doc, report = instrument(doc, name_hint="image_to_video_wan")

``doc`` is a UI-format workflow (the canvas' File > Save, with ``definitions.subgraphs``) or an
API-format prompt; it is not modified. Running it on its own output changes nothing
(``report["changed"]`` is False). Refusals are ``InvalidRequestError`` (``WorkflowTooLargeError``
beyond a limit of ``limits``), with expected / actual / fix. Pure Python: no ComfyUI import.
Modules: ``analysis`` (where to wrap), ``ui_graph`` / ``ui_format`` (UI files), ``api_format``,
``ui_to_api`` (the frontend's UI -> API conversion, subgraphs expanded), ``node_types``, ``limits``.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re

from ..errors import InvalidRequestError
from . import api_format, limits, ui_format
from .analysis import plan
from .node_types import SESSION
from .ui_graph import Workflow

__all__ = ["instrument", "derive_cache_name", "detect_format"]

_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]+")


def detect_format(doc) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("nodes"), list):
        return "ui"
    if api_format.is_api_prompt(doc):
        return "api"
    raise InvalidRequestError(
        "neither a UI-format workflow nor an API-format prompt",
        expected='a saved workflow ({"nodes": [...], "links": [...], ...}) or an API prompt '
                 '({"1": {"class_type": ..., "inputs": {...}}, ...})',
        actual=type(doc).__name__ if not isinstance(doc, dict) else f"an object with keys {sorted(doc)[:8]}",
        fix="send the file the canvas saves (File > Save) or exports (File > Export (API))")


def derive_cache_name(doc, hint: str | None = None) -> str:
    """A valid cache name for the workflow: the hint (e.g. the file name) made safe, else one
    derived from the workflow's id, else from its node types."""
    if isinstance(hint, str) and hint.strip():
        name = _NAME_BAD.sub("-", hint.strip().rsplit("/", 1)[-1].removesuffix(".json")).strip("-_")
        if name:
            return name[:64]
    wid = doc.get("id") if isinstance(doc, dict) else None
    if isinstance(wid, str) and wid.strip():
        return "wf-" + hashlib.sha256(wid.encode()).hexdigest()[:12]
    if isinstance(doc, dict) and isinstance(doc.get("nodes"), list):
        types = sorted(str(n.get("type")) for n in doc["nodes"] if isinstance(n, dict))
    else:
        types = sorted(str(n.get("class_type")) for n in (doc or {}).values() if isinstance(n, dict))
    return "wf-" + hashlib.sha256(json.dumps(types).encode()).hexdigest()[:12]


def _producer(w, fmt: str) -> dict:
    p = w.producer
    names = p.out_names or []
    d = {"node": p.key, "class_type": p.class_type, "title": p.title, "output": w.slot,
         "output_name": names[w.slot] if w.slot < len(names) else None}
    if fmt == "ui" and w.place[0] is not None:
        d["subgraph"] = w.place[0]
    return d


def instrument(doc, *, name_hint: str | None = None, cache_name: str | None = None,
               object_info: dict | None = None) -> tuple[object, dict]:
    """(instrumented copy, report). ``object_info`` (a host's /object_info) refines types and
    seed inputs; without it the built-in table is used. ``cache_name`` (else one derived from
    ``name_hint`` or the workflow) names a new Session; an existing Session is used as it is."""
    limits.check_depth(doc)
    fmt = detect_format(doc)
    out = copy.deepcopy(doc)
    name = cache_name or derive_cache_name(doc, name_hint)
    if not limits_ok_name(name):
        raise InvalidRequestError(f"invalid cache name {name!r}", expected="letters, digits, '_' and '-' (1-64)",
                                  actual=repr(name), fix="pass a plain cache name")
    if fmt == "ui":
        wf = Workflow(out)
        ctxs = wf.expand()
        flat = ui_format.flat_nodes(wf, ctxs, object_info)
        p = plan(flat)
        ids, session = ui_format.apply(wf, ctxs, p.wraps, name)
    else:
        api_format.check(out)
        flat = api_format.flat_nodes(out, object_info)
        p = plan(flat)
        ids, session = api_format.apply(out, p.wraps, name)
    wrapped = [{"slot": w.name, "node": nid, "variant": w.variant, "type": w.type, "producer": _producer(w, fmt),
                "consumers": [{"node": c, "input": i} for c, i in sorted(set(w.consumers))],
                **({"note": w.note} if w.note else {})}
               for w, nid in zip(p.wraps, ids)]
    report = {"format": fmt, "changed": bool(ids), "cache_name": _session_name(out, fmt, name),
              "session": session, "wrapped": wrapped, "already_wrapped": p.existing_slots,
              "not_wrapped": p.not_wrapped}
    return (out if ids else doc), report


def limits_ok_name(name: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", name or ""))


def _session_name(doc, fmt: str, default: str) -> str:
    """The cache name of the workflow's (first) Session, else ``default``."""
    if fmt == "api":
        v = next((n["inputs"].get("cache_name") for n in doc.values() if n.get("class_type") == SESSION), None)
    else:
        graphs = [doc, *((doc.get("definitions") or {}).get("subgraphs") or [])]
        node = next((n for g in graphs for n in g.get("nodes") or []
                     if isinstance(n, dict) and n.get("type") == SESSION), None)
        vals = (node or {}).get("widgets_values")
        v = vals[0] if isinstance(vals, list) and vals else None
    return v if isinstance(v, str) else default
