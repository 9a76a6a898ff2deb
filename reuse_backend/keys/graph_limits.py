"""The bounds of a key walk and its errors: how many nodes, how deep a literal, how many
characters one key and one request's keys may have (graph_key.py walks within them), and the
typed errors of a graph that cannot be described (a missing node, a cycle, a graph too large)."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

from ..errors import InvalidRequestError

MAX_NODES = 5000
"""Nodes upstream of one value (a larger graph is refused with GraphTooLargeError)."""
MAX_VALUE_DEPTH = 32
"""Nesting of one literal input value (lists / objects inside each other): ComfyUI widgets send
scalars, and a list widget value ``{"__value__": [...]}`` is depth 2."""
MAX_KEY_CHARS = 32_000_000
"""Characters of one key (field names and text values). Field names are paths from the start,
so a chain of d nodes costs O(d^2) characters: real workflows need a few kB; a chain of 1000
ConditioningSetTimestepRange nodes needs ~20 M (admitted), one of 2000 ~80 M (refused)."""


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


def active_budget() -> KeyBudget | None:
    """The budget of the ``key_budget`` block this code runs in, or None."""
    return _budget.get()


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


def too_deep_error(where: str) -> GraphTooLargeError:
    return GraphTooLargeError(f"{where}: the value is nested more than {MAX_VALUE_DEPTH} levels deep",
                              expected=f"<= {MAX_VALUE_DEPTH} levels of lists/objects",
                              actual=f"> {MAX_VALUE_DEPTH}", fix="pass a flat value")
