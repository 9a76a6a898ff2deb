"""UI-format (LiteGraph) workflows: the graphs of a file and their subgraphs, flattened.

A UI workflow is a root graph (``nodes``, ``links``, ``last_node_id`` / ``last_link_id`` or
``state``) plus ``definitions.subgraphs``: graphs of their own (links as objects, ``inputs`` /
``outputs`` with ``linkIds``, ``state``) whose id is the ``type`` of the nodes that instantiate
them. Inside a subgraph, origin id -10 is its input node (``origin_slot`` indexes its
``inputs``) and target id -20 its output node. ``expand()`` walks every instance (iteratively,
bounded by limits.MAX_SUBGRAPH_DEPTH / MAX_FLAT_NODES) and ``Resolver.resolve`` follows a link
through subgraph boundaries, reroutes and bypassed nodes to the node that computes the value,
whose flattened id is the frontend's: instance ids and the node id joined by ':'.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import limits

SUBGRAPH_IN, SUBGRAPH_OUT = -10, -20
FRONTEND_ONLY = frozenset({"Note", "MarkdownNote", "Reroute", "PrimitiveNode", "Label (rgthree)"})
MUTED, BYPASSED = 2, 4


def _bad(msg: str, actual, fix: str = "send a workflow the ComfyUI canvas saved (File > Save)"):
    return limits.invalid(f"not a UI-format workflow: {msg}", expected="a LiteGraph workflow "
                          "(nodes, links, optional definitions.subgraphs)", actual=actual, fix=fix)


@dataclass
class Link:
    id: object
    origin_id: object
    origin_slot: int
    target_id: object
    target_slot: int
    type: object
    raw: object          # the list or dict in the file (edited in place)

    def set_origin(self, node_id, slot: int) -> None:
        self.origin_id, self.origin_slot = node_id, slot
        if isinstance(self.raw, list):
            self.raw[1], self.raw[2] = node_id, slot
        else:
            self.raw["origin_id"], self.raw["origin_slot"] = node_id, slot


def _link(raw, where: str) -> Link:
    if isinstance(raw, list) and len(raw) >= 5:
        vals = raw[:6] + [None] * (6 - len(raw[:6]))
    elif isinstance(raw, dict):
        vals = [raw.get(k) for k in ("id", "origin_id", "origin_slot", "target_id", "target_slot", "type")]
    else:
        raise _bad(f"a link in {where} is neither [id, origin, slot, target, slot, type] nor an object",
                   type(raw).__name__)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (vals[0], vals[2], vals[4])) \
            or not all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in (vals[1], vals[3])):
        raise _bad(f"link {str(vals[0])[:40]} in {where} has a non-integer id or slot", repr(raw)[:120])
    return Link(*vals, raw=raw)


class Graph:
    """One graph of the file (the root or a subgraph definition), indexed."""

    def __init__(self, doc: dict, sub_id: str | None):
        self.doc = doc
        self.id = sub_id
        where = "the root graph" if sub_id is None else f"subgraph {sub_id}"
        nodes = doc.get("nodes")
        links = doc.get("links") if doc.get("links") is not None else []
        if not isinstance(nodes, list) or not isinstance(links, list):
            raise _bad(f"{where} has no nodes/links lists", type(nodes).__name__)
        self.nodes: dict = {}
        for n in nodes:
            if not isinstance(n, dict) or not isinstance(n.get("type"), str) or \
                    not isinstance(n.get("id"), (int, str)) or isinstance(n.get("id"), bool):
                raise _bad(f"a node in {where} has no id or type", repr(n)[:120])
            for k in ("inputs", "outputs"):
                if n.get(k) is not None and not (isinstance(n[k], list) and all(isinstance(s, dict) for s in n[k])):
                    raise _bad(f"node {n['id']} in {where}: {k} is not a list of slots", repr(n[k])[:120])
            if n["id"] in self.nodes:
                raise _bad(f"node id {n['id']} appears twice in {where}", n["id"])
            self.nodes[n["id"]] = n
        self.links: dict = {}
        for raw in links:
            lk = _link(raw, where)
            self.links[lk.id] = lk
        self.array_links = bool(links) and isinstance(links[0], list) or (not links and sub_id is None
                                                                           and "state" not in doc)

    def io(self, side: str) -> list:
        v = self.doc.get(side)
        return v if isinstance(v, list) else []


@dataclass
class Ctx:
    """One instance of a graph in the expansion: the root, or a subgraph instance."""
    graph: Graph
    prefix: tuple
    parent: "Ctx | None" = None
    instance: dict | None = None
    children: dict = field(default_factory=dict)   # instance node id -> Ctx

    def key(self, node_id) -> str:
        return ":".join(str(x) for x in self.prefix + (node_id,))


class Workflow:
    def __init__(self, doc: dict):
        if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
            raise _bad("no 'nodes' list", type(doc).__name__)
        self.doc = doc
        self.root = Graph(doc, None)
        defs = (doc.get("definitions") or {}).get("subgraphs") if isinstance(doc.get("definitions"), dict) else None
        self.subgraphs: dict = {}
        for s in defs or []:
            if not isinstance(s, dict) or not isinstance(s.get("id"), str):
                raise _bad("a subgraph definition has no id", repr(s)[:120])
            self.subgraphs[s["id"]] = Graph(s, s["id"])
        graphs = [self.root, *self.subgraphs.values()]
        limits.check_counts(sum(len(g.nodes) for g in graphs), sum(len(g.links) for g in graphs))

    def graphs(self) -> list:
        return [self.root, *self.subgraphs.values()]

    def expand(self) -> list:
        """Every Ctx, parents first; bounded depth and expanded size."""
        top = Ctx(self.root, ())
        out, stack, total = [], [top], 0
        while stack:
            ctx = stack.pop()
            out.append(ctx)
            total += len(ctx.graph.nodes)
            if total > limits.MAX_FLAT_NODES:
                raise limits.too_large("nodes once subgraphs are expanded", limits.MAX_FLAT_NODES, f"> {total}")
            if len(ctx.prefix) > limits.MAX_SUBGRAPH_DEPTH:
                raise limits.too_large("levels of subgraphs", limits.MAX_SUBGRAPH_DEPTH,
                                       f"{len(ctx.prefix)} levels (or a subgraph that contains itself)")
            for nid, n in ctx.graph.nodes.items():
                sub = self.subgraphs.get(n["type"])
                if sub is not None and n.get("mode", 0) not in (MUTED, BYPASSED):
                    child = Ctx(sub, ctx.prefix + (nid,), ctx, n)
                    ctx.children[nid] = child
                    stack.append(child)
        return out


def input_slot(node: dict, name: str) -> dict | None:
    for s in node.get("inputs") or []:
        if s.get("name") == name:
            return s
    return None


class Resolver:
    """Follows links to the computing node: ('link', ctx, node, slot), ('value', v) (a subgraph
    input's value), ('value', v, primitive key) (a PrimitiveNode's) or None."""

    def __init__(self, wf: Workflow):
        self.wf = wf

    def resolve(self, ctx: Ctx, link_id):
        for _ in range(limits.MAX_FLAT_NODES):
            lk = ctx.graph.links.get(link_id)
            if lk is None:
                return None
            if lk.origin_id == SUBGRAPH_IN:
                ins = ctx.graph.io("inputs")
                if ctx.instance is None or not 0 <= lk.origin_slot < len(ins):
                    return None
                slot = input_slot(ctx.instance, ins[lk.origin_slot].get("name"))
                if slot is None or slot.get("link") is None:
                    return None                      # the inner widget's own value stands
                ctx, link_id = ctx.parent, slot["link"]
                continue
            node = ctx.graph.nodes.get(lk.origin_id)
            if node is None:
                return None
            t = node["type"]
            if t == "Reroute":
                ins = node.get("inputs") or [{}]
                if ins[0].get("link") is None:
                    return None
                link_id = ins[0]["link"]
                continue
            if t == "PrimitiveNode":        # its value, and which primitive gave it
                vals = node.get("widgets_values")
                return ("value", vals[0], ctx.key(node["id"])) if isinstance(vals, list) and vals else None
            if t in FRONTEND_ONLY or node.get("mode", 0) == MUTED:
                return None
            if node.get("mode", 0) == BYPASSED:
                link_id = self._bypass(node, lk.origin_slot)
                if link_id is None:
                    return None
                continue
            child = ctx.children.get(node["id"])
            if child is not None:
                outs = child.graph.io("outputs")
                ids = outs[lk.origin_slot].get("linkIds") if 0 <= lk.origin_slot < len(outs) else None
                inner = [i for i in ids or [] if (child.graph.links.get(i) or lk).target_id == SUBGRAPH_OUT]
                if not inner:
                    return None
                ctx, link_id = child, inner[0]
                continue
            return ("link", ctx, node, lk.origin_slot)
        raise limits.too_large("link hops", limits.MAX_FLAT_NODES, "a reroute or subgraph chain that never ends")

    @staticmethod
    def _bypass(node: dict, slot: int):
        outs = node.get("outputs") or []
        want = outs[slot].get("type") if 0 <= slot < len(outs) else None
        for s in node.get("inputs") or []:
            if s.get("link") is not None and s.get("type") == want:
                return s["link"]
        return None


def computing_nodes(wf: Workflow, ctxs: list):
    """(ctx, node) for every node that runs on the server (not frontend-only, muted, bypassed,
    nor a subgraph instance, whose inner nodes are listed instead)."""
    for ctx in ctxs:
        for nid, n in ctx.graph.nodes.items():
            if n["type"] in FRONTEND_ONLY or n.get("mode", 0) in (MUTED, BYPASSED) or n["type"] in wf.subgraphs:
                continue
            yield ctx, n
