"""Dry run: what would each reuse node of an API-format prompt do, without executing anything.

Same keys as execution (host change tokens included), compared with the committed caches, read-only.

Bounded before any expensive work (``check_request``; the route answers 413 for a limit, 400
for an invalid prompt, with ``{"error": {code, type, message, expected, actual, fix}}``):
``MAX_BODY_BYTES`` (16 MiB) of body; ``MAX_NODES`` (2000) nodes (the official templates have at
most a few hundred); ``MAX_VALUE_DEPTH`` (32) levels of lists/objects in one input value; no
dependency cycle (the answer names its nodes) and every INT/FLOAT literal as ComfyUI's validation
checks it (converted, then the schema's min/max unless the class validates that input itself),
the pack's own inputs exactly (an INT is a whole number: never 1.5, true or "2"), among the
nodes ComfyUI validates (upstream of an output) or the pack reads (upstream of its nodes);
``MAX_KEY_CHARS`` (64 M) characters of keys in all; ``prefix_frames_by_n`` lists at most
``MAX_LISTED_SEGMENTS`` entries (``S`` is the full count). The walks are iterative, linear in nodes +
edges; field names are paths (a chain of d nodes has O(d^2) characters): what the key limits bound.
"""
from __future__ import annotations


from ..reuse_backend.errors import CorruptCacheError, InvalidRequestError
from ..reuse_backend.keys import graph_key, graph_limits
from ..reuse_backend.keys.graph_limits import MAX_VALUE_DEPTH, is_link
from ..reuse_backend.keys.literal_numbers import number_problem
from ..reuse_backend.keys.slots import decide_slot
from ..reuse_backend.keys.value_checks import inspect_slot
from . import host
from .dry_run_segments import MAX_LISTED_SEGMENTS  # noqa: F401  (documented above; the segment answers)
from .dry_run_segments import Snapshots, cached_snapshot as _cached_snapshot, error_dict as _err, \
    segment_answer as _segment_answer, session_settings as _session
from .graph_view import END_ID, ENCODE_PREFIX, PREFIX, SLOT_IO_TYPES, START_ID, GraphView, set_change_token, slot_key

MAX_BODY_BYTES = 16 << 20
MAX_NODES = 2000
MAX_KEY_CHARS = 64_000_000
MAX_LISTED_PROBLEMS = 20


class RequestTooLargeError(InvalidRequestError):
    """The request exceeds a documented limit of the dry run (HTTP 413)."""
    code = "request_too_large"


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


def _too_large(what: str, limit, actual, fix: str) -> RequestTooLargeError:
    return RequestTooLargeError(f"{what} exceeds the dry run's limit of {limit}", expected=f"<= {limit}", actual=actual, fix=fix)


