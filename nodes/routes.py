"""HTTP routes of the pack (all under /seedreuse/). They take cache names, never paths.

GET  /seedreuse/caches                 names of committed caches under the root
GET  /seedreuse/caches/{name}          manifest summary (key fields, artifacts, sizes, result, run)
POST /seedreuse/check                  dry run: {"prompt": <API prompt>, "extra_data": optional} -> per-node hit/miss
                                       and why, for the prompt as automatic mode would queue it (auto_mode.py)
POST /seedreuse/instrument             {"workflow": <UI or API>} -> the workflow with reuse nodes + a report (instrument_route.py)

Every refusal is a JSON body {"error": {...}} with a 4xx status, also for paths under
/seedreuse/ that name no route (e.g. an empty cache name or a normalized "../"). The dry run
is bounded (see nodes/dry_run.py): 413 for a request beyond a limit (body size, node count,
nesting depth, key size), 400 for an invalid one (not JSON, not an API prompt, a cycle, a
literal outside its schema's range), each before any expensive work.

The pack also checks its own numeric inputs in POST /prompt (``refuse_inexact_numbers``).
"""
from __future__ import annotations

import asyncio
import json

from ..reuse_backend import stores
from ..reuse_backend.store import roots
from ..reuse_backend.errors import InvalidRequestError, ReuseError, UnknownUserError
from ..reuse_backend.keys.graph_limits import is_link
from ..reuse_backend.keys.literal_numbers import number_problem
from ..reuse_backend.media import segment_takes, take_output
from . import host
from .host import web
from .dry_run import MAX_BODY_BYTES, PREFIX, RequestTooLargeError, dry_run
from . import auto_mode, cache_routes, instrument_route, users
from .request_body import read_capped

log = host.log


def _error(e: Exception, status: int = 400):
    if isinstance(e, UnknownUserError):
        status = users.UNKNOWN_USER_STATUS
    body = e.to_dict() if isinstance(e, ReuseError) else {"type": type(e).__name__, "message": str(e)}
    return web.json_response({"error": body}, status=status)


def _take_summary(m: dict, t: dict) -> dict:
    sec = segment_takes.section_of(m, t)        # the latest take's section is sections.segments
    return {"take": t.get("take"), "result": t.get("result"),
            "boundaries": sorted(int(i) for i in (t.get("boundaries") or {})),
            **{k: sec.get(k) for k in ("seed", "frames", "source_take")}, **take_output.saved(sec),
            "segments": (sec.get("spec") or {}).get("S")}


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
        seg = {k: v for k, v in seg.items() if k not in ("key", "validity")} | {
            "key": (seg.get("key") or {}).get("digest"),
            "validity": ((seg.get("validity") or {}).get("static") or {}).get("digest")}
        sections["segments"] = seg
    takes = (sections.get("takes") or {}).get("takes")
    if isinstance(takes, list):    # the kept takes, newest first (their keys: GET the manifest via the CLI)
        sections["takes"] = [_take_summary(m, t) for t in takes if isinstance(t, dict)]
    return {"name": m["name"], "version": m["version"], "created_at": m["created_at"], "run": m["run"],
            "slots": slots, "boundaries": sorted(int(i) for i in (m.get("boundaries") or {})),
            "sections": sections, "files": files, "total_bytes": sum(f["bytes"] for f in files.values())}


def committed_names(root) -> list[str]:
    """GET /seedreuse/caches: the committed caches of ``root`` (a folder or a bucket location)."""
    return stores.at(root).committed()


def cache_summary(root, name: str) -> dict:
    """GET /seedreuse/caches/{name}: the summary of the committed version, or committed false."""
    snap = stores.open_cache(root, name).snapshot()
    if snap is None:
        return {"name": name, "committed": False}
    try:
        return {"committed": True, **summarize(snap)}
    finally:
        snap.close()


