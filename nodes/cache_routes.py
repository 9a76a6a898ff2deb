"""The cache browser's routes (the sidebar tab of web/seedreuse/cache_browser.js), under /seedreuse/.

GET  /seedreuse/browser                  every cache of the requesting user: allocated size, last use,
                                         slots, segments, takes, result, the run that made it, in use
GET  /seedreuse/budget                   that user's root: allocated bytes, budget, disk free
GET  /seedreuse/caches/{name}/result     the latest take's saved output video (``?take=k``: kept take
                                         k's), streamed from the pinned snapshot (Range: one byte range)
POST /seedreuse/caches/{name}/check      check() of that cache (the CLI's ``check NAME``)
POST /seedreuse/caches/{name}/delete     ``{"confirm": name}``: the store's delete (the safe eviction)

Invariants: every route resolves caches under the requesting user's root only
(users.root_of_request; never host.cache_root() directly), takes cache names (validated by
roots.validate_cache_name) and never paths. The result route serves only a file the committed
manifest lists as a result (``result.mp4`` or a take record's ``result``), read through the
reader's pinned fd: a symlink, a name outside the version or a file of another version is never
opened, and no more than the manifest's byte count is sent. What it serves is what the user saved:
the cache keeps a take's untrimmed result (resumes chain from it), and where Prefix Merge cut the
last segment's surplus past the audio's end, the route makes the same cut (packet copy) into an
unlinked temp file per request (media/take_output.py); the list and the takes report the saved
``output_frames`` beside the cached ``frames``, with the trim's outcome. A delete needs the cache's name as
confirmation and goes through the eviction path (under the writer lock, renamed out of the
namespace, then deleted), so a cache with a live writer or reader is refused with the reason.
Problem paths in answers are relative to the user's root. Filesystem work runs off the event loop.

What this does not guarantee: sizes and last use are measurements of a moving root (a commit or
an eviction on another worker may change them a moment later); the list reads each manifest once,
without a reader lease, so a cache evicted meanwhile shows as gone or unreadable, never mixed.
"""
from __future__ import annotations

import asyncio
import functools
import json

from ..reuse_backend.errors import (CacheBusyError, InvalidRequestError, NoCommittedCacheError, ReuseError,
                                   UnknownUserError)
from ..reuse_backend.media import segment_takes, take_output
from ..reuse_backend import stores
from ..reuse_backend.store import roots, take_index
from . import host, users
from .host import web

log = host.log

CHUNK = 1 << 20                 # bytes per read of a streamed result
MAX_DELETE_BODY = 4096          # {"confirm": name} is tiny
RESULT_TYPE = "video/mp4"       # every result the pack publishes is an MP4 (Prefix Merge)


def _error(e: Exception, status: int = 400):
    if isinstance(e, UnknownUserError):
        status = users.UNKNOWN_USER_STATUS
    body = e.to_dict() if isinstance(e, ReuseError) else {"type": type(e).__name__, "message": str(e)}
    return web.json_response({"error": body}, status=status)


