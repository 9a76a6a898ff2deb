"""Where to wrap: the widest seed-independent encoder outputs of a flattened graph.

Format-neutral: ``ui_format.py`` and ``api_format.py`` describe their graph as ``FlatNode``s
(subgraphs expanded), ``plan()`` decides, and they apply the decision in their own format.

A node is *tainted* when it samples or patches the model (``node_types.is_boundary``: a known
sampler, a NOISE input, a seed input next to a MODEL input, a model patcher), or has a tainted
input: nothing at or after it changes less often than the sampler's seed, so nothing there is
wrapped. A seed on any other node (a wildcard picking the prompt, a prompt enhancer or a language
model sampling inside a text encode) is an input like any other: the wrapped value's key covers
it (keys/graph_key.py), so it is reused while that seed is unchanged and encoded again when it
changes. A node is *encoded* when it or an untainted ancestor runs
an encoder on its inputs (``_is_encoder``: a CLIP, or a CLIP_VISION / VAE / AUDIO_ENCODER with
a linked data input to encode), not counting what is
only reached through an existing wrapper (that value is already restored from the cache). Every edge from an
untainted node into a tainted one is a frontier edge; its value is wrapped when an Encode-or-Reuse
variant carries its type and it is encoded (the widest wrap point: e.g. WanImageToVideo's outputs,
which also cover its start-image VAE encode). A frontier value of another type (a GUIDER, a custom
embeds type) is walked back to its producer's inputs.
"""
from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field

from ..errors import InvalidRequestError
from . import node_types as nt


@dataclass
class FlatNode:
    key: str                                  # unique in the flattened graph
    class_type: str
    links: dict = field(default_factory=dict)  # input name -> (source key, output slot)
    in_types: dict = field(default_factory=dict)   # linked input name -> type (when known)
    literal_names: set = field(default_factory=set)
    literal_sources: dict = field(default_factory=dict)   # literal input name -> the primitive that sets it
    out_types: list | None = None             # None: unknown class
    out_names: list | None = None
    slot_literal: str | None = None           # a wrapper's slot name
    place: object = None                      # where a wrapper of this node's outputs goes
    place_problem: str | None = None          # why no wrapper can go there
    title: str = ""


@dataclass
class Wrap:
    src: str
    slot: int
    type: str
    variant: str
    place: object
    producer: FlatNode
    consumers: list = field(default_factory=list)   # (consumer key, input name)
    name: str = ""
    note: str = ""                                  # what the user should know about its reuse


@dataclass
class Plan:
    wraps: list
    not_wrapped: list          # {"node", "class_type", "title", "reason"}
    existing_slots: list       # slot names of the wrappers already in the graph


