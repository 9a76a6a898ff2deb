"""SeedReuse Session: names the cache and carries the request's reuse controls."""
from __future__ import annotations

from dataclasses import dataclass, replace


from ..reuse_backend.store import namespaces, roots
from ..reuse_backend.errors import InvalidRequestError, ReuseError
from ..reuse_backend.keys.literal_numbers import number_problem
from ..reuse_backend.keys.slots import MODES
from ..reuse_backend.media.segment_takes import DEFAULT_KEEP, keep_takes
from . import auto_reports, host, transactions, users
from .host import io

SessionType = io.Custom("SEEDREUSE_SESSION")
MAX_PREFIX_SEGMENTS = 100000
LONGEST_VALID = -1
MAX_TAKE_NUMBER = 1_000_000_000
PREFIX_FIX = (f"set reuse_prefix_segments to a whole number from -1 to {MAX_PREFIX_SEGMENTS}: 0 regenerates "
              "every segment, N keeps the first N segments of the previous result (N < the segment count), "
              "-1 keeps as many as are still valid")


def prefix_segments_problem(value) -> InvalidRequestError | None:
    """Why ``value`` is not a valid reuse_prefix_segments (an exact integer -1..MAX), or None."""
    return number_problem("reuse_prefix_segments", "INT", value, minimum=LONGEST_VALID,
                          maximum=MAX_PREFIX_SEGMENTS, fix=PREFIX_FIX)


def _refused(value) -> bool:
    """A RefusedNumber (routes.refuse_inexact_numbers): POST /prompt filed it under its own input
    already; refusing it again here would file it under every input validate_inputs takes."""
    return isinstance(value, str) and hasattr(value, "reason")


def take_problem(name: str, value, minimum: int, maximum: int) -> InvalidRequestError | None:
    return number_problem(name, "INT", value, minimum=minimum, maximum=maximum,
                          fix=f"set {name} to a whole number from {minimum} to {maximum}")


AUTOMATIC_INPUT = "automatic"
AUTO_REPORT_OUTPUT = "seedreuse_auto_report"   # the automatic Session's history output (arrival report)


def is_automatic(prompt, node_id) -> bool:
    """True for the Session automatic mode added (nodes/auto_mode.py): its node in the queued
    prompt carries ``automatic: true``, an input the schema does not declare, so ComfyUI passes
    it to no function but keeps it in the prompt (and in the node's in-memory cache key)."""
    node = prompt.get(str(node_id)) if isinstance(prompt, dict) else None
    inputs = node.get("inputs") if isinstance(node, dict) else None
    return isinstance(inputs, dict) and inputs.get(AUTOMATIC_INPUT) is True


@dataclass(frozen=True)
class Session:
    root: str
    name: str
    mode: str
    prefix_segments: int           # N; -1: the longest still-valid prefix (segment_plan.longest_prefix)
    from_take: int = 0             # 0: the latest take; k: the kept take numbered k
    keep_takes: int = DEFAULT_KEEP  # K: successful takes the cache keeps (root setting SEEDREUSE_KEEP_TAKES)