class RefusedNumber(str):
    """Stands in POST /prompt for a numeric literal of the pack's nodes that is not exact (see
    ``refuse_inexact_numbers``): ComfyUI's validation converts INT/FLOAT literals with
    ``int(v)`` / ``float(v)``, which raises here with the reason, so ComfyUI refuses the prompt
    (HTTP 400, node_errors: "Failed to convert an input value to a INT value", details
    "<input>, <value>, <reason>"). It is a str so the error's received_value stays JSON."""

    def __new__(cls, shown: str, reason: str):
        s = super().__new__(cls, shown)
        s.reason = reason
        return s

    def __int__(self):
        raise ValueError(self.reason)

    __float__ = __int__


# class type -> its INT/FLOAT input specs, for the pack's registered node classes only (their
# schemas are fixed once ComfyUI has loaded them; asking again costs a V3 schema build per class
# on every POST /prompt). Unknown class types are never remembered: a prompt naming thousands of
# made-up "SeedReuse..." types cannot grow it.
_NUMBER_SPECS: dict[str, dict] = {}


def _number_specs(ct: str) -> dict:
    got = _NUMBER_SPECS.get(ct)
    if got is None:
        schemas = host.NodeClasses()
        got = {k: v for k, v in schemas.specs(ct).items()
               if isinstance(v, (list, tuple)) and v and v[0] in ("INT", "FLOAT")}
        if schemas.cls(ct) is None:
            return got
        _NUMBER_SPECS[ct] = got
    return got


def refuse_inexact_numbers(json_data):
    """on_prompt handler: runs in POST /prompt before ComfyUI validates the prompt.

    ComfyUI's validation converts an INT literal with ``int(v)`` before any validate function
    sees it (1.5 -> 1, true -> 1, "2" -> 2), so a node's own validate_inputs cannot tell 1.5
    from 1. Here the raw JSON value is still there: every INT/FLOAT literal of the pack's nodes
    that is not exact (literal_numbers.number_problem) is replaced by a RefusedNumber, which fails
    ComfyUI's conversion with the reason (input, value, allowed range, fix). Ranges are checked
    where ComfyUI checks them (the schema's min/max), except for the inputs a node's own
    validate_inputs takes: ComfyUI files that function's refusal under every input it takes (the
    first, cache_name, is the one the UI marks), so their schema range is refused here, under
    the input itself (from_take of -1 or 1e30, reuse_prefix_segments of -2)."""
    try:
        prompt = json_data.get("prompt") if isinstance(json_data, dict) else None
        if not isinstance(prompt, dict):
            return json_data
        schemas = host.NodeClasses()
        for node in prompt.values():
            ct = node.get("class_type") if isinstance(node, dict) else None
            inputs = node.get("inputs") if isinstance(ct, str) and ct.startswith(PREFIX) else None
            if not isinstance(inputs, dict):
                continue
            own, any_kw = schemas.self_validated(ct)
            for name, spec in _number_specs(ct).items():    # INT / FLOAT specs only
                kind = spec[0]
                if name not in inputs:
                    continue
                v = inputs[name]
                if isinstance(v, dict) and "__value__" in v:
                    v = v["__value__"]
                extra = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
                e = None if is_link(v) else number_problem(name, kind, v)
                if e is None and not is_link(v) and (name in own or any_kw):
                    e = number_problem(name, kind, v, minimum=extra.get("min"), maximum=extra.get("max"))
                if e is None:
                    continue
                e = number_problem(name, kind, v, minimum=extra.get("min"), maximum=extra.get("max"))
                try:
                    shown = json.dumps(v)
                except (TypeError, ValueError):
                    shown = repr(v)
                inputs[name] = RefusedNumber(shown, f"{e.message}; fix: {e.fix}")
    except Exception as e:  # never break POST /prompt: ComfyUI's own validation still runs
        log.warning("seedreuse: numeric input check skipped: %s", e)
    return json_data


