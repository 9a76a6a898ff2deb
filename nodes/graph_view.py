"""Read-only views of the queued graph and the key computations built on them.

The one module the nodes, the dry run, the commit-time carry and the segment loop share for
node ids and keys, so none of them imports another node module to compute a key.
"""
from __future__ import annotations

import json

from ..reuse_backend.keys import graph_key
from ..reuse_backend.keys.key import ReuseKey
from ..reuse_backend.workflow.node_types import is_pack, is_wrapper
from . import host

PREFIX = "SeedReuse"
SESSION_ID = "SeedReuseSession"
ENCODE_PREFIX = "SeedReuseEncode"
START_ID = "SeedReuseSegmentLoopStart"
END_ID = "SeedReuseSegmentLoopEnd"
PROMPT_ID = "SeedReuseSegmentPrompt"
KEY_VERSION = 1

# Encode-or-Reuse node id -> the ComfyUI io type of its slot (filled as the node classes are made)
SLOT_IO_TYPES: dict[str, str] = {}


class GraphView:
    """node_id -> node dict, over the original prompt plus nodes added by expansion; with what
    the host says of each class (``classes``) and the hidden values it passes to nodes.

    executing: the view of a prompt the host is executing. The host computes a node's change
    token (IS_CHANGED / fingerprint_inputs) only when its own cache asks for it (never with
    ``--cache-none``); a key walk on such a view first sets the tokens the host left out, as the
    dry run does, so a volatile node (NaN) is never reused in any cache mode."""

    def __init__(self, prompt: dict | None, dynprompt=None, resolved: dict | None = None,
                 extra_pnginfo=None, classes: "host.NodeClasses | None" = None, executing: bool = False):
        self.prompt = prompt or {}
        self.dynprompt = dynprompt
        self._passthrough: dict | None = None
        # file identities shared by every key of one request (the prompt context keeps it)
        self.resolved = resolved if resolved is not None else {}
        self.extra_pnginfo = extra_pnginfo
        self.classes = classes or host.NodeClasses()
        self._hidden: dict = {}
        self.executing = executing
        self._tokens: dict = {}     # (class, literal inputs) -> change token, asked once per view

    def hidden_value(self, name: str):
        """What the host passes as hidden value ``name`` ("prompt", "extra_pnginfo") to a node of
        this prompt, as the digest a key records (computed once, only when a key needs it)."""
        if name not in self._hidden:
            skip = {**own_skip_inputs(self), **{ct: ("session", "slot") for ct in passthrough_classes(self)}}
            self._hidden[name] = (graph_key.prompt_digest(self.prompt, skip) if name == "prompt"
                                  else graph_key.digest_of(self.extra_pnginfo))
        return self._hidden[name]

    def get(self, node_id):
        if self.dynprompt is not None:
            try:
                if self.dynprompt.has_node(node_id):
                    return self.dynprompt.get_node(node_id)
            except Exception:
                pass
        return self.prompt.get(node_id)


def own_skip_inputs(prompt_like, node_ids=None) -> dict:
    """Our own nodes' reuse controls never enter keys (the session is skipped whole)."""
    return {SESSION_ID: ("cache_name", "reuse", "reuse_prefix_segments", "from_take", "automatic"),
            "SeedReuseSegmentLoopStart": ("session", "seed"),
            "SeedReuseBoundarySave": ("loop",),
            "SeedReusePrefixMerge": ("session", "filename_prefix")}


def passthrough_classes(prompt_like) -> dict:
    """Encode-or-Reuse nodes are transparent: a key sees straight through to their value input."""
    cached = getattr(prompt_like, "_passthrough", None)
    if cached is not None:        # one scan per view: a dry run computes hundreds of keys on it
        return cached
    out = {}
    nodes = prompt_like.prompt.values() if isinstance(prompt_like, GraphView) else prompt_like.values()
    for node in nodes:
        ct = node.get("class_type", "") if isinstance(node, dict) else ""
        if is_wrapper(ct):
            out[ct] = "value"
    if isinstance(prompt_like, GraphView):
        prompt_like._passthrough = out
    return out


class _Hidden:
    """The hidden values of a view, read only when a node of the walk declares one."""

    def __init__(self, view: GraphView):
        self.view = view

    def get(self, name, default=None):
        return self.view.hidden_value(name)


def set_change_token(node: dict, classes, memo: dict) -> None:
    """Set ``node["is_changed"]`` as the host's cache would (its class's IS_CHANGED /
    fingerprint_inputs on its literal inputs; NaN when that raises), asked once per (class,
    literals) in ``memo``; nothing for the pack's own nodes or a class without one."""
    ct = node.get("class_type", "")
    if not isinstance(ct, str) or is_pack(ct):
        return
    fn = classes.change_token_fn(ct)
    if fn is None:
        return
    specs = classes.specs(ct)
    literals = {k: v for k, v in (node.get("inputs") or {}).items() if k in specs and not graph_key.is_link(v)}
    k = (ct, json.dumps(literals, sort_keys=True, default=repr))
    if k not in memo:
        try:
            memo[k] = [fn(**literals)]
        except Exception:   # noqa: BLE001 - as the host: a token that cannot be computed is "changed"
            memo[k] = float("nan")
    node["is_changed"] = memo[k]


def _fill_missing_tokens(view: GraphView, link) -> None:
    """On an executing view: the change tokens the host did not compute, for the nodes upstream
    of ``link`` (GraphView's doc)."""
    if not view.executing or not graph_key.is_link(link):
        return
    for nid in graph_key.upstream_nodes(view.prompt, [link[0]]):
        node = view.prompt.get(nid)
        if isinstance(node, dict) and "is_changed" not in node:
            set_change_token(node, view.classes, view._tokens)


