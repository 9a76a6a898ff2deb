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
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterable

from ..errors import InvalidRequestError

EXCLUDED_INPUTS = frozenset({"seed", "noise_seed", "control_after_generate", "filename_prefix",
                             "reuse", "reuse_prefix_segments", "cache_name"})
MAX_NODES = 5000
"""Nodes upstream of one value (a larger graph is refused with GraphTooLargeError)."""
MAX_VALUE_DEPTH = 32
"""Nesting of one literal input value (lists / objects inside each other): ComfyUI widgets send
scalars, and a list widget value ``{"__value__": [...]}`` is depth 2."""
MAX_KEY_CHARS = 32_000_000
"""Characters of one key (field names and text values). Field names are paths from the start,
so a chain of d nodes costs O(d^2) characters: real workflows need a few kB; a chain of 1000
ConditioningSetTimestepRange nodes needs ~20 M (admitted), one of 2000 ~80 M (refused)."""

Resolver = Callable[[str, str, str], "str | None"]
"""resolver(class_type, input_name, value) -> content identity of a referenced file, or None."""


def is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int)


class GraphError(InvalidRequestError, ValueError):
    """The graph cannot be described: a link to a missing node, a cycle, a graph too large."""
    code = "invalid_graph"


class GraphCycleError(GraphError):
    """The graph has a dependency cycle; ``details['cycle']`` lists its node ids in link order."""
    code = "graph_cycle"


class GraphTooLargeError(GraphError):
    """The graph (or one value, or one key) exceeds a documented limit."""
    code = "graph_too_large"


def cycle_error(cycle: list[str]) -> GraphCycleError:
    """``cycle``: node ids where each takes an input from the next and the last from the first."""
    shown = " -> ".join(f"node {n}" for n in [*cycle, cycle[0]])
    return GraphCycleError(
        f"the graph has a cycle: {shown} (each takes an input from the next); ComfyUI cannot run a cycle",
        expected="a graph without cycles", actual=f"cycle through node(s) {', '.join(cycle)}",
        fix="remove one of the links between these nodes", details={"cycle": list(cycle)})


def value_shape(v, limit: int = MAX_VALUE_DEPTH) -> tuple[int, int]:
    """(nesting depth, approximate JSON size in characters) of a literal value, iteratively.
    A scalar has depth 0, ``[1]`` depth 1. Counting stops as soon as the depth exceeds ``limit``
    (then the returned depth is ``limit + 1``)."""
    depth, size = 0, 0
    stack = [(v, 0)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, str):
            size += len(x) + 2
        elif isinstance(x, dict):
            if d + 1 > limit:
                return limit + 1, size
            depth = max(depth, d + 1)
            size += 2
            for k, c in x.items():
                size += len(k) + 3 if isinstance(k, str) else 8
                stack.append((c, d + 1))
        elif isinstance(x, (list, tuple)):
            if d + 1 > limit:
                return limit + 1, size
            depth = max(depth, d + 1)
            size += 2
            stack.extend((c, d + 1) for c in x)
        else:
            size += 8
    return depth, size