async def _read_body(request) -> bytes:
    """The request body, at most MAX_BODY_BYTES (RequestTooLargeError beyond: nothing more is read)."""
    def too_large(actual):
        return RequestTooLargeError(f"the request body exceeds the dry run's limit of {MAX_BODY_BYTES} bytes",
                                    expected=f"<= {MAX_BODY_BYTES} bytes", actual=actual,
                                    fix="check a smaller workflow")
    return await read_capped(request, MAX_BODY_BYTES, too_large)


def check_body(raw: bytes, root: str | None = None) -> dict:
    """Parse a /seedreuse/check body and dry-run its prompt against the caches under ``root``
    (ReuseError for a refusal)."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise InvalidRequestError(f"body is not JSON: {str(e)[:200]}", expected='{"prompt": <API-format prompt>}',
                                  actual=f"{len(raw)} bytes", fix="send the API-format prompt as JSON") from None
    prompt = body.get("prompt") if isinstance(body, dict) else None
    if not isinstance(prompt, dict):
        raise InvalidRequestError('expected {"prompt": <API-format prompt>}',
                                  expected='{"prompt": {node id: {class_type, inputs}}}',
                                  actual=type(prompt if isinstance(body, dict) else body).__name__,
                                  fix="send the API-format prompt (File > Export (API) on the canvas)")
    # the prompt as POST /prompt would queue it: automatic mode by the setting and the same switch
    prompt, root, auto_report = auto_mode.for_dry_run(body, root or host.cache_root())
    extra = body.get("extra_data") if isinstance(body.get("extra_data"), dict) else {}
    answer = dry_run(prompt, root, extra_pnginfo=extra.get("extra_pnginfo"))
    if auto_report is not None:
        answer["auto"] = auto_report
    return answer


def register() -> None:
    routes = host.routes()
    try:
        auto_mode.register()     # before the numeric check: it checks the nodes automatic mode adds too
    except Exception as e:  # noqa: BLE001 - prompts then run as they arrive
        log.error("seedreuse: automatic mode not installed: %s", e)
    try:
        host.add_on_prompt_handler(refuse_inexact_numbers)
    except Exception as e:  # a host without on_prompt handlers: the nodes' own checks remain
        log.warning("seedreuse: POST /prompt numeric check not installed: %s", e)

    @routes.get("/seedreuse/caches")
    async def list_caches(request):
        # committed caches only (a folder: never .tmp / .old / .lock, symlinks or foreign files;
        # a bucket: never a cleared one); with --multi-user only the requesting user's namespace
        # (users.py). The store (stores.at) decides; its I/O runs off the event loop.
        try:
            root = users.root_of_request(request)
            names = await asyncio.get_running_loop().run_in_executor(None, committed_names, root)
        except ReuseError as e:
            return _error(e)
        return web.json_response({"caches": names})

    @routes.get("/seedreuse/caches/{name}")
    async def get_cache(request):
        try:
            name = roots.validate_cache_name(request.match_info["name"])
            root = users.root_of_request(request)
            answer = await asyncio.get_running_loop().run_in_executor(None, cache_summary, root, name)
        except ReuseError as e:
            return _error(e)
        return web.json_response(answer)

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
            root = users.root_of_request(request)      # the requesting user's caches only
            raw = await _read_body(request)
            # off the event loop: parsing, the bounds, hashing input files, probing the previous video
            answer = await asyncio.get_running_loop().run_in_executor(None, check_body, raw, root)
        except RequestTooLargeError as e:
            return _error(e, status=413)
        except ReuseError as e:
            return _error(e)
        except Exception as e:
            log.exception("seedreuse: dry run failed")
            return _error(e, status=500)
        return web.json_response(answer)

    instrument_route.register(routes)   # POST /seedreuse/instrument
    cache_routes.register(routes)       # the cache browser: /seedreuse/browser, budget, result, check, delete

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