def walk(view: GraphView, link, label: str, skip: dict | None = None) -> graph_key.Walk:
    """The key walk every key of the pack uses (graph_key.walk_upstream): the pack's own controls
    on its own nodes left out (``skip``, default ``own_skip_inputs``), Encode-or-Reuse nodes
    transparent, the host's file identities, change tokens, class facts and hidden values."""
    _fill_missing_tokens(view, link)
    return graph_key.walk_upstream(view, link, label=label, resolver=host.resolve_file,
                                   skip_inputs=own_skip_inputs(view) if skip is None else skip,
                                   passthrough=passthrough_classes(view),
                                   ignore_change_token=is_pack,
                                   resolved=view.resolved, facts=view.classes.facts,
                                   hidden_values=_Hidden(view))


def upstream_fields(view: GraphView, link, label: str) -> dict:
    return walk(view, link, label).fields


def slot_key(view: GraphView, node_id: str, io_type: str) -> ReuseKey:
    """reuse_key of an Encode-or-Reuse slot: what produces its value input, plus its type; it
    carries the seeds and samplers the value depends on (``depends``) for the messages."""
    node = view.get(node_id)
    link = (node.get("inputs") or {}).get("value")
    w = walk(view, link, "value")
    w.fields["(slot type)"] = io_type
    w.fields["(key version)"] = KEY_VERSION
    return ReuseKey.build("slot", w.fields, origins=w.origins, depends=w.depends)


def segment_key(view: GraphView, end_id: str, spec) -> ReuseKey:
    """reuse_key of a segment run: what feeds the loop's End node, plus the segment spec. The
    loop's own seed (Segment Loop Start's ``seed``, which Segment Reuse re-rolls per take) is one
    of the pack's controls: a sampler in the loop body keyed by its seed input reuses across
    seeds only when that input is linked to the loop's seed output."""
    w = walk(view, [end_id, 0], "segments")
    w.fields["(segment spec)"] = spec.to_dict()
    w.fields["(key version)"] = KEY_VERSION
    return ReuseKey.build("segments", w.fields, origins=w.origins)


# The inputs of Segment Loop Start that differ per segment (windowed per segment) or that only
# set the segment count: the static part of per-segment validity leaves them out.
PER_SEGMENT_INPUTS = ("total_frames", "audio", "audio_features")


def segment_static_key(view: GraphView, end_id: str, spec) -> ReuseKey:
    """What every segment of a loop depends on alike (media.segment_validity): the segment key's
    walk without the loop's per-segment inputs and without the segment count."""
    skip = dict(own_skip_inputs(view))
    skip[START_ID] = tuple(skip[START_ID]) + PER_SEGMENT_INPUTS
    skip[PROMPT_ID] = ("prompts",)      # literal lines are per segment; a linked text stays static (below)
    fields = walk(view, [end_id, 0], "segments", skip).fields
    for nid, node in sorted((view.prompt or {}).items()):
        link = ((node.get("inputs") or {}).get("prompts") if isinstance(node, dict)
                and node.get("class_type") == PROMPT_ID else None)
        if graph_key.is_link(link):
            fields.update(upstream_fields(view, link, f"(segment prompts {nid})"))
    fields["(segment geometry)"] = {"F": spec.F, "M": spec.M, "fps": spec.fps}
    fields["(key version)"] = KEY_VERSION
    return ReuseKey.build("segment-prefix", fields)


def segment_audio_source_key(view: GraphView, start_id: str) -> ReuseKey:
    """The graph upstream of the loop's audio inputs (the dry run compares it; a run compares
    the samples themselves)."""
    inputs = (view.get(start_id) or {}).get("inputs") or {}
    fields = {}
    for name in ("audio", "audio_features"):
        if graph_key.is_link(inputs.get(name)):
            fields.update(upstream_fields(view, inputs[name], name))
    return ReuseKey.build("segment-audio-source", fields)


def segment_prompts(view: GraphView, start_id: str) -> list[list[str]]:
    """The literal lines of every Segment Prompt of this loop (node id order): per-segment inputs."""
    out = []
    for nid, node in sorted((view.prompt or {}).items()):
        inputs = (node.get("inputs") or {}) if isinstance(node, dict) and node.get("class_type") == PROMPT_ID else {}
        loop, text = inputs.get("loop"), inputs.get("prompts")
        if graph_key.is_link(loop) and loop[0] == start_id and isinstance(text, str):
            out.append(text.splitlines())
    return out


def find_end_node(view: GraphView, start_id: str) -> str | None:
    """The Segment Loop End whose ``loop`` input links to ``start_id``."""
    for nid, node in (view.prompt or {}).items():
        if isinstance(node, dict) and node.get("class_type") == END_ID:
            link = (node.get("inputs") or {}).get("loop")
            if graph_key.is_link(link) and link[0] == start_id:
                return nid
    return None


def session_of(view: GraphView, node_id: str) -> dict | None:
    """The literal settings of the session node feeding ``node_id``'s ``session`` input."""
    node = view.get(node_id) or {}
    link = (node.get("inputs") or {}).get("session")
    if not graph_key.is_link(link):
        return None
    sess = view.get(link[0]) or {}
    if sess.get("class_type") != SESSION_ID:
        return None
    return graph_key.literal_inputs(sess, ("cache_name", "reuse", "reuse_prefix_segments", "from_take", "automatic"))
