"""POST /seedreuse/instrument: make a workflow reusable (reuse_backend/workflow).

Body ``{"workflow": <UI-format workflow or API-format prompt>, "name": optional file name the
cache name is derived from, "cache_name": optional}``. Answer ``{"workflow": <new>, "report":
{...}}``; refusals ``{"error": {code, type, message, expected, actual, fix}}`` with 400, or 413
beyond a limit of reuse_backend/workflow/limits.py (body size, node count, nesting). Node
output types and declared inputs come from the running host's node classes.
"""
from __future__ import annotations

import asyncio
import json

from ..reuse_backend.errors import InvalidRequestError, ReuseError
from ..reuse_backend.workflow import instrument, limits
from . import host
from .host import web
from .request_body import read_capped

log = host.log
BODY_SHAPE = '{"workflow": <UI-format workflow or API-format prompt>, "name": "<optional>"}'


def _class_types(doc) -> set:
    if isinstance(doc, dict) and isinstance(doc.get("nodes"), list):
        subs = (doc.get("definitions") or {}).get("subgraphs") if isinstance(doc.get("definitions"), dict) else []
        graphs = [doc, *[s for s in subs or [] if isinstance(s, dict)]]
        return {n.get("type") for g in graphs for n in g.get("nodes") or [] if isinstance(n, dict)
                and isinstance(n.get("type"), str)}
    if isinstance(doc, dict):
        return {n.get("class_type") for n in doc.values() if isinstance(n, dict) and isinstance(n.get("class_type"), str)}
    return set()


def host_info(class_types) -> dict:
    """An /object_info-shaped view (input, output, output_name) of the host classes named."""
    classes = host.NodeClasses()
    info = {}
    for ct in sorted(class_types)[:limits.MAX_NODES]:
        got = classes.object_info(ct)
        if got is not None:   # unknown here, or its introspection fails: the built-in table decides
            info[ct] = got
    return info


def instrument_body(raw: bytes) -> dict:
    body = limits.parse_json(raw)
    if not isinstance(body, dict) or "workflow" not in body:
        raise InvalidRequestError("expected an object with a 'workflow'", expected=BODY_SHAPE,
                                  actual=type(body).__name__ if not isinstance(body, dict) else f"keys {sorted(body)[:8]}",
                                  fix="send the current graph as {\"workflow\": app.graph.serialize()}")
    name, cache_name = body.get("name"), body.get("cache_name")
    for k, v in (("name", name), ("cache_name", cache_name)):
        if v is not None and not isinstance(v, str):
            raise InvalidRequestError(f"'{k}' must be a string", expected="a string or absent",
                                      actual=type(v).__name__, fix=f"send '{k}' as a string")
    doc = body["workflow"]
    new, report = instrument(doc, name_hint=name, cache_name=cache_name or None,
                             object_info=host_info(_class_types(doc)))
    return {"workflow": new, "report": report}


async def _read(request) -> bytes:
    cap = limits.MAX_BODY_BYTES
    return await read_capped(request, cap, lambda actual: limits.too_large("bytes", cap, actual))


def _error(e: Exception, status: int):
    body = e.to_dict() if isinstance(e, ReuseError) else {"code": "internal", "type": type(e).__name__,
                                                          "message": str(e)[:500]}
    return web.json_response({"error": body}, status=status)


def register(routes) -> None:
    """Adds the route (call before the /seedreuse/ catch-all routes)."""

    @routes.post("/seedreuse/instrument")
    async def instrument_route(request):
        try:
            raw = await _read(request)
            answer = await asyncio.get_running_loop().run_in_executor(None, instrument_body, raw)
        except limits.WorkflowTooLargeError as e:
            return _error(e, 413)
        except ReuseError as e:
            return _error(e, 400)
        except Exception as e:
            log.exception("seedreuse: instrument failed")
            return _error(e, 500)
        return web.json_response(answer, dumps=lambda v: json.dumps(v, ensure_ascii=False))