class KeyBudget:
    """Characters all walks of one request may produce together (see ``key_budget``), and the
    resolver answers they share (the same file named by many nodes is resolved once)."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self.used = 0
        self.exhausted = False
        self.resolved: dict = {}


_budget: ContextVar[KeyBudget | None] = ContextVar("seedreuse_key_budget", default=None)


@contextmanager
def key_budget(max_chars: int):
    """Within this block every ``describe_upstream`` of this thread/context draws from one shared
    budget of ``max_chars`` characters (a request computing many keys stays bounded as a whole)
    and shares resolver answers. When it runs out, the walk raises GraphTooLargeError and
    ``budget.exhausted`` is set."""
    b = KeyBudget(max_chars)
    token = _budget.set(b)
    try:
        yield b
    finally:
        _budget.reset(token)


def describe_upstream(prompt: dict, link, *, label: str = "value", resolver: Resolver | None = None,
                      exclude_inputs: Iterable[str] = EXCLUDED_INPUTS,
                      skip_inputs: dict[str, Iterable[str]] | None = None,
                      passthrough: dict[str, str] | None = None,
                      ignore_change_token: Callable[[str], bool] | None = None,
                      resolved: dict | None = None) -> dict:
    """Return the key fields of everything upstream of ``link`` in ``prompt``.

    skip_inputs: class_type -> input names ignored for that class (e.g. our own reuse controls).
    passthrough: class_type -> input name; such a node is described as if the link went
    straight to that input (our Encode-or-Reuse nodes are transparent in keys).
    ignore_change_token(class_type): True for classes whose host change token must not
    enter keys (our own nodes: their tokens are process-local by design).
    resolved: the resolver answers to share with other walks of the same request (a queued
    prompt computes one key per reuse slot over the same loaders; each answer costs a lookup
    through every model folder). A key budget's own answers take precedence. An answer is the
    file's identity when first asked; not guaranteed, with or without it: a file replaced between
    a key's computation and the moment its loader reads it is not seen by the key.

    The walk is iterative (an explicit stack: no recursion limit) and visits each node once: a
    node reached again is recorded as ``{"same_node_as": <first path>}``. It writes the fields in
    the order of a depth-first walk over the inputs in sorted name order (the order the keys were
    always computed in). A link back to a node that is still being described (a cycle) raises
    GraphCycleError naming the cycle's nodes; a graph beyond MAX_NODES upstream nodes, a literal
    nested deeper than MAX_VALUE_DEPTH or a key beyond MAX_KEY_CHARS raises GraphTooLargeError.
    """
    exclude = frozenset(exclude_inputs)
    skip = {k: frozenset(v) for k, v in (skip_inputs or {}).items()}
    passthrough = passthrough or {}
    shared = _budget.get()
    resolved = shared.resolved if shared is not None else (resolved if resolved is not None else {})
    fields: dict = {}
    seen: dict[str, str] = {}
    chars = 0

    def charge(n: int) -> None:
        nonlocal chars
        chars += n
        if chars > MAX_KEY_CHARS:
            raise GraphTooLargeError(
                f"the key of {label} would exceed {MAX_KEY_CHARS} characters: the graph upstream of it "
                f"is too deep or its values too large", expected=f"<= {MAX_KEY_CHARS} characters",
                actual=f"more than {MAX_KEY_CHARS} after {len(seen)} nodes",
                fix="shorten the chain of nodes feeding this value")
        if shared is not None:
            shared.used += n
            if shared.used > shared.max_chars:
                shared.exhausted = True
                raise GraphTooLargeError(
                    f"the keys of this request would exceed {shared.max_chars} characters together",
                    expected=f"<= {shared.max_chars} characters", actual=f"more than {shared.max_chars}",
                    fix="check a smaller workflow (fewer reuse nodes or a shorter chain upstream of them)")

    def put(key: str, value, size: int) -> None:
        charge(len(key) + size)
        fields[key] = value

    stack: list[list] = []          # frames: [node_id, path, ct, inputs, sorted names, next index]
    on_stack: dict[str, int] = {}   # node id -> index of its frame (the nodes being described)

    def enter(lnk, path: str) -> None:
        """Record the node ``lnk`` points at; push a frame when its inputs remain to be walked."""
        hops: list[str] = []        # Encode-or-Reuse nodes passed through to reach the node
        while True:
            node_id, out_index = lnk
            node = prompt.get(node_id)
            if not isinstance(node, dict) or "class_type" not in node:
                raise GraphError(f"{path}: link to missing node {node_id!r}",
                                 expected="a link to a node of the prompt", actual=repr(node_id),
                                 fix="reconnect this input")
            ct = node["class_type"]
            if not isinstance(ct, str):
                raise GraphError(f"{path}: node {node_id} has class_type {type(ct).__name__}, not a string",
                                 expected="a node type name", actual=repr(ct)[:80],
                                 fix="remove the node or give it its class_type")
            inputs = node.get("inputs") or {}
            if ct in passthrough and is_link(inputs.get(passthrough[ct])):
                if node_id in hops:
                    raise cycle_error(hops[hops.index(node_id):])
                hops.append(node_id)
                lnk = inputs[passthrough[ct]]
                continue
            break
        if node_id in on_stack:     # a link back to a node being described: a cycle
            raise cycle_error([f[0] for f in stack[on_stack[node_id]:]] + hops)
        if node_id in seen:
            put(path, {"same_node_as": seen[node_id], "output": out_index}, len(seen[node_id]) + 40)
            return
        seen[node_id] = path
        if len(seen) > MAX_NODES:
            raise GraphTooLargeError(f"more than {MAX_NODES} nodes upstream of {label}",
                                     expected=f"<= {MAX_NODES} nodes", actual=f"> {MAX_NODES}",
                                     fix="check a smaller workflow")
        put(path, f"{ct}#{out_index}", len(ct) + 12)
        ic = node.get("is_changed")
        if ignore_change_token is not None and ignore_change_token(ct):
            ic = None
        if ic not in (None, False, [None], [False]):
            # A NaN change token means "different every time" to the host: such a node is
            # volatile and can never be reused, so its key field never matches.
            depth, size = value_shape(ic)
            if depth > MAX_VALUE_DEPTH:
                raise _too_deep(f"{path}#is_changed")
            put(f"{path}#is_changed", {"volatile": uuid.uuid4().hex} if _has_nan(ic) else ic, size)
        names = sorted(inputs)
        if names:
            on_stack[node_id] = len(stack)
            stack.append([node_id, path, ct, inputs, names, 0, skip.get(ct, frozenset())])

    if not is_link(link):
        raise GraphError(f"{label} is not connected to a node output", expected="a link to a node output",
                         actual=repr(link)[:80], fix=f"connect {label}")
    enter(link, label)
    while stack:
        frame = stack[-1]
        node_id, path, ct, inputs, names, i, skipped = frame
        if i == len(names):
            stack.pop()
            del on_stack[node_id]
            continue
        name = names[i]
        frame[5] = i + 1
        if name in exclude or name in skipped:
            continue
        v = inputs[name]
        if is_link(v):
            enter(v, f"{path}.{name}")
            continue
        depth, size = value_shape(v)
        if depth > MAX_VALUE_DEPTH:
            raise _too_deep(f"{path}:{name}")
        put(f"{path}:{name}", v, size)
        if resolver is not None and isinstance(v, str):
            rk = (resolver, ct, name, v)
            if rk in resolved:
                ident = resolved[rk]
            else:
                ident = resolved[rk] = resolver(ct, name, v)
            if ident is not None:
                put(f"{path}:{name}@content", ident, len(ident))
    return fields


def upstream_nodes(prompt: dict, roots) -> dict:
    """Every node upstream of ``roots`` (roots included; links to missing nodes ignored) as the
    keys of a dict, found iteratively, each node and link once; GraphCycleError naming the
    nodes of a dependency cycle among them."""
    state: dict = {}            # node id -> 1 being walked, 2 done
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        path, stack = [root], [_links_of(prompt, root)]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[path.pop()] = 2
            elif state.get(nxt) == 1:   # each node of path takes an input from the next; the last from nxt
                raise cycle_error(path[path.index(nxt):])
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(_links_of(prompt, nxt))
    return state


def _links_of(prompt: dict, nid):
    inputs = prompt[nid].get("inputs") or {}
    return iter([v[0] for _, v in sorted(inputs.items()) if is_link(v) and isinstance(prompt.get(v[0]), dict)])


def _too_deep(where: str) -> GraphTooLargeError:
    return GraphTooLargeError(f"{where}: the value is nested more than {MAX_VALUE_DEPTH} levels deep",
                              expected=f"<= {MAX_VALUE_DEPTH} levels of lists/objects",
                              actual=f"> {MAX_VALUE_DEPTH}", fix="pass a flat value")


def _has_nan(v) -> bool:
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, float):
            if math.isnan(x):
                return True
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return False


def _allowed(kind: str, lo, hi) -> str:
    what = "an integer" if kind == "INT" else "a number"
    if lo is not None and hi is not None:
        return f"{what} from {lo} to {hi}"
    if lo is not None:
        return f"{what} >= {lo}"
    if hi is not None:
        return f"{what} <= {hi}"
    return what


def number_problem(name: str, kind: str, value, *, minimum=None, maximum=None, exact: bool = True,
                   fix: str | None = None) -> InvalidRequestError | None:
    """Why the literal ``value`` of the ComfyUI "INT" / "FLOAT" input ``name`` is refused, or None.

    exact=True (the pack's own inputs): an INT must be a whole number (an int, or a float
    without a fraction; never a bool or text), a FLOAT a finite number (never a bool or text).
    exact=False (host nodes): converted as ComfyUI's prompt validation does (``int(v)`` /
    ``float(v)``: 1.5 -> 1, true -> 1, "3" -> 3), refused only when that fails.
    Then the converted value must lie in [minimum, maximum] (either may be None).
    The error's message is one line naming the input, the value and the allowed range;
    ``.fix`` says what to set (``fix`` replaces the default)."""
    allowed = _allowed(kind, minimum, maximum)
    fix = fix or f"set {name} to {allowed}"

    def refuse(why: str, shown=None):
        shown = repr(value) if shown is None else shown
        return InvalidRequestError(f"{name} {why}; got {shown} (allowed: {allowed})",
                                   expected=allowed, actual=shown, fix=fix,
                                   details={"input": name, "value": value if _plain(value) else repr(value)})

    conv = int if kind == "INT" else float
    if exact:
        if isinstance(value, bool):
            return refuse("must be a whole number, not true/false" if kind == "INT" else "must be a number, not true/false",
                          "true" if value else "false")
        if isinstance(value, str):
            return refuse("must be a number, not text")
        if not isinstance(value, (int, float)):
            return refuse(f"must be a number, not {type(value).__name__}", repr(value)[:80])
        if isinstance(value, float) and not math.isfinite(value):
            return refuse("must be a finite number")
        if kind == "INT" and isinstance(value, float) and not value.is_integer():
            return refuse("must be a whole number")
        v = value
    else:
        try:
            v = conv(value)
        except (TypeError, ValueError, OverflowError) as e:
            return refuse(f"cannot be converted to {kind} ({e})", repr(value)[:80])
    try:
        if minimum is not None and v < minimum:
            return refuse(f"must be >= {minimum}", repr(v))
        if maximum is not None and v > maximum:
            return refuse(f"must be <= {maximum}", repr(v))
    except TypeError:   # a schema bound that is not a number: nothing to compare
        return None
    return None


def _plain(v) -> bool:
    return v is None or isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v))


def literal_inputs(node: dict, names: Iterable[str]) -> dict:
    """The literal (non-link) values of the named inputs of one node."""
    inputs = node.get("inputs") or {}
    return {n: inputs[n] for n in names if n in inputs and not is_link(inputs[n])}
