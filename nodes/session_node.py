"""SeedReuse Session: names the cache and carries the request's reuse controls."""
from __future__ import annotations

from dataclasses import dataclass


from ..reuse_backend.store import roots
from ..reuse_backend.errors import InvalidRequestError, ReuseError
from ..reuse_backend.keys.graph_key import number_problem
from ..reuse_backend.keys.slots import MODES
from . import host
from .host import io

SessionType = io.Custom("SEEDREUSE_SESSION")
MAX_PREFIX_SEGMENTS = 100000
PREFIX_FIX = (f"set reuse_prefix_segments to a whole number from 0 to {MAX_PREFIX_SEGMENTS}: 0 regenerates "
              "every segment, N keeps the first N segments of the previous result (N < the segment count)")


def prefix_segments_problem(value) -> InvalidRequestError | None:
    """Why ``value`` is not a valid reuse_prefix_segments (an exact integer 0..MAX), or None."""
    return number_problem("reuse_prefix_segments", "INT", value, minimum=0, maximum=MAX_PREFIX_SEGMENTS,
                          fix=PREFIX_FIX)


@dataclass(frozen=True)
class Session:
    root: str
    name: str
    mode: str
    prefix_segments: int


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
                io.Int.Input("reuse_prefix_segments", default=0, min=0, max=MAX_PREFIX_SEGMENTS,
                             tooltip="Segment Reuse: keep the first N segments of the previous successful video "
                                     "and generate from segment N. 0 = regenerate every segment."),
            ],
            outputs=[SessionType.Output("session", display_name="session", tooltip="Connect to every SeedReuse node of this workflow.")],
        )

    @classmethod
    def validate_inputs(cls, cache_name, reuse, reuse_prefix_segments):
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
        if reuse_prefix_segments is not None:
            e = prefix_segments_problem(reuse_prefix_segments)
            if e is not None:
                return f"{e.message}; fix: {e.fix}"
            if reuse == "off" and reuse_prefix_segments > 0:
                return ("reuse_prefix_segments > 0 needs reuse 'auto' or 'require' (a prefix is always reused); "
                        "set reuse to auto or reuse_prefix_segments to 0")
        return True

    @classmethod
    def execute(cls, cache_name, reuse, reuse_prefix_segments):
        name = roots.validate_cache_name(cache_name)
        e = prefix_segments_problem(reuse_prefix_segments)   # a linked value was not validated
        if e is not None:
            raise e
        return io.NodeOutput(Session(host.cache_root(), name, reuse, int(reuse_prefix_segments)))
