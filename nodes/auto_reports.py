"""Automatic mode's arrival reports, kept by the pack for prompts whose ``extra_data`` the
queuing path does not keep.

ComfyUI's POST /prompt hands the on_prompt handlers the whole body and queues the
``extra_data`` they return, so automatic mode's report (``extra_data.seedreuse_auto_report``)
reaches the prompt's history. A path that queues internally may call the handlers with
``{"prompt": ...}`` alone and build its own ``extra_data`` (ComfyUI-Distributed 1.4.4 does, for
the master's own part and for every worker part it dispatches over its worker websocket:
``utils/async_helpers.py`` ``queue_prompt_payload``); the handler's report is then dropped with
the body. So the handler also keeps each report here, by a digest of the instrumented prompt
(what the executor later runs) and by its automatic cache's name, and the executor side
(auto_mode.report_on_success, the automatic Session's history output) recalls it.

Bounded: the last ``KEEP`` reports of this process. Not guaranteed: a path that changes the
prompt after the handlers ran (another pack's handler after ours) is matched by the cache name
alone; two prompts with the same encoder inputs but other differences (which share the
automatic cache by design, workflow/auto.py) may then get each other's ``not_wrapped`` list.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict

KEEP = 64
DROPPED = ("the queuing path did not keep extra_data (an internal queue, e.g. ComfyUI-Distributed); "
           "the pack kept the report")
_lock = threading.Lock()
_by_prompt: "OrderedDict[str, dict]" = OrderedDict()
_by_cache: "OrderedDict[str, dict]" = OrderedDict()


def _digest(prompt) -> str | None:
    try:
        body = json.dumps(prompt, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(body.encode()).hexdigest()


def _put(table: OrderedDict, key: str, report: dict) -> None:
    table[key] = report
    table.move_to_end(key)
    while len(table) > KEEP:
        table.popitem(last=False)


def remember(prompt, report: dict) -> None:
    """Keep the arrival report of an instrumented prompt."""
    digest = _digest(prompt)
    with _lock:
        if digest is not None:
            _put(_by_prompt, digest, report)
        if report.get("cache"):
            _put(_by_cache, report["cache"], report)


def automatic_cache(prompt) -> str | None:
    """The cache name of the prompt's automatic Session (None: automatic mode did not add one)."""
    if not isinstance(prompt, dict):
        return None
    for node in prompt.values():
        ins = node.get("inputs") if isinstance(node, dict) else None
        if isinstance(ins, dict) and node.get("class_type") == "SeedReuseSession" and ins.get("automatic") is True:
            name = ins.get("cache_name")
            return name if isinstance(name, str) else None
    return None


def recall(prompt) -> dict | None:
    """The kept arrival report of this (instrumented) prompt; None for a prompt without an
    automatic Session or one this process did not instrument."""
    name = automatic_cache(prompt)
    if name is None:
        return None
    digest = _digest(prompt)
    with _lock:
        got = _by_prompt.get(digest) if digest is not None else None
        if got is None:
            got = _by_cache.get(name)
    return got
