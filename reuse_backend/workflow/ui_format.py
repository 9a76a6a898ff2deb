"""Instrumenting a UI-format workflow: its flattened view for ``analysis.plan`` and the edit.

The edit inserts each wrapper in the graph (root or subgraph definition) that holds the
producer, moves every link of the wrapped output onto the wrapper's output, and brings the
Session there: the root's Session node (created once), and for a subgraph a
``seedreuse_session`` input on the definition, linked from its instance in the parent graph
(recursively). Node and link ids come from one counter over the whole file, as the frontend
keeps them: above ``last_node_id`` / ``last_link_id`` (or ``state``) of the root, every
subgraph's ``state`` and every id in use; all of those are advanced afterwards.
"""
from __future__ import annotations

import uuid
from collections import Counter

from . import node_types as nt
from .analysis import FlatNode
from .placement import TITLE_H, Canvas, node_box
from .ui_graph import SUBGRAPH_IN, Ctx, Resolver, Workflow, _link, computing_nodes

SESSION_INPUT = "seedreuse_session"
WRAP_SIZE = [340.0, 100.0]
SESSION_SIZE = [340.0, 130.0]


def _declared(info: dict | None, class_type: str) -> list:
    schema = (info or {}).get(class_type)
    inp = schema.get("input") if isinstance(schema, dict) else None
    if not isinstance(inp, dict):
        return []
    return [k for sec in ("required", "optional") for k in (inp.get(sec) or {})]


def flat_nodes(wf: Workflow, ctxs: list, info: dict | None = None) -> dict:
    uses = Counter(ctx.graph.id for ctx in ctxs)
    res = Resolver(wf)
    out = {}
    for ctx, n in computing_nodes(wf, ctxs):
        fn = FlatNode(key=ctx.key(n["id"]), class_type=n["type"], title=str(n.get("title") or ""))
        for s in n.get("inputs") or []:
            name = s.get("name")
            if not isinstance(name, str):
                continue
            r = res.resolve(ctx, s["link"]) if s.get("link") is not None else None
            if r is None or r[0] == "value":
                if "widget" in s or r is not None:
                    fn.literal_names.add(name)
                if r is not None and len(r) > 2:
                    fn.literal_sources[name] = r[2]
                continue
            _, sctx, snode, slot = r
            fn.links[name] = (sctx.key(snode["id"]), slot)
            outs = snode.get("outputs") or []
            t = outs[slot].get("type") if 0 <= slot < len(outs) else None
            if isinstance(t, str):
                fn.in_types[name] = t
        fn.literal_names |= {k for k in _declared(info, n["type"]) if k not in fn.links}
        outs = n.get("outputs") or []
        fn.out_types = [o.get("type") if isinstance(o.get("type"), str) else None for o in outs]
        fn.out_names = [str(o.get("name") or "") for o in outs]
        vals = n.get("widgets_values")
        if nt.is_wrapper(n["type"]) and isinstance(vals, list) and vals:
            fn.slot_literal = vals[0]
        if uses[ctx.graph.id] == 1:
            fn.place = (ctx.graph.id, n["id"])
        else:
            name = ctx.graph.doc.get("name") or ctx.graph.id
            fn.place_problem = (f"inside subgraph '{name}', which {uses[ctx.graph.id]} nodes instantiate: one "
                                "wrapper there would give every instance the same slot; unpack or duplicate "
                                "the subgraph per instance and run the action again")
        out[fn.key] = fn
    return out


def subgraph_label(g) -> str:
    """A subgraph definition named unambiguously: its display name and its definition id (two
    definitions may share a display name, e.g. a template's two copies of one subgraph)."""
    name = g.doc.get("name")
    return f"{name} (subgraph {g.id})" if isinstance(name, str) and name.strip() and name != g.id \
        else f"subgraph {g.id}"


