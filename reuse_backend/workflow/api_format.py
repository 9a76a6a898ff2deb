"""Instrumenting an API-format prompt ({node id: {class_type, inputs}}).

An API prompt names no types: output types come from the host's /object_info when it is given
(the route passes the running host's), else from node_types.KNOWN_OUTPUTS; a node of an
unknown class is reported, never guessed. New node ids continue after the largest integer in
any id: a flattened subgraph's id such as "324:307" counts by every part, so a new id is never
the prefix of a subgraph's inner ids ("324", which no node of the prompt holds itself).
"""
from __future__ import annotations

from . import limits
from . import node_types as nt
from .analysis import FlatNode


def is_api_prompt(doc) -> bool:
    return isinstance(doc, dict) and bool(doc) and all(
        isinstance(n, dict) and isinstance(n.get("class_type"), str) and isinstance(n.get("inputs"), dict)
        for n in doc.values())


def is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], (str, int)) and \
        isinstance(v[1], int) and not isinstance(v[1], bool)


def check(doc: dict) -> None:
    links = sum(1 for n in doc.values() for v in n["inputs"].values() if is_link(v))
    limits.check_counts(len(doc), links)


def flat_nodes(doc: dict, info: dict | None = None) -> dict:
    out = {}
    for nid, n in doc.items():
        ct = n["class_type"]
        meta = n.get("_meta") if isinstance(n.get("_meta"), dict) else {}
        fn = FlatNode(key=str(nid), class_type=ct, title=str(meta.get("title") or ""))
        fn.out_types = nt.output_types_from_info(info, ct)
        fn.out_names = nt.output_names_from_info(info, ct)
        fn.output_node = nt.is_output_node(info, ct)
        for name, v in n["inputs"].items():
            if is_link(v) and str(v[0]) in doc:
                fn.links[name] = (str(v[0]), v[1])
            else:
                fn.literal_names.add(name)
        if nt.is_wrapper(ct) and isinstance(n["inputs"].get("slot"), str):
            fn.slot_literal = n["inputs"]["slot"]
        fn.place = str(nid)
        out[fn.key] = fn
    _link_types(out)
    matched = {k: _match_inputs(info, fn.class_type) for k, fn in out.items()}
    matched = {k: m for k, m in matched.items() if m and nt.MATCH_TYPE in (out[k].out_types or [])}
    for _ in range(len(matched)):        # a chain of switches resolves one link per round
        changed = False
        for k, names in matched.items():
            fn = out[k]
            got = {fn.in_types.get(name) for name in names if name in fn.links} - {None, nt.MATCH_TYPE}
            if len(got) == 1:
                t = got.pop()
                new = [t if o == nt.MATCH_TYPE else o for o in fn.out_types]
                changed |= new != fn.out_types
                fn.out_types = new
        if not changed:
            break
        _link_types(out)
    return out


def _link_types(out: dict) -> None:
    for fn in out.values():
        for name, (src, slot) in fn.links.items():
            types = out[src].out_types
            if types is not None and 0 <= slot < len(types) and types[slot]:
                fn.in_types[name] = types[slot]


def _match_inputs(info: dict | None, class_type: str) -> list:
    """The inputs a match-type output takes its type from (ComfySwitchNode's on_false / on_true):
    the class's inputs of the match type, from the host's /object_info (else the table). The canvas
    types such an output by what is linked; an API prompt does not say, so the instrumenter reads it
    the same way."""
    schema = (info or {}).get(class_type)
    inp = schema.get("input") if isinstance(schema, dict) else None
    if not isinstance(inp, dict):
        return list(nt.KNOWN_MATCH_INPUTS.get(class_type, ()))
    return [name for sec in ("required", "optional") for name, spec in (inp.get(sec) or {}).items()
            if isinstance(spec, (list, tuple)) and spec and spec[0] == nt.MATCH_TYPE]


def _next_id(doc: dict) -> int:
    """Above every integer part of every id: a new id "324" could otherwise equal the prefix of a
    flattened subgraph's inner nodes ("324:307"), whose instance id the host's id scheme and the
    expanded-node lookups read as that prefix."""
    best = 0
    for k in doc:
        for part in str(k).split(":"):
            if part.isdigit():
                best = max(best, int(part))
    return best + 1


def apply(doc: dict, wraps: list, cache_name: str) -> tuple[list, dict]:
    """Insert the wrappers (and a Session when there is none); returns (wrapper ids, session)."""
    session = {"node": None, "created": False, "threaded_into": []}
    if not wraps:
        return [], session
    nxt = _next_id(doc)
    sid = next((k for k, n in doc.items() if n["class_type"] == nt.SESSION), None)
    if sid is None:
        sid, nxt = str(nxt), nxt + 1
        doc[sid] = {"class_type": nt.SESSION, "inputs": {"cache_name": cache_name, "reuse": "auto",
                                                         "reuse_prefix_segments": 0},
                    "_meta": {"title": "SeedReuse Session"}}
        session["created"] = True
    session["node"] = sid
    ids = []
    for w in wraps:
        wid, nxt = str(nxt), nxt + 1
        for nid, n in doc.items():
            for name, v in n["inputs"].items():
                if is_link(v) and str(v[0]) == w.src and v[1] == w.slot:
                    n["inputs"][name] = [wid, 0]
        doc[wid] = {"class_type": w.variant,
                    "inputs": {"session": [sid, 0], "slot": w.name, "value": [w.src, w.slot]},
                    "_meta": {"title": f"Encode or Reuse: {w.name}"}}
        ids.append(wid)
    return ids, session
