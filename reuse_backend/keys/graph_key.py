"""Describe the part of an API-format prompt that produces a value, as reuse_key fields.

The walk starts at a link ``[node_id, output_index]`` and follows every input upstream.
Fields are named by the path of input names from the start, not by node ids, so the same
computation in two workflows (or after the canvas renumbers nodes) gives the same key:

    value                         -> "CLIPTextEncode#0"
    value:text                    -> "a cat"
    value.clip                    -> "CLIPLoader#0"
    value.clip:clip_name          -> "umt5.safetensors"
    value.clip:clip_name@content  -> "sampled:9f2c..."   (file identity from the resolver)
    value#is_changed              -> host change token (e.g. LoadImage's file hash)
    value#unique_id               -> the node's id, for a class the host passes its id to
    value#prompt                  -> digest of the whole prompt, for a class the host passes it to

A node reached a second time (a diamond) is recorded as a reference to its first path.

What a key covers (the invariant, stated here once): every input of every node upstream of the
value -- literals, links, seeds included, whatever their names -- plus the host's change token
of each node, the content identity of every file a literal names, and the hidden values the host
passes to a node (its id, the prompt, the workflow metadata) where its class declares them.
The only inputs left out are those the caller names per node class in ``skip_inputs``: the pack's
own controls on the pack's own nodes (nodes/graph_view.py), never an input by its name alone.
Not guaranteed: a node that reads something no input names (a file it finds by itself, the
clock, the network) is covered only through its change token (IS_CHANGED / fingerprint_inputs).
"""
from __future__ import annotations

import hashlib
import json
import math
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .graph_limits import (MAX_KEY_CHARS, MAX_NODES, MAX_VALUE_DEPTH, GraphError, GraphTooLargeError,
                           active_budget, cycle_error, is_link, too_deep_error, value_shape)

Resolver = Callable[[str, str, str], "str | None"]
"""resolver(class_type, input_name, value) -> content identity of a referenced file, or None."""


@dataclass(frozen=True)
class ClassFacts:
    """What the host says about a node class that a key must know beyond its inputs.

    hidden: the hidden values the host passes to the class's nodes, among ``unique_id``,
    ``prompt``, ``dynprompt`` and ``extra_pnginfo`` (its output may depend on them);
    not_idempotent: the host never shares its outputs between nodes (keyed by node id, as
    ``unique_id``); seed_inputs: the inputs the class declares as seeds (ComfyUI's
    ``control_after_generate`` widgets); samples: the node samples (a seed or noise and a model
    in, a latent out): its outputs change with every seed."""
    hidden: frozenset = frozenset()
    not_idempotent: bool = False
    seed_inputs: frozenset = frozenset()
    samples: bool = False


NO_FACTS = ClassFacts()
SEED_NAMES = frozenset({"seed", "noise_seed"})
"""Input names read as seeds where a class declares none (messages only: keys cover every input)."""


def is_seed_input(name: str, facts: ClassFacts) -> bool:
    """An input the user re-rolls: declared as a seed, or named like one (``seed``, ``noise_seed``,
    ``sampling_mode.seed``, ``*_seed``)."""
    last = name.rsplit(".", 1)[-1]
    return name in facts.seed_inputs or last in SEED_NAMES or last.endswith("_seed")


@dataclass(frozen=True)
class Dependency:
    """Something a key covers that changes whenever the user re-rolls it: a seed input, a
    sampler upstream, or the whole prompt or workflow a node reads. Not part of the key: it
    explains why the key changes (the dry run, the badges, the history, errors)."""
    node: str
    class_type: str
    kind: str            # "seed" | "sampler" | "prompt" | "extra_pnginfo"
    input: str = ""
    source: str = ""     # for a linked seed: "node 20 (PrimitiveInt)"

    def describe(self) -> str:
        who = f"node {self.node} ({self.class_type})"
        if self.kind == "seed":
            via = f", linked from {self.source}" if self.source else ""
            return f"depends on input `{self.input}` of {who}{via}: reused only while it is unchanged"
        if self.kind == "sampler":
            return (f"depends on the output of sampler {who}: reused only while every input of it, its seed "
                    "included, is unchanged")
        what = "the whole prompt" if self.kind == "prompt" else "the workflow's metadata (extra_pnginfo)"
        return f"depends on {what}, which {who} reads: reused only while that is unchanged"

    def to_dict(self) -> dict:
        return {"node": self.node, "class_type": self.class_type, "kind": self.kind, "input": self.input,
                "source": self.source, "text": self.describe()}


