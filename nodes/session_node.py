"""SeedReuse Session: names the cache and carries the request's reuse controls."""
from __future__ import annotations

from dataclasses import dataclass


from ..reuse_backend.store import roots
from ..reuse_backend.errors import ReuseError
from ..reuse_backend.keys.slots import MODES
from . import host
from .host import io

SessionType = io.Custom("SEEDREUSE_SESSION")


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
                io.Int.Input("reuse_prefix_segments", default=0, min=0, max=100000,
                             tooltip="Segment Reuse: keep the first N segments of the previous successful video "
                                     "and generate from segment N. 0 = regenerate every segment."),
            ],
            outputs=[SessionType.Output("session", display_name="session", tooltip="Connect to every SeedReuse node of this workflow.")],
        )

    @classmethod
    def validate_inputs(cls, cache_name, reuse, reuse_prefix_segments):
        try:
            roots.validate_cache_name(cache_name)
        except ReuseError as e:
            return str(e)
        if reuse not in MODES:
            return f"reuse must be one of {', '.join(MODES)}; got {reuse!r}"
        if reuse == "off" and reuse_prefix_segments > 0:
            return ("reuse_prefix_segments > 0 needs reuse 'auto' or 'require' (a prefix is always reused); "
                    "set reuse to auto or reuse_prefix_segments to 0")
        return True

    @classmethod
    def execute(cls, cache_name, reuse, reuse_prefix_segments):
        name = roots.validate_cache_name(cache_name)
        return io.NodeOutput(Session(host.cache_root(), name, reuse, int(reuse_prefix_segments)))
