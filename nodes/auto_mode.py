"""Automatic mode: every queued prompt made reusable on arrival (``SEEDREUSE_AUTO=1``).

POST /prompt, before ComfyUI validates the prompt:

1. ``refuse_bad_switch`` (a request middleware): a body whose ``extra_data.seedreuse_auto`` is
   neither true, false nor absent/null is answered 400 with the accepted values; nothing is
   queued;
2. ``instrument_on_arrival`` (an on_prompt handler): when the setting or the switch says on and
   the prompt has no SeedReuse node, the prompt (API format) is instrumented as the canvas
   action does it (reuse_backend/workflow/auto.py), its Session marked ``automatic`` (the cache
   lives in the namespace's ``.auto/`` folder, store/namespaces.py) and named from the digest of
   the wrapped slots' reuse keys, computed as the dry run computes them. The user's workflow
   (``extra_data.extra_pnginfo``) is never touched. What happened goes into
   ``extra_data.seedreuse_auto_report`` (so into the prompt's history): applied or not and why,
   the cache, the wrapped slots (slot -> wrapper node, producer) and what was not wrapped. Per
   wrapped output, the wrapper's history output ``seedreuse`` says reused or encoded and the
   time saved (nodes/encode_nodes.py), as its ``seedreuse.slot`` websocket message does.
3. ``report_on_success`` (transactions.ON_SUCCESS): when the prompt succeeded, the report gains
   what each wrapped output did (``outputs``: reused / encoded / not run, the seconds; the
   counts; ``saved_seconds`` in total; workflow/auto.outcomes). The same report goes to the
   client that queued the prompt as the websocket message ``seedreuse.auto_report`` (to no one
   when the prompt was queued without a client id) and into the ``execution_success`` message's
   data under ``seedreuse_auto_report``; the canvas shows it as a toast (web/seedreuse/auto_report.js).
   A prompt automatic mode left unchanged with a warning sends its report (the warning) the same way.

Invariant: the setting never fails a prompt. Anything the instrumenter or the key computation
cannot handle leaves the prompt exactly as it arrived, with one warning in the log and the
report's ``warning`` (the history). Paths: POST /prompt, and any internal path that calls the
server's on_prompt handlers before it queues (ComfyUI-Distributed's master part and its
websocket-dispatched worker parts); such a path may call them with ``{"prompt"}`` alone and drop
the ``extra_data`` they return, so the arrival report is also kept by the pack (auto_reports.py)
and recalled when the prompt runs: the automatic Session's history output holds it, and the
outcomes reach the history's ``extra_data`` as below (marked ``extra_data_dropped``). Not
guaranteed: a prompt put on the queue without the on_prompt handlers is not seen; the outcomes reach the
history by replacing the report in the running prompt's queue entry, the copy the host moves to
the history (host.set_running_extra_data; where that entry is not found, the history keeps the
arrival report and only the websocket message and execution_success carry the outcomes:
tests/test_auto_mode.py checks the history on both hosts); a failed or interrupted prompt's
report keeps its arrival form.
"""
from __future__ import annotations

import time

from ..reuse_backend.errors import InvalidRequestError, ReuseError
from ..reuse_backend.store import budget as budgets, namespaces
from ..reuse_backend.workflow import auto
from . import auto_reports, host, transactions
from .host import web
from .dry_run import check_request, fill_change_tokens
from .graph_view import SLOT_IO_TYPES, GraphView, slot_key
from .instrument_route import host_info

log = host.log
_PROMPT_PATHS = ("/prompt", "/api/prompt")
_SETTING: list = []     # [bool], read once at registration (the startup log says which)


def setting() -> bool:
    if not _SETTING:
        try:
            _SETTING.append(auto.setting_from_env())
        except InvalidRequestError as e:
            log.error("seedreuse: %s (expected %s); automatic mode stays off", e.message, e.expected)
            _SETTING.append(False)
    return _SETTING[0]


def _bad_switch(e: InvalidRequestError):
    body = e.to_dict()
    # the shape of ComfyUI's own POST /prompt refusals (error.type/message/details), plus ours
    body.update(type="seedreuse_invalid_switch", details=f"{e.actual}; fix: {e.fix}", extra_info={})
    return web.json_response({"error": body, "node_errors": {}}, status=400)


@web.middleware
async def refuse_bad_switch(request, handler):
    if request.method == "POST" and request.path in _PROMPT_PATHS:
        try:
            body = await request.json()       # aiohttp keeps the body: the handler reads it again
        except Exception:                     # not JSON: ComfyUI answers it as it always does
            body = None
        if isinstance(body, dict):
            try:
                auto.switch_of(body.get("extra_data"))
            except InvalidRequestError as e:
                return _bad_switch(e)
    return await handler(request)


def instrumented(prompt: dict) -> tuple[dict, dict]:
    """(new prompt, report) for a prompt automatic mode applies to; AutoNotApplied to leave it."""
    t0 = time.perf_counter()
    new, rep = auto.instrument_for_arrival(prompt, object_info=_object_info(prompt))
    sid = rep["session"]["node"]
    try:
        _, keyed = check_request(new)
        view = GraphView(fill_change_tokens(new, keyed))
        digests = {}
        for w in rep["wrapped"]:
            io_type = SLOT_IO_TYPES.get(w["variant"], "*")
            digests[w["slot"]] = slot_key(view, w["node"], io_type).digest
    except ReuseError as e:
        raise auto.AutoNotApplied(f"the reuse keys of this prompt cannot be computed: {e.message} "
                                  f"(expected {e.expected}, got {e.actual})") from None
    name = auto.auto_cache_name(digests)
    auto.set_cache_name(new, sid, name)
    report = {"applied": True, "cache": name, "namespace": namespaces.AUTO_DIR, "session": sid,
              "wrapped": [{"slot": w["slot"], "node": w["node"], "type": w["type"],
                           "producer": {k: w["producer"][k] for k in ("node", "class_type", "title")}}
                          for w in rep["wrapped"]],
              "not_wrapped": rep["not_wrapped"], "instrument_ms": round((time.perf_counter() - t0) * 1000, 2)}
    return new, report


