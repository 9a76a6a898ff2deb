// "Make this workflow reusable": a canvas menu entry that sends the current graph to
// POST /seedreuse/instrument (reuse_backend/workflow), loads the instrumented workflow it
// returns (a SeedReuse Session and Encode-or-Reuse nodes after every seed-independent encoder
// output, inside subgraphs too) and shows the report: what was wrapped, what was not and why.
// Running it again changes nothing. Only exports (the entry module adds the menu item).
import { NS, host, noteError } from "./core.js";
import { errorLines, errorTitle, requestJson } from "./errors.js";
import { activeWorkflow, captureWorkflowState } from "./graph.js";
import { showToast } from "./toasts.js";

export const INSTRUMENT_LABEL = "SeedReuse: make this workflow reusable";

function workflowName() {
  const wf = activeWorkflow();
  const name = (wf && (wf.filename || wf.path || wf.key)) || null;
  // the frontend's default name is shared by every new workflow: the server derives one from the graph
  return name && !/^Unsaved Workflow/.test(name) ? name : null;
}

export function reportLines(report) {
  const lines = [];
  const s = report.session || {};
  if (report.changed) {
    lines.push(`cache "${report.cache_name}"; session node ${s.node}${s.created ? " (new)" : ""}` +
      (s.threaded_into && s.threaded_into.length ? `, brought into ${s.threaded_into.join(", ")}` : ""));
  } else {
    lines.push(`nothing to change (cache "${report.cache_name}")`);
  }
  for (const w of report.wrapped || []) {
    const p = w.producer || {};
    lines.push(`wrapped ${w.slot} (${w.type}) after ${p.class_type} ${p.node}`);
    if (w.note) lines.push(`  note: ${w.note}`);
  }
  if ((report.already_wrapped || []).length) lines.push(`already wrapped: ${report.already_wrapped.join(", ")}`);
  for (const n of report.not_wrapped || []) lines.push(`not wrapped: ${n.class_type} ${n.node}: ${n.reason}`);
  return lines;
}

function notify(report) {
  const tm = host.app && host.app.extensionManager && host.app.extensionManager.toast;
  const summary = report.changed ? "SeedReuse: workflow made reusable" : "SeedReuse: already reusable";
  const detail = reportLines(report).join("\n");
  if (tm && typeof tm.add === "function") {
    NS.toasts.push({ summary, detail, at: Date.now() });
    tm.add({ severity: (report.not_wrapped || []).length ? "warn" : "success", summary, detail, life: 20000 });
  } else {
    showToast(summary, detail, 20000);
  }
}

// The instrumented graph replaces the current one in the same workflow (its tab and name; an
// unsaved workflow too: loading without it, or by a name, opens a new "Unsaved Workflow (2)"),
// as an edit of it: marked modified, an undo goes back to the original. Loading resets the
// tracker to the loaded graph, so its saved state and the graph before are put back, then the
// new graph is recorded as a change. Without a workflow store: a plain load.
async function applyToCurrentWorkflow(app, graphData) {
  const wf = activeWorkflow();
  const ct = wf && wf.changeTracker;
  const saved = ct ? ct.initialState : undefined;
  const before = ct ? ct.activeState : undefined;
  await app.loadGraphData(graphData, true, true, wf || null);
  if (ct && activeWorkflow() === wf && saved && before) {
    ct.initialState = saved;
    ct.activeState = before;
    captureWorkflowState();
  }
}

// Sends the graph, loads the answer; resolves to the report (or null after an error toast).
export async function instrumentCurrentGraph() {
  const app = host.app;
  const api = host.api;
  try {
    const workflow = app.graph.serialize();
    let body;
    try {
      body = await requestJson(api, "/seedreuse/instrument", { workflow, name: workflowName() });
    } catch (e) {
      if (!e.seedreuse) throw e;
      showToast(`SeedReuse: ${errorTitle(e.seedreuse)}`, errorLines(e.seedreuse).join("\n"));
      return null;
    }
    if (body.report.changed) await applyToCurrentWorkflow(app, body.workflow);
    NS.lastInstrument = body.report;
    notify(body.report);
    return body.report;
  } catch (e) {
    noteError("instrument", e);
    showToast("SeedReuse: could not instrument the workflow", String((e && e.message) || e));
    return null;
  }
}

// The extension's getCanvasMenuItems hook: one entry, separated from the host's items.
export function instrumentMenuItems() {
  return [null, { content: INSTRUMENT_LABEL, callback: () => { instrumentCurrentGraph(); } }];
}