def check_request(prompt, schemas: host.NodeClasses | None = None) -> tuple[dict, dict]:
    """Refuse what the dry run does not serve, before any expensive work: RequestTooLargeError
    for a limit (413), InvalidRequestError / GraphCycleError for an invalid prompt (400).

    Returns (checked, keyed): the nodes ComfyUI validates or the pack reads (upstream of an
    output node or of one of the pack's nodes), and those upstream of the pack's nodes."""
    schemas = schemas or host.NodeClasses()
    if not isinstance(prompt, dict):
        raise InvalidRequestError("the prompt is not an object", expected="{node id: {class_type, inputs}}",
                                  actual=type(prompt).__name__, fix='post {"prompt": <API-format prompt>}')
    if len(prompt) > MAX_NODES:
        raise _too_large("the number of nodes", MAX_NODES, len(prompt),
                         "check a smaller workflow: split it, or remove nodes that do not feed the reuse nodes")
    for nid, node in prompt.items():
        if not isinstance(node, dict):
            raise InvalidRequestError(f"not an API-format prompt: node {nid!r} is {type(node).__name__}, not an object",
                                      expected="{class_type, inputs}", actual=type(node).__name__,
                                      fix="send the API-format prompt (node id -> {class_type, inputs})")
        # A node without class_type is accepted: the canvas exports nodes of types the server
        # lacks that way, and the dry run treats them as unknown nodes. A present one is a string.
        ct, inputs = node.get("class_type", ""), node.get("inputs", {})
        if not isinstance(ct, str):
            raise InvalidRequestError(
                f"not an API-format prompt: node {nid!r}: class_type is {'null' if ct is None else type(ct).__name__}"
                ", not a string", expected="a node type name", actual=repr(ct)[:80],
                fix="give the node its class_type, or leave class_type out for a node the server lacks")
        if not isinstance(inputs, dict):
            raise InvalidRequestError(f"not an API-format prompt: node {nid!r}: inputs is {type(inputs).__name__}, "
                                      "not an object", expected="{input name: value or [node id, output index]}",
                                      actual=type(inputs).__name__, fix="send the inputs as an object")
        for name, v in inputs.items():
            if isinstance(v, (list, dict)) and graph_limits.value_shape(v)[0] > MAX_VALUE_DEPTH:
                raise _too_large(f"node {nid}, input {name!r}: the nesting of the value", f"{MAX_VALUE_DEPTH} levels",
                                 f"> {MAX_VALUE_DEPTH} levels", "pass a flat value (widgets send numbers, text "
                                 "and at most a list of values)")
    ours = [nid for nid, n in prompt.items() if n.get("class_type", "").startswith(PREFIX)]
    roots = ours + [nid for nid, n in prompt.items() if schemas.is_output(n.get("class_type"))]
    checked = graph_key.upstream_nodes(prompt, roots)
    problems = []
    for nid in prompt:      # in prompt order
        if nid in checked:
            problems += _literal_problems(nid, prompt[nid], schemas)
        if len(problems) >= MAX_LISTED_PROBLEMS:
            break
    if problems:
        first = problems[0]
        raise InvalidRequestError(
            f"node {first['node']} ({first['class_type']}): {first['message']}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            expected=first["expected"], actual=first["actual"], fix=first["fix"],
            details={"node": first["node"], "class_type": first["class_type"], "input": first["input"],
                     "problems": problems[:MAX_LISTED_PROBLEMS]})
    return checked, graph_key.upstream_nodes(prompt, ours)


def _literal_problems(nid, node: dict, schemas: host.NodeClasses) -> list[dict]:
    """The INT/FLOAT literals of one node that ComfyUI's validation would refuse (converted, then
    min/max unless the class validates that input itself); the pack's own inputs exactly."""
    ct = node.get("class_type")
    specs = schemas.specs(ct)
    if not specs:
        return []
    own = ct.startswith(PREFIX)
    args, kwargs = schemas.self_validated(ct)
    out = []
    for name, v in (node.get("inputs") or {}).items():
        spec = specs.get(name)
        kind = spec[0] if isinstance(spec, (list, tuple)) and spec else None
        if kind not in ("INT", "FLOAT") or is_link(v):
            continue
        if isinstance(v, dict) and "__value__" in v:
            v = v["__value__"]
        extra = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
        ranged = own or (name not in args and not kwargs)
        e = number_problem(name, kind, v, exact=own, minimum=extra.get("min") if ranged else None,
                           maximum=extra.get("max") if ranged else None)
        if e is not None:
            out.append({"node": nid, "class_type": ct, "input": name, "message": e.message,
                        "expected": e.expected, "actual": e.actual, "fix": e.fix, "value": e.details.get("value")})
    return out


