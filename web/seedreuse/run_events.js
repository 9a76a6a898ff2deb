// What happened in a run, from the pack's websocket events ("seedreuse.slot",
// "seedreuse.segments", "seedreuse.merge") and the host's execution_* events. Only exports.
import { NS, state } from "./core.js";
import { publishBadges, runText } from "./badges.js";
import { syncSignature } from "./changes.js";
import { scheduleCheck } from "./dry_run_client.js";
import { redraw } from "./graph.js";
import { toastExecutionError } from "./toasts.js";

function record(type, data) {
  NS.events.push({ type, data });
}

// The signature the run result belongs to: the graph as it is now (null without reuse nodes,
// e.g. the prompt came from another workflow tab).
function currentSig() {
  return syncSignature();
}

export function onSlotEvent(ev) {
  const p = ev && ev.detail;
  if (!p || p.node === undefined || p.node === null) return;
  const key = String(p.node);
  state.run[key] = {
    text: runText(p), tone: p.action === "reused" ? "reused" : "encoded", sig: currentSig(),
    at: Date.now(), payload: p,
  };
  record("seedreuse.slot", p);
  publishBadges();
  redraw();
}

export function segmentRunText(p, done) {
  const S = p.segments;
  const kept = p.kept || 0;
  if (done) return kept ? `kept ${kept}/${S} · generated ${S - kept}` : `generated ${S} segment${S === 1 ? "" : "s"}`;
  return kept ? `keeping ${kept}/${S} · generating ${S - kept}…` : `generating ${S} segment${S === 1 ? "" : "s"}…`;
}

export function onSegmentsEvent(ev) {
  const p = ev && ev.detail;
  if (!p || p.node === undefined || p.node === null) return;
  const key = String(p.node);
  state.run[key] = { text: segmentRunText(p, false), tone: "encode", sig: currentSig(), at: Date.now(), payload: p };
  (state.segRuns[p.prompt_id] = state.segRuns[p.prompt_id] || []).push(key);
  record("seedreuse.segments", p);
  publishBadges();
  redraw();
}

export function onMergeEvent(ev) {
  record("seedreuse.merge", ev && ev.detail);
}

export function onExecutionEnd(ev, ok) {
  const d = ev && ev.detail;
  const pid = d && d.prompt_id;
  const keys = state.segRuns[pid] || [];
  delete state.segRuns[pid];
  if (!state.active && !keys.length) return; // nothing of ours in this graph
  for (const key of keys) {
    const r = state.run[key];
    if (!r) continue;
    if (ok) {
      r.text = segmentRunText(r.payload, true);
      r.tone = r.payload.kept ? "reused" : "encoded";
    } else {
      r.text = "run failed";
      r.tone = "fail";
    }
    r.sig = currentSig();
  }
  publishBadges();
  redraw();
  scheduleCheck(250, true); // the cache may have changed
}

export function onExecutionError(ev) {
  NS.lastExecutionError = ev && ev.detail;
  toastExecutionError(ev && ev.detail);
  onExecutionEnd(ev, false);
}
