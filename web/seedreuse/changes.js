// Graph changes, driven by the host's change events only (no polling):
//   - api "graphChanged" (the workflow's change tracker, after user edits),
//   - graph.onAfterChange (links, paste, delete), node onConnectionsChange / onRemoved,
//   - widget callbacks (also programmatic value changes), nodeCreated, afterConfigureGraph.
// Every hook calls notifyChange(); the notifications of one task are coalesced into one pass
// that compares a signature of the graph with the last one. In a graph without reuse nodes
// a pass stops at finding none and nothing else runs (no signature, no timer, no request).
// Only exports.
import { NS, TIMELINE_WIDGET, guard, isPackType, noteError, state, typeOf } from "./core.js";
import { publishBadges } from "./badges.js";
import { CHECK_DEBOUNCE_MS, cancelCheck, scheduleCheck } from "./dry_run_client.js";
import { hasReuseNodes, redraw } from "./graph.js";
import { graphSignature as signatureOf } from "./signature.js";

const HOOKED = "__seedreuseHook";
let queued = false;

// A widget's callback runs on every value change (UI or code): wrap it once, keep the original.
function watchWidget(w) {
  if (!w || w.name === TIMELINE_WIDGET) return;
  const cb = w.callback;
  if (cb && cb[HOOKED]) return;
  try {
    const ours = function (...args) {
      const r = cb ? cb.apply(this, args) : undefined;
      notifyChange("widget");
      return r;
    };
    ours[HOOKED] = true;
    w.callback = ours;
  } catch (e) {
    noteError("watch widget", e);
  }
}

function watchNode(n) {
  if (n[HOOKED]) return;
  n[HOOKED] = true;
  const original = n.onConnectionsChange; // instance property over the (chained) prototype's
  n.onConnectionsChange = function (...args) {
    const r = original ? original.apply(this, args) : undefined;
    notifyChange("connections");
    return r;
  };
}

function watchGraph(g) {
  if (!g || g[HOOKED]) return;
  g[HOOKED] = true;
  const original = g.onAfterChange;
  g.onAfterChange = function (...args) {
    const r = original ? original.apply(this, args) : undefined;
    notifyChange("afterChange");
    return r;
  };
}

// The graph signature (signature.js), hooking every node, widget and graph it visits (the graph
// has reuse nodes when this runs).
const WATCH = { graph: watchGraph, node: watchNode, widget: watchWidget };

export function graphSignature() {
  return signatureOf(WATCH);
}

function deactivate() {
  state.active = false;
  cancelCheck();
  state.dry = {};
  state.run = {};
  state.lastSig = null;
  state.lastSentJson = null;
  NS.badges = {};
  NS.badgeDetails = {};
}

// Re-reads whether the graph has reuse nodes; returns state.active.
export function refreshActive() {
  if (hasReuseNodes()) state.active = true;
  else if (state.active || state.lastSig !== null) deactivate();
  return state.active;
}

// Records the current signature as seen (after a change the extension made itself).
export function syncSignature() {
  if (state.active) state.lastSig = graphSignature();
  return state.lastSig;
}

function processChange() {
  NS.work.changes++;
  if (!refreshActive()) return;
  const sig = graphSignature();
  if (sig === state.lastSig) return;
  state.lastSig = sig;
  publishBadges();
  redraw();
  scheduleCheck(CHECK_DEBOUNCE_MS);
}

const processGuarded = guard("graph change", processChange);

export function notifyChange(_source) {
  if (queued) return;
  queued = true;
  queueMicrotask(() => {
    queued = false;
    processGuarded();
  });
}

// nodeCreated: a node of the pack may make the graph active; any node changes an active graph.
export function onNodeCreated(node) {
  if (state.active || isPackType(typeOf(node))) notifyChange("nodeCreated");
}

// graphChanged and other host-wide events matter only while the graph has reuse nodes.
export function onHostChange() {
  if (state.active) notifyChange("graphChanged");
}

// A workflow was loaded (or the graph configured): start over from the new graph.
export function onGraphConfigured() {
  state.run = {};
  state.dry = {};
  state.lastSig = null;
  state.running = null;
  state.dryStale = false;
  if (!refreshActive()) return;
  syncSignature();
  publishBadges();
  scheduleCheck(300, true);
}
