"""Bounds on a workflow the instrumenter or the converter accepts, checked before any other work.

Like the dry run (nodes/dry_run.py): ``MAX_BODY_BYTES`` (16 MiB) of JSON; ``MAX_NODES`` (2000)
nodes in all graphs together (the official templates have at most a few hundred);
``MAX_LINKS`` (20000); ``MAX_DEPTH`` (64) levels of lists/objects anywhere in the document;
``MAX_SUBGRAPH_DEPTH`` (16) levels of subgraphs inside subgraphs, and ``MAX_FLAT_NODES`` (20000)
nodes once every subgraph instance is expanded (a subgraph used many times inside one used many
times multiplies). Every walk is iterative.
"""
from __future__ import annotations

import json

from ..errors import InvalidRequestError

MAX_BODY_BYTES = 16 << 20
MAX_NODES = 2000
MAX_LINKS = 20000
MAX_DEPTH = 64
MAX_SUBGRAPH_DEPTH = 16
MAX_FLAT_NODES = 20000


class WorkflowTooLargeError(InvalidRequestError):
    """The workflow exceeds a documented limit of the instrumenter (HTTP 413)."""
    code = "request_too_large"


def invalid(message: str, *, expected, actual, fix: str) -> InvalidRequestError:
    return InvalidRequestError(message, expected=expected, actual=actual, fix=fix)


def too_large(what: str, limit, actual, fix: str = "instrument a smaller workflow") -> WorkflowTooLargeError:
    return WorkflowTooLargeError(f"the workflow has too many {what}", expected=f"<= {limit} {what}",
                                 actual=actual, fix=fix)


def parse_json(raw: bytes | str) -> object:
    """Parse a workflow document within MAX_BODY_BYTES and MAX_DEPTH (typed errors)."""
    n = len(raw)
    if n > MAX_BODY_BYTES:
        raise WorkflowTooLargeError(f"the workflow exceeds {MAX_BODY_BYTES} bytes", expected=f"<= {MAX_BODY_BYTES} bytes",
                                    actual=f"{n} bytes", fix="instrument a smaller workflow")
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise too_large("nesting levels", MAX_DEPTH, "deeper than the JSON parser allows") from None
    except ValueError as e:
        raise invalid(f"not JSON: {str(e)[:200]}", expected="a UI-format or API-format workflow as JSON",
                      actual=f"{n} bytes", fix="save the workflow (or Export (API)) and send that file") from None
    check_depth(doc)
    return doc


def check_depth(doc: object) -> None:
    """Iteratively: no list/object nesting beyond MAX_DEPTH."""
    stack = [(doc, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            items = v.values()
        elif isinstance(v, list):
            items = v
        else:
            continue
        if d > MAX_DEPTH:
            raise too_large("nesting levels", MAX_DEPTH, f"more than {MAX_DEPTH} levels of lists/objects")
        stack.extend((x, d + 1) for x in items if isinstance(x, (dict, list)))


def check_counts(nodes: int, links: int) -> None:
    if nodes > MAX_NODES:
        raise too_large("nodes", MAX_NODES, f"{nodes} nodes")
    if links > MAX_LINKS:
        raise too_large("links", MAX_LINKS, f"{links} links")
