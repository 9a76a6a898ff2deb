// The dry run: POST /seedreuse/check with the current API prompt, debounced, at most one
// request in flight, never for a graph without reuse nodes, and only when the prompt changed
// (or the cache may have: force). Only exports.
import { NS, host, isReuseType, noteError, state } from "./core.js";
import { publishBadges } from "./badges.js";
import { responseError } from "./errors.js";
import { redraw, reuseNodes } from "./graph.js";
import { graphSignature } from "./signature.js";

export const CHECK_DEBOUNCE_MS = 1500;

// Called after each dry-run answer (the entry module adds the timelines' re-render): a callback,
// so this module imports none of the modules that schedule checks (no import cycle).
const answerListeners = [];

export function onCheckAnswer(fn) {
  if (typeof fn === "function" && !answerListeners.includes(fn)) answerListeners.push(fn);
}

function answered() {
  for (const fn of answerListeners) {
    try {
      fn();
    } catch (e) {
      noteError("check answer listener", e);
    }
  }
}

export function cancelCheck() {
  if (state.pendingCheck) clearTimeout(state.pendingCheck);
  state.pendingCheck = null;
}

export function scheduleCheck(delay = CHECK_DEBOUNCE_MS, force = false) {
  if (!state.active) return; // no reuse nodes: nothing to check, no timer
  if (force) state.force = true;
  cancelCheck();
  state.pendingCheck = setTimeout(() => {
    state.pendingCheck = null;
    runCheck().catch((e) => noteError("check", e));
  }, delay);
}

function entriesOf(answer) {
  const dry = {};
  for (const [id, v] of Object.entries((answer && answer.nodes) || {})) dry[id] = { kind: "slot", ...v };
  for (const [id, v] of Object.entries((answer && answer.segments) || {})) dry[id] = { ...v, kind: "segments" };
  return dry;
}

export async function runCheck() {
  if (state.inFlight) {
    state.rerun = true;
    return;
  }
  if (!reuseNodes().length) return;
  state.inFlight = true;
  NS.checkState = "running";
  try {
    NS.work.prompts++;
    const p = await host.app.graphToPrompt();
    const output = p && p.output ? p.output : {};
    if (!Object.values(output).some((n) => isReuseType(n && n.class_type))) {
      state.dryStale = false; // every reuse node is bypassed: nothing to predict
      return;
    }
    const body = JSON.stringify({ prompt: output });
    const force = state.force;
    state.force = false;
    if (!force && body === state.lastSentJson) return;
    const sigAtSend = graphSignature();
    const sentAt = Date.now();
    NS.work.posts++;
    const res = await host.api.fetchApi("/seedreuse/check", {
      method: "POST", headers: { "Content-Type": "application/json" }, body,
    });
    let answer = null;
    try {
      answer = await res.json();
    } catch (_) { /* not JSON */ }
    if (!res.ok) {
      state.checkError = responseError(res.status, answer);
      state.dry = {};
    } else {
      state.checkError = null;
      state.dry = entriesOf(answer);
      NS.lastCheck = { at: Date.now(), answer, sig: sigAtSend };
    }
    state.lastSentJson = body;
    if (sentAt >= state.runEndedAt) state.dryStale = false; // asked after the last run ended
    NS.checks = (NS.checks || 0) + 1;
    publishBadges();
    answered();
    redraw();
  } finally {
    state.inFlight = false;
    NS.checkState = "idle";
    if (state.rerun) {
      state.rerun = false;
      scheduleCheck(50);
    }
  }
}

// Test/inspection: check now, even if the prompt is unchanged.
export async function checkNow() {
  state.force = true;
  for (let i = 0; state.inFlight && i < 600; i++) await new Promise((r) => setTimeout(r, 50));
  await runCheck();
  return NS.lastCheck || null;
}
