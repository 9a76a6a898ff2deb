// What happened in a run, from the pack's websocket events ("seedreuse.slot",
// "seedreuse.segments", "seedreuse.merge") and the host's execution_* events. While a run of
// this graph executes (queued from this page, or announced by one of the pack's events) every
// badge says "running…"; when it ends the badges show the outcome, and the dry run's
// prediction for the next run once the dry run after the run has answered. A run that failed in
// one of the pack's nodes puts what happened on that node ("failed: why" and its fix) in place of
// the prediction it had before the run. Only exports.
import { NS, guard, isReuseType, state } from "./core.js";
import { failedText, publishBadges, runText } from "./badges.js";
import { syncSignature } from "./changes.js";
import { scheduleCheck } from "./dry_run_client.js";
import { redraw } from "./graph.js";
import { executionError } from "./errors.js";
import { toastExecutionError } from "./toasts.js";

function record(type, data) {
  NS.events.push({ type, data });
}

// The signature the run result belongs to: the graph as it is now (null without reuse nodes,
// e.g. the prompt came from another workflow tab).
function currentSig() {
  return syncSignature();
}

function refresh() {
  publishBadges();
  redraw();
}

// A prompt this page queued (toasts.wrapQueue): its execution_start marks the run of this graph.
export function noteQueued(promptId) {
  state.queued.push(promptId);
  if (state.queued.length > 32) state.queued.splice(0, state.queued.length - 32);
  // it failed before the queue reply came (a node that fails at once): its outcome once the
  // queueing is over (the frontend changes widgets after the reply: control_after_generate), so it
  // belongs to the graph as the user then sees it
  const failed = state.failed;
  if (failed && failed.prompt_id != null && String(failed.prompt_id) === promptId) {
    setTimeout(guard("failure after queueing", () => {
      if (state.failed === failed && showFailure(failed)) refresh();
    }), 0);
  }
  // the start came before the queue reply (and the run is not over yet)
  if (state.lastStarted === promptId && state.lastEnded !== promptId) startRun(promptId);
}

function startRun(promptId) {
  if (!promptId || state.running === promptId || !state.active) return;
  state.running = promptId;
  refresh();
}

export function onExecutionStart(ev) {
  const pid = ev && ev.detail && ev.detail.prompt_id;
  if (!pid) return;
  state.lastStarted = String(pid);
  if (state.queued.includes(String(pid))) startRun(String(pid));
}

export function onSlotEvent(ev) {
  const p = ev && ev.detail;
  if (!p || p.node === undefined || p.node === null) return;
  const key = String(p.node);
  state.run[key] = {
    text: runText(p), tone: p.action === "reused" ? "reused" : "encoded", sig: currentSig(),
    at: Date.now(), payload: p, prompt: p.prompt_id || null,
  };
  record("seedreuse.slot", p);
  if (p.prompt_id) startRun(String(p.prompt_id));
  refresh();
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
  state.run[key] = { text: segmentRunText(p, false), tone: "encode", sig: currentSig(), at: Date.now(), payload: p,
    prompt: p.prompt_id || null };
  (state.segRuns[p.prompt_id] = state.segRuns[p.prompt_id] || []).push(key);
  record("seedreuse.segments", p);
  if (p.prompt_id) startRun(String(p.prompt_id));
  refresh();
}

export function onMergeEvent(ev) {
  record("seedreuse.merge", ev && ev.detail);
}

// The outcome on the node a run of this page failed in (execution_error `d`), when it is one of the
// pack's reuse nodes: "failed: why" from the structured error (or the host's exception message),
// its fix. A failure that comes before the queue reply names a prompt not known yet: noteQueued
// shows it then (state.failed). True when shown.
function showFailure(d) {
  const pid = d && d.prompt_id != null ? String(d.prompt_id) : null;
  if (!d || d.node_id == null || pid === null || !state.queued.includes(pid)) return false;
  if (!isReuseType(String(d.node_type || ""))) return false;
  const err = executionError(d) || { type: String(d.exception_type || "error").split(".").pop(),
    message: String(d.exception_message || "").split("\n")[0], fix: null, details: {} };
  state.run[String(d.node_id)] = { text: failedText(err, "the node raised an error"), tone: "fail", error: err,
    fix: err.fix || null, at: Date.now(), payload: null, prompt: pid, sig: currentSig() };
  state.failed = null;
  return true;
}

export function onExecutionEnd(ev, ok, how) {
  const d = ev && ev.detail;
  const pid = d && d.prompt_id != null ? String(d.prompt_id) : null;
  const keys = state.segRuns[pid] || [];
  delete state.segRuns[pid];
  state.lastEnded = pid;
  const ours = pid !== null && state.running === pid;
  if (!state.active && !keys.length && !ours) return; // nothing of ours in this graph
  if (ours) state.running = null;
  for (const [key, r] of Object.entries(state.run)) {
    if (!r || (r.prompt !== pid && !keys.includes(key))) continue;
    if (ok) {
      if (keys.includes(key)) {
        r.text = segmentRunText(r.payload, true);
        r.tone = r.payload.kept ? "reused" : "encoded";
      }
    } else {
      // nothing of a failed or interrupted run is published: its results are not what the cache holds
      r.text = how === "interrupted" ? "run interrupted" : "run failed";
      r.tone = "fail";
    }
    r.sig = currentSig();
  }
  if (how === "failed") {
    state.failed = d;
    showFailure(d);
  }
  state.runEndedAt = Date.now();
  state.dryStale = true; // the cache may have changed: "next: checking…" until the dry run answers
  refresh();
  scheduleCheck(250, true);
}

export function onExecutionError(ev) {
  NS.lastExecutionError = ev && ev.detail;
  toastExecutionError(ev && ev.detail);
  onExecutionEnd(ev, false, "failed");
}