class SeedReuseSession(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseSession",
            display_name="SeedReuse Session",
            category="SeedReuse",
            description="Names the shared reuse cache and sets this request's reuse controls; "
                        "one queued prompt is one transaction on that cache.",
            inputs=[
                io.String.Input("cache_name", default="default",
                                tooltip="Name of the cache under the server's cache root (letters, digits, _ and -). "
                                        "Use one cache per model/configuration and per serial creative session."),
                io.Combo.Input("reuse", options=list(MODES), default="auto",
                               tooltip="off: normal request (still refreshes the cache on success). "
                                       "auto: reuse when compatible, else encode and replace. "
                                       "require: reuse or fail before any sampling, naming what changed."),
                io.Int.Input("reuse_prefix_segments", default=0, min=LONGEST_VALID, max=MAX_PREFIX_SEGMENTS,
                             tooltip="Segment Reuse: keep the first N segments of the previous successful video "
                                     "and generate from segment N. 0 = regenerate every segment; -1 = keep as many "
                                     "as are still valid for this graph (decided before any sampling)."),
                # a socket (no widget), so saved workflows keep their widget layout; API clients pass it
                io.Int.Input("from_take", default=0, min=0, max=MAX_TAKE_NUMBER, optional=True, force_input=True,
                             tooltip="Segment Reuse: the kept take to resume from. 0 (or unconnected) = the latest "
                                     "successful take; k = take number k (the dry run lists the kept takes; the "
                                     "cache keeps the last SEEDREUSE_KEEP_TAKES, default 3)."),
            ],
            outputs=[SessionType.Output("session", display_name="session", tooltip="Connect to every SeedReuse node of this workflow.")],
            # automatic mode marks the Session it adds with an input the schema does not declare
            # (``automatic``: true, see is_automatic), so no saved workflow's layout changes
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
        )

    @classmethod
    def fingerprint_inputs(cls, **kw):
        # ComfyUI's in-memory cache keys a node by its inputs and by its ancestors' keys, so
        # what this returns is part of the key of every node downstream of the Session:
        # - the user: the Session's output holds the user's namespace, or a Session executed
        #   for one user would be served to another from memory (tests/test_multi_user.py);
        # - the transaction epoch: after a transaction ended in this process, every reuse node
        #   runs again, so a prompt that runs a transaction sees each node stage or carry its
        #   slot; between all-hit runs ComfyUI may serve them from memory (the committed slot is
        #   still current). Every Encode-or-Reuse node takes the Session, so this one call per
        #   prompt stands for a fingerprint per reuse node: on the I2V benchmark graph, six such
        #   fingerprints made ComfyUI's set_prompt 11.5 ms, this one 7.8 ms (medians,
        #   docs/BENCHMARKS.md 3a).
        # - host.LOCAL_ONLY (0.33+): no external cache provider serves or receives the Session
        #   or any node downstream of it (nodes/cache_providers.py); the in-memory cache still
        #   matches, so the above holds as it did.
        return host.local_only((transactions.current_user() or "", transactions.global_epoch()))

    @classmethod
    def validate_inputs(cls, cache_name, reuse, reuse_prefix_segments, from_take=0):
        # ComfyUI calls this instead of its own min/max check for these inputs, with the literals
        # already converted (int(1.5) == 1: the raw value is checked in POST /prompt, see
        # routes.refuse_inexact_numbers); a linked input arrives as None (checked in execute).
        if cache_name is not None:
            try:
                roots.validate_cache_name(cache_name)
            except ReuseError as e:
                return str(e)
        if reuse is not None and reuse not in MODES:
            return f"reuse must be one of {', '.join(MODES)}; got {reuse!r}"
        if reuse_prefix_segments is not None and not _refused(reuse_prefix_segments):
            e = prefix_segments_problem(reuse_prefix_segments)
            if e is not None:
                return f"{e.message}; fix: {e.fix}"
            if reuse == "off" and reuse_prefix_segments != 0:
                return ("reuse_prefix_segments other than 0 needs reuse 'auto' or 'require' (a prefix is always "
                        "reused); set reuse to auto or reuse_prefix_segments to 0")
        e = take_problem("from_take", from_take, 0, MAX_TAKE_NUMBER) \
            if from_take is not None and not _refused(from_take) else None
        if e is not None:
            return f"{e.message}; fix: {e.fix}"
        return True

    @classmethod
    def execute(cls, cache_name, reuse, reuse_prefix_segments, from_take=0):
        transactions.refuse_if_unsafe()   # a provider could see this node (nodes/cache_providers.py)
        name = roots.validate_cache_name(cache_name)
        e = prefix_segments_problem(reuse_prefix_segments)   # a linked value was not validated
        e = e or take_problem("from_take", from_take, 0, MAX_TAKE_NUMBER)
        if e is not None:
            raise e
        root = users.root_for(transactions.current_user())   # the user's namespace (--multi-user)
        session = Session(root, name, reuse, int(reuse_prefix_segments), int(from_take), keep_takes())
        if not is_automatic(cls.hidden.prompt, cls.hidden.unique_id):
            return io.NodeOutput(session)
        session = replace(session, root=str(namespaces.auto_root(root)))   # its automatic caches (namespaces.py)
        # the arrival report in this node's history output too: a queuing path that drops
        # extra_data (an orchestrator's internal queue) keeps the history's outputs (auto_reports.py)
        kept = auto_reports.recall(cls.hidden.prompt)
        return io.NodeOutput(session, ui={AUTO_REPORT_OUTPUT: [kept]} if kept else None)