def _natural(key: str) -> tuple:
    """'128:9' < '128:10': flattened ids compared part by part, numbers as numbers."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in str(key).split(":"))


def _order(nodes: dict) -> list:
    """Topological order (Kahn, iterative); a cycle is an InvalidRequestError naming its nodes."""
    indeg = {k: 0 for k in nodes}
    users: dict = {k: [] for k in nodes}
    for k, n in nodes.items():
        for src, _ in n.links.values():
            if src in nodes:
                indeg[k] += 1
                users[src].append(k)
    ready = [(_natural(k), k) for k, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        k = heapq.heappop(ready)[1]
        out.append(k)
        for u in users[k]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, (_natural(u), u))
    if len(out) != len(nodes):
        stuck = sorted(k for k, d in indeg.items() if d > 0)[:10]
        raise InvalidRequestError("the workflow has a dependency cycle", expected="an acyclic graph",
                                  actual=f"nodes on or after a cycle: {', '.join(stuck)}",
                                  fix="remove the link that closes the cycle")
    return out


# linked inputs that carry no data for an encoder to encode (models, primitives, sampler parts)
_NOT_ENCODED = (nt.SILENT_TYPES - {"MASK", "VIDEO", "*"}) | {nt.SESSION_TYPE}


def _is_encoder(n: FlatNode) -> bool:
    """The node runs an encoder on something: it takes a text encoder (CLIP: its text is always
    encoded), or a VAE / CLIP vision / audio encoder together with a linked input of a data type
    (an image, audio, a latent, a mask, or a link of unknown type). A node that only takes the
    model and literals (Wan22ImageToVideoLatent with its start image bypassed: an empty latent
    of the given size) encodes nothing, so its outputs are not encoder outputs."""
    if nt.is_pack(n.class_type):
        return False
    models = {t for t in n.in_types.values() if t in nt.ENCODER_MODEL_TYPES}
    if "CLIP" in models:
        return True
    if not models:
        return False
    return any(n.in_types.get(name) not in _NOT_ENCODED for name in n.links
               if n.in_types.get(name) not in nt.ENCODER_MODEL_TYPES)


def _patches_model_with_encode(n: FlatNode) -> list:
    """The encoder models a MODEL -> MODEL node encodes with (a control image VAE-encoded into a
    model patch): [] when it is not such a node."""
    outs = [t for t in (n.out_types or []) if t]
    if "MODEL" not in n.in_types.values() or not outs or set(outs) != {"MODEL"} or not _is_encoder(n):
        return []               # (a LoRA loader passes its CLIP on: it encodes nothing)
    return sorted({t for t in n.in_types.values() if t in nt.ENCODER_MODEL_TYPES})


def _seed_origin(n: FlatNode, name: str):
    """Who sets a seed input: the primitive of a literal, the node of a link, else None."""
    if name in n.literal_sources:
        return ("primitive", n.literal_sources[name])
    return ("node", n.links[name][0]) if name in n.links else None


def _shared_seed_note(w: "Wrap", nodes: dict, tainted: dict, boundaries: list) -> str:
    """Where a seed on the value's encode side is set by the primitive or node that also sets a
    sampler's seed (the ACE-Step 1.5 and MiniMax Music 3 templates): a new seed is a new encoder
    seed, so the value is encoded again."""
    side, todo = set(), [w.src]
    while todo:
        k = todo.pop()
        if k in side or k not in nodes or tainted[k]:
            continue
        side.add(k)
        todo.extend(s for s, _ in nodes[k].links.values())
    for k in sorted(side, key=_natural):
        for name in sorted(nt.SEED_INPUTS & (set(nodes[k].literal_sources) | set(nodes[k].links))):
            origin = _seed_origin(nodes[k], name)
            for b in boundaries:
                shared = sorted(bn for bn in nt.SEED_INPUTS if _seed_origin(nodes[b], bn) == origin)
                if shared:
                    by = "the primitive" if origin[0] == "primitive" else _label(nodes[origin[1]])
                    return (f"input '{name}' of {_label(nodes[k])} is set by {by}, which also sets '{shared[0]}' of "
                            f"{_label(nodes[b])}: every new seed is a new encoder seed, so it encodes again; give "
                            "the encoder a seed of its own to reuse it across seeds")
    return ""


def _label(n: FlatNode) -> str:
    return f"{n.title or n.class_type} (node {n.key})"


def _slot_base(w: Wrap) -> str:
    names = w.producer.out_names or []
    out_name = names[w.slot] if w.slot < len(names) else ""
    if out_name and out_name.lower() != w.type.lower() and out_name != out_name.upper():
        base = out_name
    elif w.consumers:
        base = w.consumers[0][1]
    else:
        base = w.type.lower()
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", base.split(".")[-1]).strip("_-") or "value"
    return base[:48]


def name_slots(wraps: list, taken: set) -> None:
    for w in wraps:
        base = _slot_base(w)
        name, i = base, 2
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        w.name = name


def plan(nodes: dict) -> Plan:
    order = _order(nodes)
    tainted, after_boundary, encoded = {}, {}, {}
    for k in order:
        n = nodes[k]
        srcs = [nodes[s] for s, _ in n.links.values() if s in nodes]
        samples = bool((n.literal_names | set(n.links)) & nt.SEED_INPUTS) and "MODEL" in n.in_types.values() \
            or any(t in nt.NOISE_TYPES for t in n.in_types.values())
        boundary = samples or nt.is_boundary(n.class_type, n.in_types.values(), n.out_types)
        # the nearest boundary at or before this node (for the report of what is not wrapped)
        after_boundary[k] = k if boundary else next((after_boundary[s.key] for s in srcs if after_boundary[s.key]), None)
        tainted[k] = after_boundary[k] is not None
        # a wrapper's value is restored from the cache: nothing after it needs another wrapper
        encoded[k] = not tainted[k] and not nt.is_pack(n.class_type) and \
            (_is_encoder(n) or any(encoded[s.key] for s in srcs))

    not_wrapped, reported = [], set()

    def report(n: FlatNode, reason: str):
        if (n.key, reason) not in reported:
            reported.add((n.key, reason))
            not_wrapped.append({"node": n.key, "class_type": n.class_type, "title": n.title, "reason": reason})

    for k in order:
        enc = [] if tainted[k] else _patches_model_with_encode(nodes[k])
        if enc:
            report(nodes[k], f"patches the model and runs its own {'/'.join(enc)} encode inside: a model is not "
                             "cached, so that encode is computed on every request")
    # nodes whose output goes straight into a sampler or model patcher (a wrap point, if untainted)
    feeds_sampling = {src for k in order if after_boundary[k] == k for src, _ in nodes[k].links.values()}
    wraps: dict = {}
    stack = []
    for k in order:
        n = nodes[k]
        if not tainted[k]:
            continue
        for name, (src, slot) in sorted(n.links.items()):
            if src in nodes and not tainted[src]:
                stack.append((src, slot, k, name))
        if nt.is_boundary(n.class_type, n.in_types.values(), n.out_types) and n.class_type not in nt.SAMPLERS:
            enc = sorted({t for name, t in n.in_types.items() if t in nt.ENCODER_MODEL_TYPES
                          and n.links[name][0] in nodes and not tainted[n.links[name][0]]})
            if enc:
                report(n, f"patches the model and runs its own {'/'.join(enc)} encode inside: that part is "
                          "computed on every request (its encoded inputs are wrapped)")
        elif _is_encoder(n) and after_boundary[k] != k and k in feeds_sampling:
            b = nodes[after_boundary[k]]
            report(n, f"it encodes what {_label(b)} sampled: it changes with every seed, so it is not wrapped "
                      "(a hand-placed Encode or Reuse here is keyed by that seed and reused only while it is unchanged)")
    seen = set()
    while stack:
        src, slot, consumer, cname = stack.pop()
        s = nodes[src]
        if nt.is_pack(s.class_type):
            continue                       # already wrapped (or the session)
        if (src, slot) in wraps:
            wraps[(src, slot)].consumers.append((consumer, cname))
            continue
        if (src, slot) in seen:
            continue
        seen.add((src, slot))
        types = s.out_types
        t = types[slot] if types is not None and slot < len(types) else None
        if not encoded[src]:
            continue
        if t in nt.VARIANTS:
            if s.place is None:
                report(s, s.place_problem or "no place to insert a wrapper")
                continue
            wraps[(src, slot)] = Wrap(src, slot, t, nt.VARIANTS[t], s.place, s, [(consumer, cname)])
            continue
        if t in nt.SILENT_TYPES:
            continue
        if t is None:
            report(s, f"output {slot} of an unknown node class: its type is not known, so it is not wrapped "
                      "(instrument the UI-format workflow, or give the host's /object_info)")
        elif _is_encoder(s):
            report(s, f"its output {slot} ({t}) has no Encode-or-Reuse variant: it runs on every request "
                      "(its encoded inputs are wrapped)")
        for name, (src2, slot2) in sorted(s.links.items()):
            if src2 in nodes and not tainted[src2]:
                stack.append((src2, slot2, src, name))
    index = {k: i for i, k in enumerate(order)}
    ordered = sorted(wraps.values(), key=lambda w: (index[w.src], w.slot))
    for w in ordered:       # consumers in graph order, and each consumer's inputs in its own order
        w.consumers = sorted(set(w.consumers), key=lambda c: (index[c[0]], list(nodes[c[0]].links).index(c[1])))
    existing = sorted(n.slot_literal for n in nodes.values()
                      if nt.is_wrapper(n.class_type) and isinstance(n.slot_literal, str))
    name_slots(ordered, set(existing))
    boundaries = [k for k in order if after_boundary[k] == k]
    for w in ordered:
        w.note = _shared_seed_note(w, nodes, tainted, boundaries)
    return Plan(ordered, not_wrapped, existing)
