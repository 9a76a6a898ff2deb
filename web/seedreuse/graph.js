// Reading the LiteGraph graph: reuse nodes, ids, sessions, widgets. Only exports.
import { SESSION_TYPE, host, isReuseType, noteError, state, typeOf } from "./core.js";

export function graph() {
  const app = host.app;
  return app ? app.rootGraph || app.graph : null;
}

// The active workflow of the frontend's workflow store (null on a frontend without one).
export function activeWorkflow() {
  const wf = host.app && host.app.extensionManager && host.app.extensionManager.workflow;
  return (wf && wf.activeWorkflow) || null;
}

// Records the graph as it is now in the active workflow's change tracker (the unsaved-changes
// marker, undo history). captureCanvasState() is the current API (1.49.6, 1.58.1: checkState()
// there only warns that it is deprecated, then calls it); older frontends (1.32.9) have
// checkState() only.
export function captureWorkflowState() {
  const w = activeWorkflow();
  const ct = w && w.changeTracker;
  if (ct && typeof ct.captureCanvasState === "function") ct.captureCanvasState();
  else if (ct && typeof ct.checkState === "function") ct.checkState();
}

export function allGraphs() {
  const g = graph();
  if (!g) return [];
  const out = [g];
  try {
    const subs = g.subgraphs;
    if (subs && typeof subs.values === "function") for (const s of subs.values()) out.push(s);
  } catch (_) { /* older frontends: no subgraphs */ }
  return out;
}

export function nodesOf(g) {
  return (g && (g.nodes || g._nodes)) || [];
}

export function reuseNodes() {
  const out = [];
  for (const g of allGraphs()) for (const n of nodesOf(g)) if (isReuseType(typeOf(n))) out.push(n);
  return out;
}

export function hasReuseNodes() {
  for (const g of allGraphs()) for (const n of nodesOf(g)) if (isReuseType(typeOf(n))) return true;
  return false;
}

// An API-format node id ("12" or, inside subgraphs, "3:12") -> the LiteGraph node.
export function nodeById(id) {
  const g = graph();
  if (!g) return null;
  const parts = String(id).split(":");
  let cur = g;
  let node = null;
  for (let i = 0; i < parts.length; i++) {
    node = cur && cur.getNodeById ? cur.getNodeById(isNaN(+parts[i]) ? parts[i] : +parts[i]) : null;
    if (!node) return null;
    if (i < parts.length - 1) cur = node.subgraph;
  }
  return node;
}

// The registry key of a node: its id in the root graph; inside a subgraph the first known
// execution id ending with ":<id>".
export function keyOf(node) {
  const g = graph();
  if (!node) return null;
  if (!node.graph || node.graph === g) return String(node.id);
  const suffix = ":" + node.id;
  for (const k of Object.keys(state.dry).concat(Object.keys(state.run))) if (k.endsWith(suffix)) return k;
  return String(node.id);
}

export function widgetOf(node, name) {
  return node && (node.widgets || []).find((w) => w.name === name);
}

// ------------------------------------------------------------------ links
// Which link feeds a node's input, in ONE place for every frontend the pack runs on. Frontend
// 1.58 reads connectivity through the node (getInputLink); there the slot's `link` field warns
// that it is deprecated ("input.link is deprecated. Read connectivity via
// node.isInputConnected(slot) / node.getInputLink(slot)"). 1.32.9 and 1.49.6 have the same
// method (reading the field themselves). SubgraphNode overrides getInputLink (it answers for
// the subgraph's inside), so the base class's method is called. A frontend without it: the
// slot's `link` field and the graph's link table.
function baseMethod(name) {
  const N = window.LGraphNode || (window.LiteGraph && window.LiteGraph.LGraphNode);
  const f = N && N.prototype ? N.prototype[name] : null;
  return typeof f === "function" ? f : null;
}

// The link (LLink: id, origin_id, origin_slot) into input `slot`; null when none, or when the
// node is not in a graph yet (newer frontends throw for a node that is still being created).
export function inputLink(node, slot) {
  if (!node || !node.graph || !node.inputs || !(slot >= 0 && slot < node.inputs.length)) return null;
  try {
    const get = baseMethod("getInputLink");
    if (get) return get.call(node, slot) || null;
    const id = node.inputs[slot].link;
    if (id == null) return null;
    const links = node.graph.links || node.graph._links;
    return (links && (typeof links.get === "function" ? links.get(id) : links[id])) || null;
  } catch (_) {
    return null;
  }
}

export function isInputLinked(node, slot) {
  return inputLink(node, slot) !== null;
}

// A fingerprint of what feeds the input (signature.js): the link and its origin, or null.
export function inputSource(node, slot) {
  const l = inputLink(node, slot);
  return l ? `${l.id}:${l.origin_id}:${l.origin_slot}` : null;
}

// A node's input node (null when there is none).
function inputNode(node, slot) {
  const l = inputLink(node, slot);
  if (!l || !node.graph || typeof node.graph.getNodeById !== "function") return null;
  return node.graph.getNodeById(l.origin_id) || null;
}

// Pairs a widget the pack added with the node's input socket of the same name, as the frontends
// pair a node's own widgets with their sockets (the slot's `widget` names it): the node shows the
// input once, as the widget with its socket, and a link into the socket wins over the widget's
// value in the prompt (the frontend's own rule). Vue nodes read a node's slots when it joins the
// graph; the graph events the frontends send when a slot changes make them read them again:
// 1.49.6 on "node:slot-label:changed", 1.32.9 on "node:slot-links:changed" (sent here with the
// slot's link as it is); 1.58.1 renders the change by itself, and each ignores the event it has no
// use for. The frontend drops the pairing from a saved workflow whose widget is not there yet; the
// pack pairs them again when it adds the widget.
export function pairWidgetWithInput(node, name) {
  const slot = (node.inputs || []).findIndex((i) => i.name === name);
  if (slot < 0) return false;
  const input = node.inputs[slot];
  if (!input.widget || input.widget.name !== name) input.widget = { name };
  try {
    const g = node.graph;
    const INPUT = (window.LiteGraph && window.LiteGraph.INPUT) || 1;
    if (g && typeof g.trigger === "function") {
      const link = inputLink(node, slot);
      g.trigger("node:slot-label:changed", { nodeId: node.id, slotType: INPUT });
      g.trigger("node:slot-links:changed", { nodeId: node.id, slotType: INPUT, slotIndex: slot,
        connected: link !== null, linkId: link ? link.id : null });
    }
  } catch (e) {
    noteError("pair widget with input", e);
  }
  return true;
}

export function sessionNodeOf(node) {
  const idx = (node.inputs || []).findIndex((i) => i.name === "session");
  if (idx < 0) return null;
  let cur = inputNode(node, idx);
  for (let hops = 0; cur && hops < 16; hops++) {
    if (typeOf(cur) === SESSION_TYPE) return cur;
    const next = (cur.inputs || []).findIndex((_, k) => isInputLinked(cur, k));
    if (next < 0) return null; // e.g. a Reroute: follow its one input
    cur = inputNode(cur, next);
  }
  return null;
}

export function redraw() {
  try {
    const g = graph();
    if (g && g.setDirtyCanvas) g.setDirtyCanvas(true, true);
    else if (host.app && host.app.canvas) host.app.canvas.setDirty(true, true);
  } catch (e) {
    noteError("redraw", e);
  }
}
