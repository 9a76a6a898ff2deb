// Automatic mode's report (SEEDREUSE_AUTO, nodes/auto_mode.py). Once a prompt that automatic
// mode made reusable (or left unchanged with a warning) has succeeded, the server sends
// "seedreuse.auto_report" to the client that queued it: per wrapped encoder output reused /
// encoded / not run and the time saved. For a prompt this page queued it is shown as a toast
// (the host's toast service when there is one); the canvas graph is never changed. A report
// that arrives before this page's queue reply waits for it. Only exports.
import { NS, fmtSeconds, state } from "./core.js";
import { showToast } from "./toasts.js";

const KEEP = 16;
const early = new Map(); // prompt id -> a report that came before the queue reply (the last few)

function outputLine(o) {
  const what = `${o.slot} (${o.producer || "encoder"} ${o.node})`;
  if (o.action === "reused") return `${what}: reused · saved ${fmtSeconds(o.saved_seconds || 0)}`;
  if (o.action === "encoded") {
    return `${what}: encoded` + (typeof o.encode_seconds === "number" ? ` in ${fmtSeconds(o.encode_seconds)}` : "");
  }
  return `${what}: not run (ComfyUI's own cache served it, or nothing needed it)`;
}

// {summary, detail, severity} of a report (the toast's text).
export function autoReportText(r) {
  if (!r.applied) {
    return { summary: "SeedReuse (automatic): the prompt ran unchanged", detail: r.warning || r.reason || "",
      severity: "warn" };
  }
  const outs = r.outputs || [];
  const parts = [];
  if (r.reused) parts.push(`reused ${r.reused}`);
  if (r.encoded) parts.push(`encoded ${r.encoded}`);
  if (r.not_run) parts.push(`${r.not_run} from ComfyUI's own cache`);
  const n = outs.length;
  const summary = `SeedReuse (automatic): ${parts.join(", ") || "nothing"} of ${n} encoder output${n === 1 ? "" : "s"}`
    + (r.reused ? ` · saved ${fmtSeconds(r.saved_seconds || 0)}` : "");
  const detail = [...outs.map(outputLine), `cache ${r.cache}`].join("\n");
  return { summary, detail, severity: r.reused ? "success" : "info" };
}

function show(r) {
  const t = autoReportText(r);
  showToast(t.summary, t.detail, 10000, t.severity);
}

// "seedreuse.auto_report" websocket event.
export function onAutoReport(ev) {
  const r = ev && ev.detail;
  if (!r || r.prompt_id === undefined || r.prompt_id === null) return;
  const pid = String(r.prompt_id);
  NS.autoReports.push(r);
  if (NS.autoReports.length > KEEP) NS.autoReports.splice(0, NS.autoReports.length - KEEP);
  if (state.queued.includes(pid)) {
    show(r);
    return;
  }
  early.set(pid, r);
  if (early.size > KEEP) early.delete(early.keys().next().value);
}

// A prompt this page queued (toasts.wrapQueue): its report, if it came first, is shown now.
export function noteQueuedAuto(promptId) {
  const r = early.get(promptId);
  if (!r) return;
  early.delete(promptId);
  show(r);
}