class Ids:
    """The file's one node-id and link-id counter."""

    def __init__(self, wf: Workflow):
        self.wf = wf
        doc = wf.doc
        nodes = [doc.get("last_node_id"), (doc.get("state") or {}).get("lastNodeId")]
        links = [doc.get("last_link_id"), (doc.get("state") or {}).get("lastLinkId")]
        for g in wf.graphs():
            st = g.doc.get("state") if isinstance(g.doc.get("state"), dict) else {}
            nodes += [st.get("lastNodeId"), *g.nodes]
            links += [st.get("lastLinkId"), *g.links]
        self.node = max([v for v in nodes if isinstance(v, int) and not isinstance(v, bool)] + [0])
        self.link = max([v for v in links if isinstance(v, int) and not isinstance(v, bool)] + [0])
        self.used = False

    def new_node(self) -> int:
        self.node += 1
        self.used = True
        return self.node

    def new_link(self) -> int:
        self.link += 1
        self.used = True
        return self.link

    def commit(self) -> None:
        if not self.used:
            return
        doc = self.wf.doc
        if "last_node_id" in doc or "state" not in doc:
            doc["last_node_id"], doc["last_link_id"] = self.node, self.link
        for g in self.wf.graphs():
            st = g.doc.get("state")
            if isinstance(st, dict):
                st["lastNodeId"] = max(self.node, st.get("lastNodeId") or 0)
                st["lastLinkId"] = max(self.link, st.get("lastLinkId") or 0)


