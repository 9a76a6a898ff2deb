"""Nodes that do nothing, in the shape of a cross-worker hit: ComfyUI's own cost floor.

A hit executes SeedReuseSession and one Encode-or-Reuse node per restored edge; ComfyUI spends
time on each executed node (input gathering, check_lazy_status, the V3 class clone, the
executing / progress_state / executed messages) before the pack's code does anything. The
benchmark (seedreuse_lab/bench_real.py) swaps these two in for the pack's nodes, on the same
edges, and measures queue -> KSampler start: what executing those nodes costs when restoring
is free. The hit's own cost is what it adds on top.

FloorSession takes the Session's inputs and passes ``cache_name`` on (a new name per request
makes every FloorPass downstream execute, as a new cache does for the pack's nodes).
FloorPass has the Encode-or-Reuse inputs (``value`` lazy) and returns the value its ``slot``
received the first time, kept in this process's memory: it evaluates ``value`` once per slot
name, then never again. Test and benchmark only.
"""
from __future__ import annotations

from comfy_api.latest import io

_REMEMBERED: dict[str, object] = {}


class SeedReuseTestFloorSession(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestFloorSession",
            display_name="SeedReuse Test: Floor Session",
            category="SeedReuse/test",
            description="Does nothing: passes cache_name on (the benchmark's per-node cost floor).",
            inputs=[
                io.String.Input("cache_name", tooltip="Passed on; a new value makes the FloorPass nodes run."),
                io.Combo.Input("reuse", options=["off", "auto", "require"], default="auto",
                               tooltip="Ignored (the Session's input, for the same graph shape)."),
                io.Int.Input("reuse_prefix_segments", default=0, min=-1,
                             tooltip="Ignored (the Session's input, for the same graph shape)."),
            ],
            outputs=[io.String.Output(display_name="session", tooltip="cache_name, unchanged.")],
        )

    @classmethod
    def execute(cls, cache_name, reuse="auto", reuse_prefix_segments=0):
        return io.NodeOutput(cache_name)


class SeedReuseTestFloorPass(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestFloorPass",
            display_name="SeedReuse Test: Floor Pass",
            category="SeedReuse/test",
            description="Returns the value its slot first received, from memory (the per-node cost floor).",
            inputs=[
                io.String.Input("session", tooltip="FloorSession's output: a new one makes this node run."),
                io.String.Input("slot", tooltip="The name the first value is remembered under."),
                io.AnyType.Input("value", lazy=True,
                                 tooltip="Evaluated only while nothing is remembered under this slot."),
            ],
            outputs=[io.AnyType.Output(display_name="value", tooltip="The value remembered under slot.")],
        )

    @classmethod
    def check_lazy_status(cls, session, slot, value=None):
        return [] if slot in _REMEMBERED else ["value"]

    @classmethod
    def execute(cls, session, slot, value=None):
        if slot not in _REMEMBERED:
            _REMEMBERED[slot] = value
        return io.NodeOutput(_REMEMBERED[slot])


FLOOR_NODES = [SeedReuseTestFloorSession, SeedReuseTestFloorPass]
