"""Automatic mode (``SEEDREUSE_AUTO``): the decisions about a queued prompt, host-free.

    on = enabled(setting_from_env(), switch_of(extra_data))   # InvalidRequestError: a 400
    new, report = instrument_for_arrival(prompt, object_info)  # AutoNotApplied: run it unchanged
    name = auto_cache_name({slot: key digest, ...})           # after the keys are computed
    report.update(outcomes(report, {wrapper id: its payload}))  # once the prompt succeeded

The server setting turns it on for every prompt; the per-request switch
``extra_data.seedreuse_auto`` (``true`` / ``false``) overrides it for one prompt, both ways;
anything else there is refused before the prompt is queued. A prompt that holds any SeedReuse
node (a Session, a wrapper, a segment loop) is never changed: whoever placed those nodes
decided. The prompt is instrumented by the same ``instrument`` as the canvas action; its
automatic cache is named from the digest of the wrapped slots' reuse keys (what the encoder
outputs were made from: node types, widget values, file and model content identities), so the
same encoder inputs meet the same cache from any client, worker and host, and prompts whose
encoder inputs differ never share a cache.

What this does not guarantee: two prompts with the same encoder inputs and different sampling
share one cache and one writer lock (each commit replaces the last; the slots match both).
"""
from __future__ import annotations

import hashlib
import json

from .. import settings
from ..errors import InvalidRequestError
from . import api_format, instrument
from . import node_types as nt

ENV = settings.AUTO
SWITCH = "seedreuse_auto"          # extra_data key of the per-request switch
REPORT = "seedreuse_auto_report"   # extra_data key the server writes (it lands in the history)
MESSAGE = "seedreuse.auto_report"  # websocket message to the client that queued the prompt
NAME_PREFIX = "auto-"
PLACEHOLDER = "auto-pending"       # the Session's name until the keys are known
ACCEPTED = "true or false (JSON booleans), or leave it out to follow the server setting"


class AutoNotApplied(Exception):
    """The prompt runs unchanged; ``str(e)`` says why. ``quiet``: nothing went wrong (the prompt
    has SeedReuse nodes, or nothing to wrap); otherwise it is a warning (log and history)."""

    def __init__(self, why: str, quiet: bool = False):
        super().__init__(why)
        self.quiet = quiet


def setting_from_env() -> bool:
    """``SEEDREUSE_AUTO`` (settings.py): on for 1/true/yes/on; an unknown value is an
    InvalidRequestError (the startup log names it, and the setting stays off)."""
    return settings.auto()


def switch_of(extra_data) -> bool | None:
    """The per-request switch of a prompt body's ``extra_data``: True, False, or None (absent or
    null: the server setting decides). Anything else is refused."""
    if not isinstance(extra_data, dict) or extra_data.get(SWITCH) is None:
        return None
    v = extra_data[SWITCH]
    if isinstance(v, bool):
        return v
    raise InvalidRequestError(f"extra_data.{SWITCH} must be true or false", expected=ACCEPTED,
                              actual=json.dumps(v)[:200] if _jsonable(v) else type(v).__name__,
                              fix=f"send \"extra_data\": {{\"{SWITCH}\": true}} (or false), or leave it out")


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def enabled(setting: bool, switch: bool | None) -> bool:
    return setting if switch is None else switch


def pack_nodes(prompt: dict) -> list:
    """Ids of the prompt's SeedReuse nodes (any of them: the prompt is left as it is)."""
    return sorted(str(k) for k, n in prompt.items() if isinstance(n, dict) and nt.is_pack(n.get("class_type")))


def instrument_for_arrival(prompt, object_info: dict | None = None) -> tuple[dict, dict]:
    """(instrumented copy, report) of an API prompt without SeedReuse nodes; AutoNotApplied when
    there is nothing to wrap or the instrumenter refuses the prompt."""
    if not api_format.is_api_prompt(prompt):
        raise AutoNotApplied("the prompt is not an API-format prompt ({id: {class_type, inputs}})")
    own = pack_nodes(prompt)
    if own:
        raise AutoNotApplied(f"the prompt already has SeedReuse nodes ({', '.join(own[:5])}): left as it is",
                             quiet=True)
    try:
        new, report = instrument(prompt, cache_name=PLACEHOLDER, object_info=object_info)
    except InvalidRequestError as e:
        raise AutoNotApplied(f"the instrumenter cannot handle this prompt: {e.message} (expected {e.expected}, "
                             f"got {e.actual})") from None
    if not report["changed"]:
        raise AutoNotApplied("no seed-independent encoder output to wrap", quiet=True)
    new[report["session"]["node"]]["inputs"]["automatic"] = True
    return new, report


def auto_cache_name(slot_digests: dict) -> str:
    """The automatic cache's name: a digest of every wrapped slot's name and reuse key."""
    body = json.dumps(sorted(slot_digests.items()), separators=(",", ":"))
    return NAME_PREFIX + hashlib.sha256(body.encode()).hexdigest()[:32]


def set_cache_name(prompt: dict, session_id: str, name: str) -> None:
    prompt[session_id]["inputs"]["cache_name"] = name


NOT_RUN = "not run"


def outcomes(report: dict, results: dict) -> dict:
    """What each wrapped output of an applied report did in a prompt that succeeded, from its
    Encode-or-Reuse node's payload (``results``: wrapper node id -> payload, nodes/encode_nodes.py):
    ``outputs`` (per wrapped output: slot, node, producer class, action reused / encoded / not
    run, the seconds), the counts and the time saved in total. "not run": the wrapper did not
    execute in this prompt (ComfyUI's in-memory cache served its output, or nothing downstream
    needed it), so nothing was read from or written to the cache for it."""
    outs = []
    for w in report.get("wrapped") or []:
        p = results.get(w["node"]) or {}
        action = p.get("action") or NOT_RUN
        o = {"slot": w["slot"], "node": w["node"], "producer": (w.get("producer") or {}).get("class_type"),
             "action": action}
        for k in ("saved_seconds", "load_seconds", "encode_seconds"):
            if isinstance(p.get(k), (int, float)):
                o[k] = round(float(p[k]), 4)
        outs.append(o)
    count = {a: sum(o["action"] == a for o in outs) for a in ("reused", "encoded", NOT_RUN)}
    return {"outputs": outs, "reused": count["reused"], "encoded": count["encoded"], "not_run": count[NOT_RUN],
            "saved_seconds": round(sum(o.get("saved_seconds", 0.0) for o in outs), 4)}
