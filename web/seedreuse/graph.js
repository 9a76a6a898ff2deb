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

// A node's input node; null when there is none or the node is not in a graph yet (newer
// frontends throw for a node that is still being created).
function inputNode(node, slot) {
  if (!node || !node.graph || typeof node.getInputNode !== "function") return null;
  try {
    return node.getInputNode(slot);
  } catch (_) {
    return null;
  }
}

export function sessionNodeOf(node) {
  const idx = (node.inputs || []).findIndex((i) => i.name === "session");
  if (idx < 0) return null;
  let cur = inputNode(node, idx);
  for (let hops = 0; cur && hops < 16; hops++) {
    if (typeOf(cur) === SESSION_TYPE) return cur;
    const next = (cur.inputs || []).findIndex((i) => i.link != null);
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