async def _off_loop(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _no_cache(name: str) -> NoCommittedCacheError:
    return NoCommittedCacheError(f"cache '{name}' has no committed version", expected="a committed cache",
                                 actual="none", fix="pick a cache from GET /seedreuse/browser")


# ------------------------------------------------------------------ reading (all off the event loop)

def _segments(m: dict) -> dict | None:
    seg = (m.get("sections") or {}).get("segments")
    if not isinstance(seg, dict):
        return None
    spec = seg.get("spec") if isinstance(seg.get("spec"), dict) else {}
    return {"S": spec.get("S"), "F": spec.get("F"), "M": spec.get("M"), "fps": spec.get("fps"),
            "frames": seg.get("frames"), **take_output.saved(seg), "seed": seg.get("seed"), "take": seg.get("take"),
            "reused_prefix_segments": seg.get("reused_prefix_segments"), "has_audio": seg.get("has_audio")}


def _takes(m: dict) -> list[dict] | None:
    recs = take_index.records(m)
    if recs is None:
        return None
    out = []
    for r in recs:
        s = segment_takes.section_of(m, r)      # the latest take's is sections.segments
        out.append({"take": r["take"], "result": r["result"], "seed": s.get("seed"), "frames": s.get("frames"),
                    **take_output.saved(s),
                    "segments": (s.get("spec") or {}).get("S") if isinstance(s.get("spec"), dict) else None,
                    "source_take": s.get("source_take"), "bytes": m["files"].get(r["result"], {}).get("bytes")})
    return out


def result_of(m: dict, take: int | None = None) -> tuple[str | None, dict]:
    """The manifest-listed result of the latest take (or of kept take ``take``), or None, and that
    take's segment section ({} when the version records none)."""
    recs = take_index.records(m) or []
    if take is not None:
        rec = next((r for r in recs if r["take"] == take), None)
    else:
        rec = recs[0] if recs else {"result": take_index.RESULT, "segments": segment_takes.IN_SECTION}
    if rec is None or rec["result"] not in m["files"]:
        return None, {}
    return rec["result"], segment_takes.section_of(m, rec)


def describe_manifest(m: dict) -> dict:
    files = m["files"]
    res = result_of(m)[0]
    return {"version": m["version"], "created_at": m["created_at"], "run": m["run"],
            "slots": {s: {"file": e["file"], "bytes": files.get(e["file"], {}).get("bytes")}
                      for s, e in sorted(m["slots"].items())},
            "boundaries": len(m["boundaries"]), "segments": _segments(m), "takes": _takes(m),
            "result": {"file": res, "bytes": files[res]["bytes"]} if res else None,
            "files": {f: e["bytes"] for f, e in sorted(files.items())},
            "manifest_bytes": sum(e["bytes"] for e in files.values())}


def describe_cache(store, name: str) -> dict:
    """One row of the browser: never raises for a broken cache (its error is in the row)."""
    row, snap = store.describe(name)
    if snap is None:                            # none yet, evicted or replaced meanwhile, or broken
        return row
    try:
        return row | {"committed": True, **describe_manifest(snap.manifest)}
    finally:
        snap.close()


def budget_status(root) -> dict:
    return stores.at(root).summary()


def browse(root) -> dict:
    store = stores.at(root)
    return {"caches": [describe_cache(store, n) for n in store.names()], "budget": store.summary()}


def run_check(root, name: str) -> dict:
    store = stores.at(root)
    if name not in store.names():
        raise _no_cache(name)
    problems = store.check(name)
    return {"name": name, "ok": not problems,
            "problems": [p.to_dict() | {"path": store.relative(p.path)} for p in problems]}


def run_delete(root, name: str) -> dict:
    freed = stores.at(root).delete(name)
    log.info("seedreuse: cache '%s' deleted from the cache browser", name)
    return {"deleted": name, "freed_bytes": freed}


# ------------------------------------------------------------------ the result stream

def parse_range(header: str | None, size: int) -> tuple[int, int] | None | bool:
    """(start, end inclusive) of a single ``bytes=`` range; None: no (usable) range header, serve
    the whole file; False: unsatisfiable (416)."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[len("bytes="):].strip().partition("-")
    try:
        if first == "":
            n = int(last)
            if n <= 0:
                return False
            return max(0, size - n), size - 1
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start < 0 or start >= size or end < start:
        return False
    return start, min(end, size - 1)


def _take_param(request) -> int | None:
    raw = request.query.get("take")
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or not 0 < int(raw) <= take_index.MAX_TAKES:
        raise InvalidRequestError(f"invalid take: {raw!r}", expected=f"1..{take_index.MAX_TAKES}",
                                  actual=repr(raw), fix="pick a take number from GET /seedreuse/browser")
    return int(raw)


def _open_result(root, name: str, take: int | None):
    """(snapshot with a reader lease, file name, the saved output open for reading, its bytes);
    NoCommittedCacheError when there is none. The saved output is the committed result read
    through the pinned fd, or (the take's output was trimmed at the audio's end) the same cut
    Prefix Merge saved, made from it into an unlinked temp file (take_output.open_saved)."""
    snap = stores.open_cache(root, name).snapshot()   # leased: an eviction waits for the stream to end
    if snap is None:
        raise _no_cache(name)
    try:
        fname, section = result_of(snap.manifest, take)
        if fname is None:
            what = f"take {take}" if take is not None else "result video"
            raise NoCommittedCacheError(f"cache '{name}' has no {what}", expected="a result video in the manifest",
                                        actual=sorted(snap.manifest["files"]) if take is None else "no such take",
                                        fix="run a workflow with Prefix Merge into this cache")
        f = snap.open_file(fname)            # the pinned fd: the committed file, never a reopen by name
        try:
            cut = take_output.open_saved(f, section)
        except BaseException:
            f.close()
            raise
        if cut is None:
            return snap, fname, f, snap.manifest["files"][fname]["bytes"]
        f.close()
        return snap, fname, *cut
    except BaseException:
        snap.close()
        raise


async def stream_result(request, root, name: str, take: int | None):
    snap, fname, f, size = await _off_loop(_open_result, root, name, take)
    try:
        rng = parse_range(request.headers.get("Range"), size)
        headers = {"Content-Type": RESULT_TYPE, "Accept-Ranges": "bytes", "Cache-Control": "no-store",
                   "ETag": f'"{snap.version}-{fname}-{size}"', "X-Content-Type-Options": "nosniff",
                   "Content-Disposition": f'inline; filename="{name}-{fname}"'}
        if rng is False:
            return web.Response(status=416, headers={"Content-Range": f"bytes */{size}"})
        start, end = rng if rng else (0, size - 1)
        if rng:
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = max(0, end - start + 1)
        headers["Content-Length"] = str(length)
        resp = web.StreamResponse(status=206 if rng else 200, headers=headers)
        await resp.prepare(request)
        if request.method == "HEAD":
            return resp
        try:
            f.seek(start)
            left = length
            while left > 0:
                chunk = await _off_loop(f.read, min(CHUNK, left))
                if not chunk:
                    break
                left -= len(chunk)
                await resp.write(chunk)
            await resp.write_eof()
        except ConnectionResetError:         # the player went away (a seek, a closed tab)
            pass
        except OSError as e:                 # headers are sent: the client sees a short body
            log.warning("seedreuse: streaming %s of cache '%s' failed: %s", fname, name, e)
        return resp
    finally:
        f.close()
        await _off_loop(snap.close)


# ------------------------------------------------------------------ routes

def _name(request) -> str:
    return roots.validate_cache_name(request.match_info["name"])


async def _confirmation(request) -> object:
    if request.content_length is not None and request.content_length > MAX_DELETE_BODY:
        raise InvalidRequestError("the request body is too large", expected=f"<= {MAX_DELETE_BODY} bytes",
                                  actual=f"{request.content_length} bytes", fix='send {"confirm": "<name>"}')
    raw = await request.content.read(MAX_DELETE_BODY + 1)
    try:
        body = json.loads(raw) if raw.strip() else {}
    except ValueError:
        body = None
    return body.get("confirm") if isinstance(body, dict) else None


def _answered(what: str):
    """One error mapping for every cache-browser route: a missing cache 404, a busy one 409,
    any other refusal 400 (each as the error's data), an I/O failure 500 (logged)."""
    def wrap(handler):
        @functools.wraps(handler)
        async def route(request):
            try:
                return await handler(request)
            except NoCommittedCacheError as e:
                return _error(e, status=404)
            except CacheBusyError as e:
                return _error(e, status=409)
            except ReuseError as e:
                return _error(e)
            except OSError as e:
                log.exception("seedreuse: cache browser: %s failed", what)
                return _error(e, status=500)
        return route
    return wrap


def register(routes) -> None:
    """Adds the routes; call before the /seedreuse/ catch-all of routes.py."""

    @routes.get("/seedreuse/browser")
    @_answered("the list")
    async def browser(request):
        return web.json_response(await _off_loop(browse, users.root_of_request(request)))

    @routes.get("/seedreuse/budget")
    @_answered("the budget")
    async def budget(request):
        return web.json_response(await _off_loop(budget_status, users.root_of_request(request)))

    @routes.get("/seedreuse/caches/{name}/result")
    @_answered("the result stream")
    async def result(request):
        name, take = _name(request), _take_param(request)
        return await stream_result(request, users.root_of_request(request), name, take)

    @routes.post("/seedreuse/caches/{name}/check")
    @_answered("check")
    async def check(request):
        name = _name(request)
        return web.json_response(await _off_loop(run_check, users.root_of_request(request), name))

    @routes.post("/seedreuse/caches/{name}/delete")
    @_answered("delete")
    async def delete(request):
        name = _name(request)
        confirm = await _confirmation(request)
        if confirm != name:
            raise InvalidRequestError(f"deleting cache '{name}' needs its name as confirmation",
                                      expected=f'{{"confirm": "{name}"}}', actual=repr(confirm),
                                      fix="confirm the delete with the cache's exact name")
        return web.json_response(await _off_loop(run_delete, users.root_of_request(request), name))