class Editor:
    def __init__(self, wf: Workflow, ctxs: list, cache_name: str):
        self.wf = wf
        self.ids = Ids(wf)
        self.cache_name = cache_name
        self.ctx_of = {ctx.graph.id: ctx for ctx in ctxs}     # single-use graphs only are edited
        self.sources: dict = {}
        self.session = {"node": None, "created": False, "threaded_into": []}
        self.canvases: dict = {}                              # graph id -> its free space (placement.py)

    def canvas(self, g) -> Canvas:
        if g.id not in self.canvases:
            self.canvases[g.id] = Canvas(g.doc)
        return self.canvases[g.id]

    # ------------------------------------------------------------ links
    def add_link(self, g, origin, oslot: int, target, tslot: int, typ) -> int:
        lid = self.ids.new_link()
        raw = [lid, origin, oslot, target, tslot, typ] if g.array_links else \
            {"id": lid, "origin_id": origin, "origin_slot": oslot, "target_id": target, "target_slot": tslot,
             "type": typ}
        g.doc.setdefault("links", []).append(raw)
        g.links[lid] = _link(raw, "the new link")
        if origin == SUBGRAPH_IN:
            g.io("inputs")[oslot].setdefault("linkIds", []).append(lid)
        else:
            out = g.nodes[origin]["outputs"][oslot]
            out["links"] = [*(out.get("links") or []), lid]
        return lid

    def add_node(self, g, node: dict) -> dict:
        node["order"] = len(g.nodes)
        g.doc["nodes"].append(node)
        g.nodes[node["id"]] = node
        return node

    # ------------------------------------------------------------ session
    def session_source(self, gid):
        if gid in self.sources:
            return self.sources[gid]
        ctx: Ctx = self.ctx_of[gid]
        g = ctx.graph
        src = None
        for nid, n in g.nodes.items():
            if n["type"] == nt.SESSION and n.get("mode", 0) == 0:
                src = (nid, 0)
                if gid is None:
                    self.session["node"] = nid
                break
        if src is None and gid is not None:
            ins = g.io("inputs")
            for i, s in enumerate(ins):
                if s.get("type") == nt.SESSION_TYPE:
                    src = (SUBGRAPH_IN, i)
                    break
        if src is None and gid is None:
            src = (self._new_session(g), 0)
        elif src is None:
            src = self._thread(ctx)
        self.sources[gid] = src
        return src

    def _new_session(self, g) -> int:
        nid = self.ids.new_node()
        widget = [{"localized_name": k, "name": k, "type": t, "widget": {"name": k}, "link": None}
                  for k, t in (("cache_name", "STRING"), ("reuse", "COMBO"), ("reuse_prefix_segments", "INT"))]
        self.add_node(g, {"id": nid, "type": nt.SESSION, "pos": self.canvas(g).above(SESSION_SIZE),
                          "size": list(SESSION_SIZE), "flags": {}, "mode": 0, "inputs": widget,
                          "outputs": [{"localized_name": "session", "name": "session", "type": nt.SESSION_TYPE,
                                       "links": []}],
                          "title": "SeedReuse Session", "properties": {"Node name for S&R": nt.SESSION},
                          "widgets_values": [self.cache_name, "auto", 0], "color": "#233", "bgcolor": "#355"})
        self.session.update(node=nid, created=True)
        return nid

    def _thread(self, ctx: Ctx):
        """A new session input on the subgraph, linked from its instance in the parent graph."""
        g = ctx.graph
        ins = g.doc.setdefault("inputs", [])
        box = (g.doc.get("inputNode") or {}).get("bounding") or [0, 0, 120, 60]
        ins.append({"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"seedreuse:{g.id}:{SESSION_INPUT}")),
                    "name": SESSION_INPUT, "type": nt.SESSION_TYPE, "linkIds": [],
                    "pos": [box[0] + box[2] - 20, box[1] + 20 + 20 * len(ins)]})
        parent_src = self.session_source(ctx.parent.graph.id)
        inst = ctx.instance
        slots = inst.setdefault("inputs", [])
        slots.append({"label": SESSION_INPUT, "name": SESSION_INPUT, "type": nt.SESSION_TYPE, "link": None})
        slots[-1]["link"] = self.add_link(ctx.parent.graph, parent_src[0], parent_src[1], inst["id"],
                                          len(slots) - 1, nt.SESSION_TYPE)
        self.session["threaded_into"].append(subgraph_label(g))
        return (SUBGRAPH_IN, len(ins) - 1)

    # ------------------------------------------------------------ wrappers
    def wrap(self, w, k: int) -> int:
        gid, pid = w.place
        g = self.ctx_of[gid].graph
        prod = g.nodes[pid]
        sess = self.session_source(gid)
        moved = [lk for lk in g.links.values() if lk.origin_id == pid and lk.origin_slot == w.slot]
        nid = self.ids.new_node()
        box = node_box(prod) or (0.0, 0.0, 300.0, 0.0)           # right of its producer, on free canvas
        want = (box[0] + box[2] + 40.0, box[1] + TITLE_H + 120.0 * k)
        self.add_node(g, {
            "id": nid, "type": w.variant, "pos": self.canvas(g).place(*want, WRAP_SIZE),
            "size": list(WRAP_SIZE), "flags": {}, "mode": 0,
            "inputs": [{"localized_name": "session", "name": "session", "type": nt.SESSION_TYPE, "link": None},
                       {"localized_name": "value", "name": "value", "type": w.type, "link": None},
                       {"localized_name": "slot", "name": "slot", "type": "STRING", "widget": {"name": "slot"},
                        "link": None}],
            "outputs": [{"localized_name": "value", "name": "value", "type": w.type,
                         "links": [lk.id for lk in moved]},
                        {"localized_name": "status", "name": "status", "type": "STRING", "links": None}],
            "title": f"Encode or Reuse: {w.name}", "properties": {"Node name for S&R": w.variant},
            "widgets_values": [w.name], "color": "#233", "bgcolor": "#355"})
        out = prod["outputs"][w.slot]
        out["links"] = [i for i in (out.get("links") or []) if i not in {lk.id for lk in moved}]
        for lk in moved:
            lk.set_origin(nid, 0)
        node = g.nodes[nid]
        node["inputs"][0]["link"] = self.add_link(g, sess[0], sess[1], nid, 0, nt.SESSION_TYPE)
        node["inputs"][1]["link"] = self.add_link(g, pid, w.slot, nid, 1, w.type)
        return nid


def apply(wf: Workflow, ctxs: list, wraps: list, cache_name: str) -> tuple[list, dict]:
    """Insert the wrappers; returns (wrapper node ids in ``wraps`` order, session info)."""
    ed = Editor(wf, ctxs, cache_name)
    per_producer: Counter = Counter()
    ids = []
    for w in wraps:
        ids.append(ed.wrap(w, per_producer[w.place]))
        per_producer[w.place] += 1
    ed.ids.commit()
    return ids, ed.session