_INFO: dict = {}


def _object_info(prompt: dict) -> dict:
    """The host's types of the prompt's classes (instrument_route.host_info), remembered per class:
    registered classes do not change while the server runs; an unknown class is not remembered."""
    types = {n["class_type"] for n in prompt.values()}
    missing = types - set(_INFO)
    if missing:
        got = host_info(missing)
        if len(_INFO) < 4096:
            _INFO.update(got)
    return {t: _INFO[t] for t in types if t in _INFO}


def instrument_on_arrival(json_data):
    """on_prompt handler (see the module doc); returns the body, changed or not."""
    try:
        if not isinstance(json_data, dict):
            return json_data
        extra = json_data.get("extra_data")
        try:
            switch = auto.switch_of(extra)
        except InvalidRequestError:
            return json_data                  # refused by the middleware already (400)
        if not auto.enabled(setting(), switch):
            return json_data
        if not isinstance(extra, dict):
            extra = json_data["extra_data"] = {}
        prompt = json_data.get("prompt")
        try:
            new, report = instrumented(prompt)
        except auto.AutoNotApplied as e:
            report = {"applied": False, "reason": str(e)}
            if not e.quiet:
                report["warning"] = f"SeedReuse automatic mode left this prompt unchanged: {e}"
                log.warning("seedreuse: automatic mode left a prompt unchanged: %s", e)
            extra[auto.REPORT] = report
            return json_data
        json_data["prompt"] = new
        extra[auto.REPORT] = report
        auto_reports.remember(new, report)     # for paths that drop this extra_data (auto_reports.py)
    except Exception as e:  # noqa: BLE001 - Invariant: the setting never fails a prompt
        log.warning("seedreuse: automatic mode left a prompt unchanged: %s: %s", type(e).__name__, e)
        if isinstance(json_data, dict) and isinstance(json_data.get("extra_data"), dict):
            json_data["extra_data"][auto.REPORT] = {
                "applied": False, "warning": f"SeedReuse automatic mode left this prompt unchanged: {e}"}
    return json_data


def report_on_success(ctx) -> dict | None:
    """ON_SUCCESS hook (see the module doc): the report with the outcomes, to the queuing client
    and into the execution_success data; None for a prompt without a report (mode off) or one
    left unchanged quietly (it had SeedReuse nodes, or nothing to wrap)."""
    report = ctx.extra.get(auto.REPORT)
    if not isinstance(report, dict):
        kept = auto_reports.recall(ctx.prompt)     # queued by a path that dropped extra_data
        if kept is not None:
            report = ctx.extra[auto.REPORT] = {**kept, "extra_data_dropped": auto_reports.DROPPED}
    if not isinstance(report, dict) or not (report.get("applied") or report.get("warning")):
        return None
    if report.get("applied"):
        report = {**report, **auto.outcomes(report, ctx.results)}
        if not host.set_running_extra_data(ctx.prompt_id, auto.REPORT, report):
            log.warning("seedreuse: the history of prompt %s keeps automatic mode's arrival report (no running "
                        "queue entry found); the websocket message and execution_success carry the outcomes",
                        ctx.prompt_id)
    host.send_to_client(auto.MESSAGE, {"prompt_id": ctx.prompt_id, **report}, ctx.extra.get("client_id"))
    return {auto.REPORT: report}


def for_dry_run(body: dict, root: str) -> tuple[dict, str, dict | None]:
    """(prompt, cache root, report) the dry run answers for: the prompt as it would be queued with
    the same setting and switch (InvalidRequestError for a bad switch), under the automatic
    namespace when its Session is automatic."""
    prompt = body.get("prompt")
    on = auto.enabled(setting(), auto.switch_of(body.get("extra_data")))
    report = None
    if on:
        try:
            prompt, report = instrumented(prompt)
        except auto.AutoNotApplied as e:
            report = {"applied": False, "reason": str(e)}
    automatic = isinstance(prompt, dict) and any(
        isinstance(n, dict) and n.get("class_type") == "SeedReuseSession"
        and (n.get("inputs") or {}).get("automatic") is True for n in prompt.values())
    return prompt, (str(namespaces.auto_root(root, create=False)) if automatic else root), report


def register() -> None:
    """The middleware, the on_prompt handler and the startup line saying what is on."""
    if not host.add_middleware(refuse_bad_switch):
        log.error("seedreuse: extra_data.%s is not checked in POST /prompt (the app started already)", auto.SWITCH)
    host.add_on_prompt_handler(instrument_on_arrival)
    transactions.register_on_success(report_on_success)
    budget, source = budgets.auto_budget_source()
    state = "on: every queued prompt without a SeedReuse node is made reusable" if setting() else \
        f"off (per prompt: extra_data.{auto.SWITCH} = true)"
    log.info("seedreuse: automatic mode (%s) %s; automatic caches in <namespace>/%s, budget %d bytes (%s)",
             auto.ENV, state, namespaces.AUTO_DIR, budget, source)
