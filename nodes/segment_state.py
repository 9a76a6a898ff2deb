"""Values that flow between the Segment Loop nodes, and the loop-expansion helper."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..reuse_backend.media.segment_plan import SegmentSpec
from . import host, transactions
from .host import GraphBuilder, io
from .host import graph_is_link as is_link
from .session_node import Session

LoopType = io.Custom("SEEDREUSE_LOOP")
SegmentType = io.Custom("SEEDREUSE_SEGMENT")
SegmentsType = io.Custom("SEEDREUSE_SEGMENTS")
CATEGORY = "SeedReuse/segment reuse"


class SegmentNode(io.ComfyNode):
    """Base of the segment-reuse nodes (Segment Loop Start, Boundary Save, Segment Loop End,
    Segment Prompt, Prefix Merge): their schema in the one category, and their change token:
    a new one after any commit in this process, kept out of external cache providers."""

    @classmethod
    def segment_schema(cls, node_id: str, display_name: str, description: str, inputs: list, outputs: list,
                       **more) -> io.Schema:
        return io.Schema(node_id=node_id, display_name=display_name, category=CATEGORY, description=description,
                         inputs=inputs, outputs=outputs, **more)

    @classmethod
    def fingerprint_inputs(cls, **kw):
        return host.local_only(transactions.global_epoch())

def loop_input(where: str = "", **options):
    """The loop link that every node of the loop body takes from Segment Loop Start (Boundary
    Save, Segment Loop End, Segment Prompt): one input name, type and tooltip for all of them
    (``where`` adds to the tooltip, ``options`` to the input)."""
    return LoopType.Input("loop", tooltip=f"From Segment Loop Start{where}.", **options)


@dataclass
class LoopState:
    session: Session
    spec: SegmentSpec
    seed: int
    index: int                 # the segment this iteration generates
    first_index: int           # N: the first generated segment (0 without a reused prefix)
    key: dict                  # the segment reuse_key (ReuseKey.to_dict())
    motion_frames: object      # IMAGE the segment starts from (None: none given)
    motion_latent: object      # LATENT of those frames when the body provides it
    audio: object              # AUDIO of the whole video, or None
    chunks: tuple = ()         # (name, path) of the staged chunks of the generated segments, in order
                               # (the last segment's surplus past the audio's end is a chunk of its own)
    start_node: str = ""
    summary: dict = field(default_factory=dict)
    validity: dict = field(default_factory=dict)   # segment_validity.record() of this request
    kept_takes: list = field(default_factory=list)  # take records carried into the new version


@dataclass
class SegmentValue:
    state: LoopState
    images: object             # the F frames the body decoded for this segment
    motion_latent: object = None


@dataclass
class SegmentsResult:
    state: LoopState


def _upstream_map(dynprompt, node_id, upstream):
    node = dynprompt.get_node(node_id)
    for v in (node.get("inputs") or {}).values():
        if is_link(v):
            parent = v[0]
            if parent not in upstream:
                upstream[parent] = []
                _upstream_map(dynprompt, parent, upstream)
            upstream[parent].append(node_id)


def _descendants(node_id, upstream, out):
    for child in upstream.get(node_id, []):
        if child not in out:
            out[child] = True
            _descendants(child, upstream, out)


def expand_next_iteration(dynprompt, end_id: str, start_id: str, next_state: LoopState):
    """Copy every node between Start and End (the user's per-segment body) for the next
    segment; the copied Start receives ``next_state``. Returns (graph, new_end)."""
    upstream: dict = {}
    _upstream_map(dynprompt, end_id, upstream)
    contained: dict = {}
    _descendants(start_id, upstream, contained)
    contained[end_id] = True
    contained[start_id] = True
    graph = GraphBuilder()
    for nid in contained:
        original = dynprompt.get_node(nid)
        node = graph.node(original["class_type"], "Recurse" if nid == end_id else nid)
        node.set_override_display_id(nid)
    for nid in contained:
        original = dynprompt.get_node(nid)
        node = graph.lookup_node("Recurse" if nid == end_id else nid)
        for k, v in (original.get("inputs") or {}).items():
            if is_link(v) and v[0] in contained:
                node.set_input(k, graph.lookup_node(v[0]).out(v[1]))
            else:
                node.set_input(k, v)
    graph.lookup_node(start_id).set_input("loop_state", next_state)
    return graph, graph.lookup_node("Recurse")
