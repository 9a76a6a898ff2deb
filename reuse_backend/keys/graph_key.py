"""Describe the part of an API-format prompt that produces a value, as reuse_key fields.

The walk starts at a link ``[node_id, output_index]`` and follows every input upstream.
Fields are named by the path of input names from the start, not by node ids, so the same
computation in two workflows (or after the canvas renumbers nodes) gives the same key:

    value                         -> "CLIPTextEncode#0"
    value:text                    -> "a cat"
    value.clip                    -> "CLIPLoader#0"
    value.clip:clip_name          -> "umt5_xxl.safetensors"
    value.clip:clip_name@content  -> "sampled:9f2c..."   (file identity from the resolver)
    value#is_changed              -> host change token (e.g. LoadImage's file hash)

A node reached a second time (a diamond) is recorded as a reference to its first path.
Inputs named in ``exclude_inputs`` (seeds, reuse controls, output paths) never enter the key.
"""
from __future__ import annotations

import math
import uuid
from typing import Callable, Iterable

EXCLUDED_INPUTS = frozenset({"seed", "noise_seed", "control_after_generate", "filename_prefix",
                             "reuse", "reuse_prefix_segments", "cache_name"})
MAX_NODES = 5000

Resolver = Callable[[str, str, str], "str | None"]
"""resolver(class_type, input_name, value) -> content identity of a referenced file, or None."""


def is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int)


class GraphError(ValueError):
    pass


def describe_upstream(prompt: dict, link, *, label: str = "value", resolver: Resolver | None = None,
                      exclude_inputs: Iterable[str] = EXCLUDED_INPUTS,
                      skip_inputs: dict[str, Iterable[str]] | None = None,
                      passthrough: dict[str, str] | None = None,
                      ignore_change_token: Callable[[str], bool] | None = None) -> dict:
    """Return the key fields of everything upstream of ``link`` in ``prompt``.

    skip_inputs: class_type -> input names ignored for that class (e.g. our own reuse controls).
    passthrough: class_type -> input name; such a node is described as if the link went
    straight to that input (our Encode-or-Reuse nodes are transparent in keys).
    ignore_change_token(class_type): True for classes whose host change token must not
    enter keys (our own nodes: their tokens are process-local by design).
    """
    exclude = frozenset(exclude_inputs)
    skip = {k: frozenset(v) for k, v in (skip_inputs or {}).items()}
    passthrough = passthrough or {}
    fields: dict = {}
    seen: dict[str, str] = {}

    def visit(lnk, path: str, depth: int):
        node_id, out_index = lnk
        if depth > MAX_NODES:
            raise GraphError(f"graph too deep while describing {label}")
        node = prompt.get(node_id)
        if not isinstance(node, dict) or "class_type" not in node:
            raise GraphError(f"{path}: link to missing node {node_id!r}")
        ct = node["class_type"]
        inputs = node.get("inputs") or {}
        if ct in passthrough and is_link(inputs.get(passthrough[ct])):
            return visit(inputs[passthrough[ct]], path, depth + 1)
        if node_id in seen:
            fields[path] = {"same_node_as": seen[node_id], "output": out_index}
            return
        seen[node_id] = path
        if len(seen) > MAX_NODES:
            raise GraphError(f"more than {MAX_NODES} nodes upstream of {label}")
        fields[path] = f"{ct}#{out_index}"
        ic = node.get("is_changed")
        if ignore_change_token is not None and ignore_change_token(ct):
            ic = None
        if ic not in (None, False, [None], [False]):
            # A NaN change token means "different every time" to the host: such a node is
            # volatile and can never be reused, so its key field never matches.
            fields[f"{path}#is_changed"] = {"volatile": uuid.uuid4().hex} if _has_nan(ic) else ic
        skipped = skip.get(ct, frozenset())
        for name in sorted(inputs):
            if name in exclude or name in skipped:
                continue
            v = inputs[name]
            if is_link(v):
                visit(v, f"{path}.{name}", depth + 1)
                continue
            fields[f"{path}:{name}"] = v
            if resolver is not None and isinstance(v, str):
                ident = resolver(ct, name, v)
                if ident is not None:
                    fields[f"{path}:{name}@content"] = ident

    if not is_link(link):
        raise GraphError(f"{label} is not connected to a node output")
    visit(link, label, 0)
    return fields


def _has_nan(v) -> bool:
    if isinstance(v, float):
        return math.isnan(v)
    if isinstance(v, (list, tuple)):
        return any(_has_nan(x) for x in v)
    return False


def literal_inputs(node: dict, names: Iterable[str]) -> dict:
    """The literal (non-link) values of the named inputs of one node."""
    inputs = node.get("inputs") or {}
    return {n: inputs[n] for n in names if n in inputs and not is_link(inputs[n])}
