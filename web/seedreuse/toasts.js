// Non-blocking toasts for the pack's errors: the host's toast service (PrimeVue) when there is
// one, else a small DOM toast styled by seedreuse.css. Only exports.
import { NS, host, isPackType, noteError } from "./core.js";
import { errorLines, errorTitle, executionError } from "./errors.js";

function domToast(summary, lines, life, severity) {
  let box = document.querySelector(".seedreuse-toasts");
  if (!box) {
    box = document.createElement("div");
    box.className = "seedreuse-toasts";
    document.body.appendChild(box);
  }
  const el = document.createElement("div");
  el.className = severity === "error" ? "seedreuse-toast" : "seedreuse-toast seedreuse-toast-info";
  const b = document.createElement("b");
  b.textContent = summary;
  el.appendChild(b);
  for (const line of lines) {
    const span = document.createElement("span");
    if (line.startsWith("fix: ")) span.className = "seedreuse-fix";
    span.textContent = line + "\n";
    el.appendChild(span);
  }
  el.addEventListener("click", () => el.remove());
  box.appendChild(el);
  setTimeout(() => el.remove(), life);
}

// severity: the host toast's ("error", "warn", "info", "success"); the DOM fallback draws
// "error" in the error tone and the others in the info tone.
export function showToast(summary, detail, life = 12000, severity = "error") {
  NS.toasts.push({ summary, detail, severity, at: Date.now() });
  const app = host.app;
  const tm = app && app.extensionManager && app.extensionManager.toast;
  if (tm && typeof tm.add === "function") {
    tm.add({ severity, summary, detail, life });
    return "extensionManager";
  }
  domToast(summary, String(detail).split("\n"), life, severity);
  return "dom";
}

// execution_error: a prompt failed in one of our nodes; the message carries the structured
// error as `seedreuse` (nodes/transactions.py).
export function toastExecutionError(d) {
  const err = executionError(d);
  if (!err) return;
  const where = d.node_id != null ? ` (node ${d.node_id}${d.node_type ? " " + d.node_type : ""})` : "";
  showToast(`SeedReuse: ${errorTitle(err)}${where}`, errorLines(err).join("\n"));
}

// A prompt rejected at validation (HTTP 400) because of one of our nodes: the host's
// node_errors entries, as given.
export function toastRejected(err, prompt) {
  const body = err && (err.response || err.error || err);
  const nodeErrors = (body && body.node_errors) || {};
  const msgs = [];
  for (const [id, ne] of Object.entries(nodeErrors)) {
    const ct = (ne && ne.class_type) || (prompt && prompt[id] && prompt[id].class_type) || "";
    if (!isPackType(String(ct))) continue;
    for (const e of (ne && ne.errors) || []) msgs.push(`node ${id} ${ct}: ${e.details || e.message || ""}`);
  }
  if (msgs.length) showToast("SeedReuse: the prompt was rejected", msgs.join("\n"));
}

// Wraps api.queuePrompt once to see rejections (the host reports them with a generic dialog)
// and the prompt ids this page queues (onQueued(prompt_id)).
export function wrapQueue(onQueued) {
  const api = host.api;
  if (!api || api.__seedreuseWrapped || typeof api.queuePrompt !== "function") return;
  const original = api.queuePrompt;
  api.queuePrompt = async function (...args) {
    try {
      const res = await original.apply(this, args);
      try {
        if (onQueued && res && res.prompt_id) onQueued(String(res.prompt_id));
      } catch (e) {
        noteError("queuePrompt queued", e);
      }
      return res;
    } catch (err) {
      try {
        toastRejected(err, args[1] && args[1].output);
      } catch (e) {
        noteError("queuePrompt rejected", e);
      }
      throw err;
    }
  };
  api.__seedreuseWrapped = true;
}
