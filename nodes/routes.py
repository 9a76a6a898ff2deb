"""HTTP routes of the pack (all under /seedreuse/). They take cache names, never paths.

GET  /seedreuse/caches                 names of committed caches under the root
GET  /seedreuse/caches/{name}          manifest summary (key fields, artifacts, sizes, result, run)
POST /seedreuse/check                  dry run: {"prompt": <API prompt>} -> per-node hit/miss and why

Every refusal is a JSON body {"error": {...}} with a 4xx status, also for paths under
/seedreuse/ that name no route (e.g. an empty cache name or a normalized "../").
"""
from __future__ import annotations

import asyncio

from aiohttp import web

from ..reuse_backend.store import roots
from ..reuse_backend.errors import ReuseError
from ..reuse_backend.store import Cache, committed_caches
from . import host
from .dry_run import dry_run

log = host.log


def _error(e: Exception, status: int = 400):
    body = e.to_dict() if isinstance(e, ReuseError) else {"type": type(e).__name__, "message": str(e)}
    return web.json_response({"error": body}, status=status)


def summarize(snapshot) -> dict:
    m = snapshot.manifest
    files = m.get("files") or {}
    slots = {}
    for name, entry in (m.get("slots") or {}).items():
        key = entry.get("key") or {}
        slots[name] = {"file": entry["file"], "bytes": files.get(entry["file"], {}).get("bytes"),
                       "key": key.get("digest"), "key_fields": key.get("fields"), "meta": entry.get("meta")}
    sections = dict(m.get("sections") or {})
    seg = sections.get("segments")
    if seg:
        seg = {k: v for k, v in seg.items() if k != "key"} | {"key": (seg.get("key") or {}).get("digest")}
        sections["segments"] = seg
    return {"name": m["name"], "version": m["version"], "created_at": m["created_at"], "run": m["run"],
            "slots": slots, "boundaries": sorted(int(i) for i in (m.get("boundaries") or {})),
            "sections": sections, "files": files, "total_bytes": sum(f["bytes"] for f in files.values())}


def register() -> None:
    routes = host.prompt_server().routes

    @routes.get("/seedreuse/caches")
    async def list_caches(request):
        # committed caches only: never .tmp / .old / .lock, symlinks or foreign files
        return web.json_response({"caches": committed_caches(host.cache_root())})

    @routes.get("/seedreuse/caches/{name}")
    async def get_cache(request):
        try:
            name = roots.validate_cache_name(request.match_info["name"])
            snap = Cache(host.cache_root(), name).snapshot()
        except ReuseError as e:
            return _error(e)
        if snap is None:
            return web.json_response({"name": name, "committed": False})
        try:
            return web.json_response({"committed": True, **summarize(snap)})
        finally:
            snap.close()

    @routes.get("/seedreuse/caches/")
    async def get_cache_empty_name(request):
        try:
            roots.validate_cache_name("")
        except ReuseError as e:
            return _error(e)
        return _error(ValueError("empty cache name"))  # pragma: no cover (the name check refuses it)

    @routes.post("/seedreuse/check")
    async def check(request):
        try:
            body = await request.json()
        except Exception as e:
            return _error(ValueError(f"body is not JSON: {e}"))
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if not isinstance(prompt, dict):
            return _error(ValueError("expected {\"prompt\": <API-format prompt>}"))
        bad = _malformed(prompt)
        if bad:
            return _error(ValueError(f"not an API-format prompt: {bad}"))
        try:
            # off the event loop: the dry run hashes input files and probes the previous video
            answer = await asyncio.get_running_loop().run_in_executor(None, dry_run, prompt)
        except ReuseError as e:
            return _error(e)
        except Exception as e:
            log.exception("seedreuse: dry run failed")
            return _error(e, status=500)
        return web.json_response(answer)

    # Registered last: anything else under /seedreuse/ is a JSON 404, not the server's plain one.
    @routes.get("/seedreuse/{tail:.*}")
    async def unknown_get(request):
        return _not_found(request)

    @routes.post("/seedreuse/{tail:.*}")
    async def unknown_post(request):
        return _not_found(request)


def _not_found(request):
    return web.json_response({"error": {"code": "not_found", "type": "NotFound",
                                        "message": f"no SeedReuse route {request.method} {request.path!r}",
                                        "fix": "GET /seedreuse/caches, GET /seedreuse/caches/<name>, "
                                               "POST /seedreuse/check"}}, status=404)


def _malformed(prompt: dict) -> str | None:
    """Why ``prompt`` is not an API-format prompt (node id -> {class_type, inputs}), or None.
    A node without class_type is accepted: the canvas exports nodes of types the server lacks
    that way, and the dry run treats them as unknown nodes."""
    for nid, node in prompt.items():
        if not isinstance(node, dict):
            return f"node {nid!r} is {type(node).__name__}, not an object"
        if node.get("class_type") is not None and not isinstance(node["class_type"], str):
            return f"node {nid!r}: class_type is {type(node['class_type']).__name__}, not a string"
        if not isinstance(node.get("inputs", {}), dict):
            return f"node {nid!r}: inputs is {type(node.get('inputs')).__name__}, not an object"
    return None