def fill_change_tokens(prompt: dict, keyed=None, schemas: host.NodeClasses | None = None) -> dict:
    """A copy of ``prompt`` as execution sees it: literals coerced like ComfyUI's validation
    does, and ComfyUI's per-node ``is_changed`` values filled in, for the nodes in ``keyed``
    (default: all; the dry run passes those upstream of the pack's nodes, the only ones keys
    read). Nodes and their inputs are copied, values are shared (never modified). Change tokens
    are asked once per (class, literal inputs): 100 LoadImage nodes of one file hash it once."""
    schemas = schemas or host.NodeClasses()
    out = {nid: ({**node, "inputs": dict(node.get("inputs") or {})} if isinstance(node, dict) else node)
           for nid, node in prompt.items()}
    tokens: dict = {}
    for nid in (out if keyed is None else keyed):
        node = out[nid]
        if not isinstance(node, dict):
            continue
        ct = node.get("class_type", "")
        if schemas.cls(ct) is None:
            continue
        specs = schemas.specs(ct)
        _coerce_literals(node, specs)
        set_change_token(node, schemas, tokens)
    return out


def dry_run(prompt: dict, root: str | None = None, *, extra_pnginfo=None) -> dict:
    """Per reuse node "reuse" / "encode" / "fail" and why, against the caches under ``root``
    (the requesting user's namespace; default: the configured root), with the seeds and samplers
    each slot's key depends on (``depends_on``). ``extra_pnginfo``: the workflow metadata the
    queued prompt would carry (``extra_data.extra_pnginfo``; keys of nodes that read it). Raises
    RequestTooLargeError (413) or another ReuseError (400) for a request it refuses (see
    check_request and the module doc)."""
    schemas = host.NodeClasses()
    _, keyed = check_request(prompt, schemas)
    snaps = Snapshots(root or host.cache_root())
    result = {"nodes": {}, "segments": {}}
    with graph_limits.key_budget(MAX_KEY_CHARS) as budget:
        view = GraphView(fill_change_tokens(prompt, keyed, schemas), extra_pnginfo=extra_pnginfo, classes=schemas)
        ends = _loop_ends(prompt)
        try:
            for nid, node in prompt.items():
                ct = node.get("class_type", "")     # a string: check_request refused any other
                if ct.startswith(ENCODE_PREFIX):
                    result["nodes"][nid] = _slot_answer(view, nid, ct, snaps)
                elif ct == START_ID:
                    result["segments"][nid] = _segment_answer(view, nid, snaps, ends)
                if budget.exhausted:
                    raise _too_large("the size of the keys of this request", f"{MAX_KEY_CHARS} characters", "more",
                                     "check a smaller workflow (fewer reuse nodes, shorter chains upstream of them)")
        finally:
            for s in snaps.values():
                if s is not None:
                    s.close()
    return result


def _loop_ends(prompt: dict) -> dict:
    """Segment Loop Start id -> the first Segment Loop End linked to it (find_end_node, one pass)."""
    ends: dict = {}
    for nid, node in prompt.items():
        if node.get("class_type") == END_ID:
            link = (node.get("inputs") or {}).get("loop")
            if is_link(link):
                ends.setdefault(link[0], nid)
    return ends


def _slot_answer(view, nid, ct, snaps) -> dict:
    slot = (view.get(nid).get("inputs") or {}).get("slot")
    try:
        sess = _session(view, nid)
        name, mode = sess.get("cache_name", "default"), sess.get("reuse", "auto")
        try:   # an unreadable version: auto rebuilds it, require fails (decide_slot says which)
            snap, snap_err = _cached_snapshot(snaps, name), None
        except CorruptCacheError as e:
            snap, snap_err = None, e
        io_type = SLOT_IO_TYPES.get(ct, "*")
        d = decide_slot(snap, cache_name=name, slot=slot, key=slot_key(view, nid, io_type), mode=mode,
                        snapshot_error=snap_err,   # inspect: the cheap check (header and structure only)
                        inspect=lambda s: inspect_slot(s, cache_name=name, slot=slot, io_type=io_type, load=False))
        return {"kind": "slot", "slot": slot, "cache": name, "mode": mode, "will": d.action,
                "reason": d.reason, "mismatch": d.mismatch, "key": d.key.digest,
                "depends_on": [dep.to_dict() for dep in d.key.depends]}
    except Exception as e:
        return {"kind": "slot", "slot": slot, "will": "fail", "reason": str(e), "error": _err(e)}