@dataclass
class Walk:
    """The result of one walk: the key fields, where each node path came from (node id and
    class, for messages), and the dependencies a user re-rolls."""
    fields: dict
    origins: dict = field(default_factory=dict)     # node path -> (node id, class_type)
    depends: list = field(default_factory=list)     # Dependency, in walk order, each once


def digest_of(value) -> str:
    """sha256 of a JSON value's canonical form (what a key records for a value it cannot hold
    whole: a prompt, a workflow)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_digest(prompt, skip_inputs: dict[str, Iterable[str]] | None = None) -> str:
    """The prompt as a node that reads it sees it (class types and inputs of every node), less the
    pack's own controls (``skip_inputs``) and the host's change tokens, as a digest."""
    skip = {k: frozenset(v) for k, v in (skip_inputs or {}).items()}
    nodes = prompt.prompt if hasattr(prompt, "prompt") else prompt
    out = {}
    for nid, node in (nodes or {}).items():
        if not isinstance(node, dict):
            continue
        ct = node.get("class_type")
        dropped = skip.get(ct, frozenset()) if isinstance(ct, str) else frozenset()
        out[str(nid)] = {"class_type": ct, "inputs": {k: v for k, v in (node.get("inputs") or {}).items()
                                                      if k not in dropped}}
    return digest_of(out)


def describe_upstream(prompt, link, **kw) -> dict:
    """The key fields of everything upstream of ``link`` (``walk_upstream(...).fields``)."""
    return walk_upstream(prompt, link, **kw).fields


def walk_upstream(prompt, link, *, label: str = "value", resolver: Resolver | None = None,
                  skip_inputs: dict[str, Iterable[str]] | None = None,
                  passthrough: dict[str, str] | None = None,
                  ignore_change_token: Callable[[str], bool] | None = None,
                  resolved: dict | None = None,
                  facts: Callable[[str], ClassFacts] | None = None,
                  hidden_values: dict | None = None) -> Walk:
    """Walk everything upstream of ``link`` in ``prompt`` into key fields (module doc: what a
    key covers).

    skip_inputs: class_type -> input names ignored for that class (the pack's own controls on
    its own nodes; nothing is left out by name alone).
    passthrough: class_type -> input name; such a node is described as if the link went
    straight to that input (our Encode-or-Reuse nodes are transparent in keys).
    ignore_change_token(class_type): True for classes whose host change token must not
    enter keys (our own nodes: their tokens are process-local by design).
    resolved: the resolver answers to share with other walks of the same request (a queued
    prompt computes one key per reuse slot over the same loaders; each answer costs a lookup
    through every model folder). A key budget's own answers take precedence. An answer is the
    file's identity when first asked; not guaranteed, with or without it: a file replaced between
    a key's computation and the moment its loader reads it is not seen by the key.
    facts(class_type) -> ClassFacts: the hidden values a class receives, its seed inputs and
    whether it samples (default: none known). hidden_values: what the host passes as hidden
    values to every node of this prompt, ``{"prompt": digest, "extra_pnginfo": digest}``
    (``prompt_digest``/``digest_of``); a node whose class declares one gets it as a field.

    The walk is iterative (an explicit stack: no recursion limit) and visits each node once: a
    node reached again is recorded as ``{"same_node_as": <first path>}``. It writes the fields in
    the order of a depth-first walk over the inputs in sorted name order (the order the keys were
    always computed in). A link back to a node that is still being described (a cycle) raises
    GraphCycleError naming the cycle's nodes; a graph beyond MAX_NODES upstream nodes, a literal
    nested deeper than MAX_VALUE_DEPTH or a key beyond MAX_KEY_CHARS raises GraphTooLargeError.
    """
    skip = {k: frozenset(v) for k, v in (skip_inputs or {}).items()}
    passthrough = passthrough or {}
    facts_of = facts or (lambda ct: NO_FACTS)
    hidden_values = hidden_values or {}
    shared = active_budget()
    resolved = shared.resolved if shared is not None else (resolved if resolved is not None else {})
    fields: dict = {}
    walk = Walk(fields)
    noted: set = set()
    seen: dict[str, str] = {}
    chars = 0

    def charge(n: int) -> None:
        nonlocal chars
        chars += n
        if chars > MAX_KEY_CHARS:
            raise GraphTooLargeError(
                f"the key of {label} would exceed {MAX_KEY_CHARS} characters: the graph upstream of it "
                f"is too deep or its values too large", expected=f"<= {MAX_KEY_CHARS} characters",
                actual=f"more than {MAX_KEY_CHARS} after {len(seen)} nodes",
                fix="shorten the chain of nodes feeding this value")
        if shared is not None:
            shared.used += n
            if shared.used > shared.max_chars:
                shared.exhausted = True
                raise GraphTooLargeError(
                    f"the keys of this request would exceed {shared.max_chars} characters together",
                    expected=f"<= {shared.max_chars} characters", actual=f"more than {shared.max_chars}",
                    fix="check a smaller workflow (fewer reuse nodes or a shorter chain upstream of them)")

    def put(key: str, value, size: int) -> None:
        charge(len(key) + size)
        fields[key] = value

    def note(dep: Dependency) -> None:
        k = (dep.node, dep.kind, dep.input)
        if k not in noted:
            noted.add(k)
            walk.depends.append(dep)

    stack: list[list] = []          # frames: [node_id, path, ct, inputs, sorted names, next index, skipped, facts]
    on_stack: dict[str, int] = {}   # node id -> index of its frame (the nodes being described)

    def enter(lnk, path: str) -> None:
        """Record the node ``lnk`` points at; push a frame when its inputs remain to be walked."""
        hops: list[str] = []        # Encode-or-Reuse nodes passed through to reach the node
        while True:
            node_id, out_index = lnk
            node = prompt.get(node_id)
            if not isinstance(node, dict) or "class_type" not in node:
                raise GraphError(f"{path}: link to missing node {node_id!r}",
                                 expected="a link to a node of the prompt", actual=repr(node_id),
                                 fix="reconnect this input")
            ct = node["class_type"]
            if not isinstance(ct, str):
                raise GraphError(f"{path}: node {node_id} has class_type {type(ct).__name__}, not a string",
                                 expected="a node type name", actual=repr(ct)[:80],
                                 fix="remove the node or give it its class_type")
            inputs = node.get("inputs") or {}
            if ct in passthrough and is_link(inputs.get(passthrough[ct])):
                if node_id in hops:
                    raise cycle_error(hops[hops.index(node_id):])
                hops.append(node_id)
                lnk = inputs[passthrough[ct]]
                continue
            break
        if node_id in on_stack:     # a link back to a node being described: a cycle
            raise cycle_error([f[0] for f in stack[on_stack[node_id]:]] + hops)
        if node_id in seen:
            put(path, {"same_node_as": seen[node_id], "output": out_index}, len(seen[node_id]) + 40)
            return
        seen[node_id] = path
        walk.origins[path] = (str(node_id), ct)
        if len(seen) > MAX_NODES:
            raise GraphTooLargeError(f"more than {MAX_NODES} nodes upstream of {label}",
                                     expected=f"<= {MAX_NODES} nodes", actual=f"> {MAX_NODES}",
                                     fix="check a smaller workflow")
        put(path, f"{ct}#{out_index}", len(ct) + 12)
        ic = node.get("is_changed")
        if ignore_change_token is not None and ignore_change_token(ct):
            ic = None
        if ic not in (None, False, [None], [False]):
            # A NaN change token means "different every time" to the host: such a node is
            # volatile and can never be reused, so its key field never matches.
            depth, size = value_shape(ic)
            if depth > MAX_VALUE_DEPTH:
                raise too_deep_error(f"{path}#is_changed")
            put(f"{path}#is_changed", {"volatile": uuid.uuid4().hex} if _has_nan(ic) else ic, size)
        cf = facts_of(ct) or NO_FACTS
        if "unique_id" in cf.hidden or cf.not_idempotent:
            put(f"{path}#unique_id", str(node_id), len(str(node_id)) + 2)
        for name in ("prompt", "extra_pnginfo"):
            declared = name in cf.hidden or (name == "prompt" and "dynprompt" in cf.hidden)
            if declared:
                v = hidden_values.get(name, "(not given)")
                put(f"{path}#{name}", v, len(str(v)) + 2)
                note(Dependency(str(node_id), ct, name))
        if cf.samples:
            note(Dependency(str(node_id), ct, "sampler"))
        names = sorted(inputs)
        if names:
            on_stack[node_id] = len(stack)
            stack.append([node_id, path, ct, inputs, names, 0, skip.get(ct, frozenset()), cf])

    if not is_link(link):
        raise GraphError(f"{label} is not connected to a node output", expected="a link to a node output",
                         actual=repr(link)[:80], fix=f"connect {label}")
    enter(link, label)
    while stack:
        frame = stack[-1]
        node_id, path, ct, inputs, names, i, skipped, cf = frame
        if i == len(names):
            stack.pop()
            del on_stack[node_id]
            continue
        name = names[i]
        frame[5] = i + 1
        if name in skipped:
            continue
        v = inputs[name]
        if is_link(v):
            if is_seed_input(name, cf):
                src = prompt.get(v[0])
                src_ct = src.get("class_type") if isinstance(src, dict) else None
                note(Dependency(str(node_id), ct, "seed", name, f"node {v[0]} ({src_ct})"))
            enter(v, f"{path}.{name}")
            continue
        if is_seed_input(name, cf):
            note(Dependency(str(node_id), ct, "seed", name))
        depth, size = value_shape(v)
        if depth > MAX_VALUE_DEPTH:
            raise too_deep_error(f"{path}:{name}")
        put(f"{path}:{name}", v, size)
        if resolver is not None and isinstance(v, str):
            rk = (resolver, ct, name, v)
            if rk in resolved:
                ident = resolved[rk]
            else:
                ident = resolved[rk] = resolver(ct, name, v)
            if ident is not None:
                put(f"{path}:{name}@content", ident, len(ident))
    return walk


def upstream_nodes(prompt: dict, roots) -> dict:
    """Every node upstream of ``roots`` (roots included; links to missing nodes ignored) as the
    keys of a dict, found iteratively, each node and link once; GraphCycleError naming the
    nodes of a dependency cycle among them."""
    state: dict = {}            # node id -> 1 being walked, 2 done
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        path, stack = [root], [_links_of(prompt, root)]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[path.pop()] = 2
            elif state.get(nxt) == 1:   # each node of path takes an input from the next; the last from nxt
                raise cycle_error(path[path.index(nxt):])
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(_links_of(prompt, nxt))
    return state


def _links_of(prompt: dict, nid):
    inputs = prompt[nid].get("inputs") or {}
    return iter([v[0] for _, v in sorted(inputs.items()) if is_link(v) and isinstance(prompt.get(v[0]), dict)])


def _has_nan(v) -> bool:
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, float):
            if math.isnan(x):
                return True
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return False


def literal_inputs(node: dict, names: Iterable[str]) -> dict:
    """The literal (non-link) values of the named inputs of one node."""
    inputs = node.get("inputs") or {}
    return {n: inputs[n] for n in names if n in inputs and not is_link(inputs[n])}
