// SeedReuse frontend extension ("seedreuse.ui").
//
// - A badge over every reuse node (SeedReuseEncode*, SeedReuseSegmentLoopStart): before a run
//   it shows what the server's dry run (POST /seedreuse/check) predicts ("will reuse",
//   "will encode (why)"); after a run it shows what happened ("reused · saved 2.3 s",
//   "encoded"), from the "seedreuse.slot" / "seedreuse.segments" websocket events.
// - A segment timeline widget on Segment Loop Start: the cached previous result's segments as
//   clickable blocks; clicking segment k sets reuse_prefix_segments = k on the connected
//   SeedReuse Session (keep segments 0..k-1, regenerate from k).
// - Non-blocking toasts for the pack's typed errors (message + "fix:").
//
// Everything is namespaced "seedreuse"; every hook is guarded and chained to the original.
// Tests read the state through window.__seedreuse (canvas drawing cannot be read from the DOM).
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";

const EXT_NAME = "seedreuse.ui";
const ENCODE_PREFIX = "SeedReuseEncode";
const START_TYPE = "SeedReuseSegmentLoopStart";
const SESSION_TYPE = "SeedReuseSession";
const TIMELINE_WIDGET = "seedreuse_timeline";
const CHECK_DEBOUNCE_MS = 1500;
const SIGNATURE_POLL_MS = 1000;
const ERROR_TYPES = [
  "ReuseError", "InvalidCacheNameError", "CacheBusyError", "NoCommittedCacheError", "KeyMismatchError",
  "CorruptCacheError", "UnsupportedValueError", "InvalidRequestError", "PreviousResultError",
  "TransactionError", "UnsupportedFilesystemError",
];

const NS = (window.__seedreuse = window.__seedreuse || {});

function isReuseType(type) {
  return typeof type === "string" && (type.startsWith(ENCODE_PREFIX) || type === START_TYPE);
}

function noteError(where, err) {
  // Hooks never throw into the host; the first failure of each hook is logged once.
  try {
    NS.errors = NS.errors || [];
    NS.errors.push({ where, message: String(err && (err.stack || err.message || err)) });
    NS._warned = NS._warned || {};
    if (!NS._warned[where]) {
      NS._warned[where] = true;
      console.warn(`[seedreuse] ${where}:`, err);
    }
  } catch (_) { /* never throw from the error path */ }
}

function guard(where, fn) {
  return function (...args) {
    try {
      return fn.apply(this, args);
    } catch (e) {
      noteError(where, e);
      return undefined;
    }
  };
}

// Call the original handler first (its exceptions are its own), then ours (guarded).
function chain(proto, name, ours, where) {
  const original = proto[name];
  const guarded = guard(where || name, ours);
  proto[name] = function (...args) {
    const r = original ? original.apply(this, args) : undefined;
    guarded.apply(this, args);
    return r;
  };
}

// ------------------------------------------------------------------ state

const state = {
  dry: {},            // node id -> dry-run answer of /seedreuse/check ("nodes" or "segments" entry)
  run: {},            // node id -> {text, kind, sig, at, payload} from execution events
  pendingCheck: null, // debounce timer
  inFlight: false,
  force: false,       // the next check posts even if the prompt is unchanged (the cache may have changed)
  rerun: false,
  lastSentJson: null,
  lastSig: null,
  checkError: null,
  segRuns: {},        // prompt_id -> [start node ids] announced by seedreuse.segments
};

function graph() {
  return app.rootGraph || app.graph;
}

function allGraphs() {
  const g = graph();
  if (!g) return [];
  const out = [g];
  try {
    const subs = g.subgraphs;
    if (subs && typeof subs.values === "function") for (const s of subs.values()) out.push(s);
  } catch (_) { /* older frontends: no subgraphs */ }
  return out;
}

function nodesOf(g) {
  return (g && (g.nodes || g._nodes)) || [];
}

function reuseNodes() {
  const out = [];
  for (const g of allGraphs()) for (const n of nodesOf(g)) if (isReuseType(n.type || n.comfyClass)) out.push(n);
  return out;
}

// An API-format node id ("12" or, inside subgraphs, "3:12") -> the LiteGraph node.
function nodeById(id) {
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
function keyOf(node) {
  const g = graph();
  if (!node) return null;
  if (!node.graph || node.graph === g) return String(node.id);
  const suffix = ":" + node.id;
  for (const k of Object.keys(state.dry).concat(Object.keys(state.run))) if (k.endsWith(suffix)) return k;
  return String(node.id);
}

// A cheap synchronous fingerprint of everything that can change the API prompt.
function graphSignature() {
  const parts = [];
  for (const g of allGraphs()) {
    for (const n of nodesOf(g)) {
      const w = (n.widgets || []).filter((x) => x.name !== TIMELINE_WIDGET).map((x) => {
        const v = x.value;
        return typeof v === "object" && v !== null ? "" : v;
      });
      const ins = (n.inputs || []).map((x) => x.link);
      parts.push([n.id, n.type, n.mode, w, ins]);
    }
  }
  try {
    return JSON.stringify(parts);
  } catch (_) {
    return String(Math.random());
  }
}

function redraw() {
  try {
    const g = graph();
    if (g && g.setDirtyCanvas) g.setDirtyCanvas(true, true);
    else if (app.canvas) app.canvas.setDirty(true, true);
  } catch (e) {
    noteError("redraw", e);
  }
}

function fmtSeconds(s) {
  if (typeof s !== "number" || !isFinite(s)) return "";
  return s >= 10 ? `${s.toFixed(0)} s` : s >= 1 ? `${s.toFixed(1)} s` : `${(s * 1000).toFixed(0)} ms`;
}

function short(text, n) {
  text = String(text || "").split("\n")[0];
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

// ------------------------------------------------------------------ badge text

function dryBadge(d) {
  if (!d) return null;
  if (d.kind === "segments") {
    if (d.will === "fail" || d.valid === false) return { text: `will fail (${short(d.reason, 60)})`, tone: "fail" };
    const S = d.S;
    if (d.will === "resume" && d.N > 0) {
      return { text: `will keep ${d.N}/${S} segments, generate ${S - d.N}`, tone: "reuse" };
    }
    if (S == null) return { text: "will generate every segment (length from the audio)", tone: "encode" };
    return { text: `will generate all ${S} segment${S === 1 ? "" : "s"}`, tone: "encode" };
  }
  if (d.will === "reuse") return { text: "will reuse", tone: "reuse" };
  if (d.will === "encode") return { text: `will encode (${short(d.reason, 60)})`, tone: "encode" };
  if (d.will === "fail") return { text: `will fail (${short(d.reason, 60)})`, tone: "fail" };
  return null;
}

function runText(p) {
  if (p.action === "reused") {
    const saved = fmtSeconds(p.saved_seconds);
    return saved ? `reused · saved ${saved}` : "reused";
  }
  if (p.action === "encoded") {
    const took = fmtSeconds(p.encode_seconds);
    return took ? `encoded · ${took}` : "encoded";
  }
  return String(p.action || "done");
}

// What the badge shows now: the last run's result while the graph is unchanged since it
// arrived, else the dry run's prediction for the current graph.
function badgeFor(key) {
  const r = state.run[key];
  const d = dryBadge(state.dry[key]);
  const sig = state.lastSig;
  if (r && (r.sig === null || r.sig === sig)) {
    return { text: r.text, tone: r.tone, next: d && d.text !== r.text ? d.text : null, source: "run" };
  }
  if (d) return { ...d, source: "dry-run" };
  if (state.checkError) return { text: `check failed (${short(state.checkError, 50)})`, tone: "fail", source: "error" };
  return { text: "checking…", tone: "pending", source: "pending" };
}

function publishBadges() {
  const badges = {};
  const details = {};
  for (const node of reuseNodes()) {
    const key = keyOf(node);
    const b = badgeFor(key);
    badges[key] = b.text;
    details[key] = { ...b, type: node.type, dry: state.dry[key] || null, run: state.run[key] || null };
  }
  NS.badges = badges;
  NS.badgeDetails = details;
}

const TONES = {
  reuse: { bg: "#1f6f43", fg: "#e8fff0" },
  reused: { bg: "#1f6f43", fg: "#e8fff0" },
  encode: { bg: "#8a5a00", fg: "#fff5e0" },
  encoded: { bg: "#2b4f8a", fg: "#e8f0ff" },
  fail: { bg: "#8a1f1f", fg: "#ffe8e8" },
  pending: { bg: "#444", fg: "#ddd" },
};

function drawBadge(node, ctx) {
  const key = keyOf(node);
  const b = badgeFor(key);
  NS.badges = NS.badges || {};
  NS.badges[key] = b.text;
  if (!ctx || node.flags?.collapsed) return;
  const tone = TONES[b.tone] || TONES.pending;
  const titleH = (window.LiteGraph && window.LiteGraph.NODE_TITLE_HEIGHT) || 30;
  const h = 18;
  ctx.save();
  ctx.font = "11px sans-serif";
  const lines = [b.text];
  if (b.next) lines.push(`next: ${b.next}`);
  let y = -titleH - 6 - h * lines.length;
  for (let i = 0; i < lines.length; i++) {
    const text = short(lines[i], 70);
    const w = Math.min(ctx.measureText(text).width + 12, Math.max(node.size[0], 120) + 120);
    ctx.globalAlpha = i === 0 ? 0.95 : 0.75;
    ctx.fillStyle = tone.bg;
    ctx.beginPath();
    if (ctx.roundRect) ctx.roundRect(0, y, w, h - 2, 4);
    else ctx.rect(0, y, w, h - 2);
    ctx.fill();
    ctx.fillStyle = tone.fg;
    ctx.textBaseline = "middle";
    ctx.textAlign = "left";
    ctx.fillText(text, 6, y + (h - 2) / 2);
    y += h;
  }
  ctx.restore();
}

// ------------------------------------------------------------------ dry run

function scheduleCheck(delay = CHECK_DEBOUNCE_MS, force = false) {
  if (force) state.force = true;
  if (state.pendingCheck) clearTimeout(state.pendingCheck);
  state.pendingCheck = setTimeout(() => {
    state.pendingCheck = null;
    runCheck().catch((e) => noteError("check", e));
  }, delay);
}

async function runCheck() {
  if (state.inFlight) {
    state.rerun = true;
    return;
  }
  if (!reuseNodes().length) return;
  state.inFlight = true;
  NS.checkState = "running";
  try {
    const p = await app.graphToPrompt();
    const output = p && p.output ? p.output : {};
    if (!Object.values(output).some((n) => isReuseType(n && n.class_type))) return;
    const body = JSON.stringify({ prompt: output });
    const force = state.force;
    state.force = false;
    if (!force && body === state.lastSentJson) return;
    const sigAtSend = graphSignature();
    const res = await api.fetchApi("/seedreuse/check", {
      method: "POST", headers: { "Content-Type": "application/json" }, body,
    });
    let answer = null;
    try {
      answer = await res.json();
    } catch (_) { /* not JSON */ }
    if (!res.ok) {
      const err = answer && answer.error;
      state.checkError = err ? `${err.type || "error"}: ${err.message || ""}` : `HTTP ${res.status}`;
      state.dry = {};
    } else {
      state.checkError = null;
      const dry = {};
      for (const [id, v] of Object.entries((answer && answer.nodes) || {})) dry[id] = { kind: "slot", ...v };
      for (const [id, v] of Object.entries((answer && answer.segments) || {})) dry[id] = { ...v, kind: "segments" };
      state.dry = dry;
      NS.lastCheck = { at: Date.now(), answer, sig: sigAtSend };
    }
    state.lastSentJson = body;
    NS.checks = (NS.checks || 0) + 1;
    publishBadges();
    renderAllTimelines();
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

function onSignatureTick() {
  if (!graph()) return;
  const sig = graphSignature();
  if (sig !== state.lastSig) {
    state.lastSig = sig;
    publishBadges();
    redraw();
    scheduleCheck(CHECK_DEBOUNCE_MS);
  }
}

// ------------------------------------------------------------------ execution events

function onSlotEvent(ev) {
  const p = ev && ev.detail;
  if (!p || p.node === undefined || p.node === null) return;
  const key = String(p.node);
  state.lastSig = graphSignature();
  state.run[key] = {
    text: runText(p), tone: p.action === "reused" ? "reused" : "encoded", sig: state.lastSig,
    at: Date.now(), payload: p,
  };
  NS.events = NS.events || [];
  NS.events.push({ type: "seedreuse.slot", data: p });
  publishBadges();
  redraw();
}

function segmentRunText(p, done) {
  const S = p.segments;
  const kept = p.kept || 0;
  if (done) return kept ? `kept ${kept}/${S} · generated ${S - kept}` : `generated ${S} segment${S === 1 ? "" : "s"}`;
  return kept ? `keeping ${kept}/${S} · generating ${S - kept}…` : `generating ${S} segment${S === 1 ? "" : "s"}…`;
}

function onSegmentsEvent(ev) {
  const p = ev && ev.detail;
  if (!p || p.node === undefined || p.node === null) return;
  const key = String(p.node);
  state.lastSig = graphSignature();
  state.run[key] = { text: segmentRunText(p, false), tone: "encode", sig: state.lastSig, at: Date.now(), payload: p };
  (state.segRuns[p.prompt_id] = state.segRuns[p.prompt_id] || []).push(key);
  NS.events = NS.events || [];
  NS.events.push({ type: "seedreuse.segments", data: p });
  publishBadges();
  redraw();
}

function onExecutionEnd(ev, ok) {
  const d = ev && ev.detail;
  const pid = d && d.prompt_id;
  for (const key of state.segRuns[pid] || []) {
    const r = state.run[key];
    if (!r) continue;
    if (ok) {
      r.text = segmentRunText(r.payload, true);
      r.tone = r.payload.kept ? "reused" : "encoded";
    } else {
      r.text = "run failed";
      r.tone = "fail";
    }
    r.sig = graphSignature();
    state.lastSig = r.sig;
  }
  delete state.segRuns[pid];
  publishBadges();
  redraw();
  scheduleCheck(250, true); // the cache may have changed
}

// ------------------------------------------------------------------ errors -> toasts

function parseReuseMessage(message) {
  const lines = String(message || "").split("\n").map((l) => l.trim()).filter(Boolean);
  const out = { message: lines[0] || "", expected: null, actual: null, fix: null, rest: [] };
  for (const l of lines.slice(1)) {
    const m = /^(expected|actual|fix):\s*(.*)$/i.exec(l);
    if (m) out[m[1].toLowerCase()] = m[2];
    else out.rest.push(l);
  }
  return out;
}

function isReuseError(d) {
  const t = String((d && d.exception_type) || "");
  const name = t.split(".").pop();
  if (t.includes("reuse_backend.errors") || ERROR_TYPES.includes(name)) return true;
  const msg = String((d && d.exception_message) || "");
  return String((d && d.node_type) || "").startsWith("SeedReuse") && /\nfix:/.test(msg);
}

function ensureStyle() {
  if (document.getElementById("seedreuse-style")) return;
  const s = document.createElement("style");
  s.id = "seedreuse-style";
  s.textContent = `
.seedreuse-toasts{position:fixed;right:16px;bottom:16px;z-index:10000;display:flex;flex-direction:column;gap:8px;max-width:460px;pointer-events:none}
.seedreuse-toast{pointer-events:auto;background:#2a1414;color:#ffe8e8;border:1px solid #a33;border-radius:6px;padding:10px 12px;font:13px/1.35 sans-serif;box-shadow:0 4px 16px rgba(0,0,0,.4);white-space:pre-wrap}
.seedreuse-toast b{display:block;margin-bottom:4px}
.seedreuse-toast .seedreuse-fix{margin-top:6px;color:#ffd27a}
.seedreuse-timeline{box-sizing:border-box;width:100%;height:100%;padding:2px;font:11px/14px sans-serif;color:#ccc;display:flex;flex-direction:column;gap:4px;overflow:hidden}
.seedreuse-timeline-blocks{display:flex;gap:2px;height:24px;flex:0 0 24px}
.seedreuse-seg{flex:1 1 0;min-width:8px;border-radius:3px;border:1px solid #555;background:#3a3a3a;color:#ddd;cursor:pointer;display:flex;align-items:center;justify-content:center;user-select:none;font-size:10px;padding:0}
.seedreuse-seg.seedreuse-kept{background:#1f6f43;border-color:#2f9f63;color:#e8fff0}
.seedreuse-seg.seedreuse-regen{background:#8a5a00;border-color:#b07a10;color:#fff5e0}
.seedreuse-seg.seedreuse-selected{outline:2px solid #fff;outline-offset:-2px}
.seedreuse-seg.seedreuse-disabled{opacity:.45;cursor:not-allowed}
.seedreuse-timeline-label{flex:0 0 auto;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
`;
  document.head.appendChild(s);
}

function showToast(summary, detail, life = 12000) {
  NS.toasts = NS.toasts || [];
  NS.toasts.push({ summary, detail, at: Date.now() });
  const tm = app.extensionManager && app.extensionManager.toast;
  if (tm && typeof tm.add === "function") {
    tm.add({ severity: "error", summary, detail, life });
    return "extensionManager";
  }
  ensureStyle();
  let box = document.querySelector(".seedreuse-toasts");
  if (!box) {
    box = document.createElement("div");
    box.className = "seedreuse-toasts";
    document.body.appendChild(box);
  }
  const el = document.createElement("div");
  el.className = "seedreuse-toast";
  const b = document.createElement("b");
  b.textContent = summary;
  el.appendChild(b);
  el.appendChild(document.createTextNode(detail));
  el.addEventListener("click", () => el.remove());
  box.appendChild(el);
  setTimeout(() => el.remove(), life);
  return "dom";
}

function onExecutionError(ev) {
  const d = ev && ev.detail;
  if (!d || !isReuseError(d)) return;
  const type = String(d.exception_type || "SeedReuse error").split(".").pop();
  const m = parseReuseMessage(d.exception_message);
  const lines = [m.message, ...m.rest];
  if (m.expected) lines.push(`expected: ${m.expected}`);
  if (m.actual) lines.push(`actual: ${m.actual}`);
  if (m.fix) lines.push(`fix: ${m.fix}`);
  const where = d.node_id != null ? ` (node ${d.node_id}${d.node_type ? " " + d.node_type : ""})` : "";
  showToast(`SeedReuse: ${type}${where}`, lines.join("\n"));
}

// A prompt rejected at validation (HTTP 400) because of one of our nodes.
function toastRejected(err, prompt) {
  const body = err && (err.response || err.error || err);
  const nodeErrors = (body && body.node_errors) || {};
  const msgs = [];
  for (const [id, ne] of Object.entries(nodeErrors)) {
    const ct = (ne && ne.class_type) || (prompt && prompt[id] && prompt[id].class_type) || "";
    if (!String(ct).startsWith("SeedReuse")) continue;
    for (const e of (ne && ne.errors) || []) msgs.push(`node ${id} ${ct}: ${e.details || e.message || ""}`);
  }
  if (msgs.length) showToast("SeedReuse: the prompt was rejected", msgs.join("\n"));
}

// ------------------------------------------------------------------ segment timeline

function sessionNodeOf(node) {
  const idx = (node.inputs || []).findIndex((i) => i.name === "session");
  if (idx < 0) return null;
  let cur = node.getInputNode ? node.getInputNode(idx) : null;
  for (let hops = 0; cur && hops < 16; hops++) {
    if ((cur.type || cur.comfyClass) === SESSION_TYPE) return cur;
    const next = (cur.inputs || []).findIndex((i) => i.link != null);
    if (next < 0 || !cur.getInputNode) return null; // e.g. a Reroute: follow its one input
    cur = cur.getInputNode(next);
  }
  return null;
}

function widgetOf(node, name) {
  return node && (node.widgets || []).find((w) => w.name === name);
}

function timelineModel(node) {
  const key = keyOf(node);
  const d = state.dry[key];
  const sess = sessionNodeOf(node);
  const w = widgetOf(sess, "reuse_prefix_segments");
  const selected = w ? Number(w.value) || 0 : 0;
  const S = d && typeof d.S === "number" ? d.S : 0;
  const prev = (d && d.previous) || null;
  const valid = d && Array.isArray(d.valid_n) ? d.valid_n : null;
  const starts = (prev && prev.segment_starts) || null;
  const prefix = (d && d.prefix_frames_by_n) || [];
  const segments = [];
  for (let k = 0; k < S; k++) {
    segments.push({
      index: k,
      start: starts && starts[k] != null ? starts[k] : null,
      prefix_frames: prefix[k] != null ? prefix[k] : null,
      kept: k < selected,
      clickable: valid ? valid.includes(k) : true,
    });
  }
  return {
    node: key, segments, selected, S, previous: prev, valid_n: valid,
    session: sess ? String(sess.id) : null, will: d ? d.will : null, reason: d ? d.reason || null : null,
    plan: d ? d.plan || null : null,
  };
}

function selectSegment(node, k) {
  const sess = sessionNodeOf(node);
  if (!sess) {
    showToast("SeedReuse: no session", "connect a SeedReuse Session to this Segment Loop Start's session input", 6000);
    return false;
  }
  const w = widgetOf(sess, "reuse_prefix_segments");
  if (!w) return false;
  const setW = (widget, v) => {
    const old = widget.value;
    widget.value = v;
    try {
      if (widget.callback) widget.callback(v, app.canvas, sess, null, null);
    } catch (e) {
      noteError("widget callback", e);
    }
    try {
      if (sess.onWidgetChanged) sess.onWidgetChanged(widget.name, v, old, widget);
    } catch (e) {
      noteError("onWidgetChanged", e);
    }
  };
  setW(w, k);
  const mode = widgetOf(sess, "reuse");
  if (k > 0 && mode && mode.value === "off") setW(mode, "auto"); // a prefix is always reused
  try {
    const g = graph();
    if (g && g.change) g.change();
    const wf = app.extensionManager && app.extensionManager.workflow;
    const ct = wf && wf.activeWorkflow && wf.activeWorkflow.changeTracker;
    if (ct && ct.checkState) ct.checkState();
  } catch (e) {
    noteError("mark dirty", e);
  }
  redraw();
  renderTimeline(node);
  scheduleCheck(200);
  return true;
}

function renderTimeline(node) {
  const tl = node.__seedreuseTimeline;
  if (!tl) return;
  const m = timelineModel(node);
  tl.model = m;
  const blocks = tl.blocks;
  blocks.textContent = "";
  for (const seg of m.segments) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "seedreuse-seg " + (seg.kept ? "seedreuse-kept" : "seedreuse-regen");
    if (seg.index === m.selected) b.classList.add("seedreuse-selected");
    if (!seg.clickable) b.classList.add("seedreuse-disabled");
    b.dataset.seedreuseSegment = String(seg.index);
    b.textContent = String(seg.index);
    const range = seg.start != null ? ` (starts at frame ${seg.start})` : "";
    b.title = seg.clickable
      ? (seg.index === 0 ? `segment 0${range}: regenerate every segment`
        : `segment ${seg.index}${range}: keep segments 0..${seg.index - 1}` +
          (seg.prefix_frames != null ? ` (${seg.prefix_frames} frames)` : "") + `, regenerate from ${seg.index}`)
      : `segment ${seg.index}${range}: cannot resume here with the cached result`;
    b.addEventListener("pointerdown", (e) => e.stopPropagation());
    b.addEventListener("click", guard("timeline click", (e) => {
      e.preventDefault();
      e.stopPropagation();
      if (!seg.clickable) return;
      selectSegment(node, seg.index);
    }));
    blocks.appendChild(b);
  }
  let label;
  if (!m.S) label = m.reason ? `timeline unavailable: ${short(m.reason, 80)}` : "timeline: waiting for the dry run…";
  else if (!m.previous) label = `${m.S} segments · no cached result yet (run once to enable resume)`;
  else if (m.selected > 0) label = `keep 0..${m.selected - 1} · regenerate ${m.selected}..${m.S - 1} (previous seed ${m.previous.seed})`;
  else label = `regenerate all ${m.S} segments (previous: ${m.previous.segments} segments, seed ${m.previous.seed})`;
  tl.label.textContent = label;
  tl.label.title = m.plan || m.reason || label;
  tl.root.dataset.seedreuseNode = String(node.id); // ids are assigned after onNodeCreated
  tl.root.dataset.seedreuseSelected = String(m.selected);
  tl.root.dataset.seedreuseSegments = String(m.S);
}

function renderAllTimelines() {
  for (const n of reuseNodes()) if (n.__seedreuseTimeline) {
    try {
      renderTimeline(n);
    } catch (e) {
      noteError("renderTimeline", e);
    }
  }
}

function addTimeline(node) {
  if (node.__seedreuseTimeline) return;
  ensureStyle();
  const root = document.createElement("div");
  root.className = "seedreuse-timeline";
  root.dataset.seedreuseNode = String(node.id);
  const blocks = document.createElement("div");
  blocks.className = "seedreuse-timeline-blocks";
  const label = document.createElement("div");
  label.className = "seedreuse-timeline-label";
  root.append(blocks, label);
  node.__seedreuseTimeline = { root, blocks, label, model: null, widget: null, canvas: false };
  if (typeof node.addDOMWidget === "function") {
    const w = node.addDOMWidget(TIMELINE_WIDGET, "seedreuse-timeline", root, {
      serialize: false, hideOnZoom: false, getValue: () => undefined, setValue: () => {},
      margin: 6, getMinHeight: () => 60, getMaxHeight: () => 72,
    });
    if (w) w.serialize = false;
    node.__seedreuseTimeline.widget = w;
  } else {
    // Canvas fallback: a drawn widget; clicks pick the block under the pointer.
    node.__seedreuseTimeline.canvas = true;
    const w = {
      name: TIMELINE_WIDGET, type: "seedreuse-timeline", value: undefined, serialize: false,
      options: { serialize: false },
      computeSize: (width) => [width, 44],
      draw(ctx, n, width, y) {
        const m = timelineModel(n);
        const k = Math.max(1, m.S);
        const bw = (width - 20) / k;
        for (const seg of m.segments) {
          ctx.fillStyle = seg.kept ? "#1f6f43" : "#8a5a00";
          ctx.fillRect(10 + seg.index * bw, y + 4, bw - 2, 22);
          ctx.fillStyle = "#fff";
          ctx.fillText(String(seg.index), 14 + seg.index * bw, y + 18);
        }
      },
      mouse(event, pos, n) {
        if (event.type !== "pointerdown" && event.type !== "mousedown") return false;
        const m = timelineModel(n);
        const bw = (n.size[0] - 20) / Math.max(1, m.S);
        const k = Math.floor((pos[0] - 10) / bw);
        const seg = m.segments[k];
        if (seg && seg.clickable) selectSegment(n, k);
        return true;
      },
    };
    node.addCustomWidget ? node.addCustomWidget(w) : (node.widgets = node.widgets || []).push(w);
    node.__seedreuseTimeline.widget = w;
  }
  renderTimeline(node);
}

// ------------------------------------------------------------------ test/inspection API

function installApi() {
  NS.version = 1;
  NS.badges = NS.badges || {};
  NS.errors = NS.errors || [];
  NS.toasts = NS.toasts || [];
  NS.events = NS.events || [];
  NS.badge = (id) => {
    const node = nodeById(id);
    return node ? badgeFor(keyOf(node)).text : (NS.badges || {})[String(id)] || null;
  };
  NS.timeline = (id) => {
    const node = nodeById(id);
    if (!node || !node.__seedreuseTimeline) return null;
    const m = timelineModel(node);
    return { segments: m.segments, selected: m.selected, S: m.S, previous: m.previous, valid_n: m.valid_n,
      session: m.session, will: m.will, reason: m.reason, dom: !node.__seedreuseTimeline.canvas };
  };
  // Clicks the real DOM block (so the click path is exercised) or, for the canvas fallback,
  // selects directly. Returns the resulting timeline.
  NS.clickSegment = (id, k) => {
    const node = nodeById(id);
    if (!node || !node.__seedreuseTimeline) throw new Error(`node ${id} has no seedreuse timeline`);
    const tl = node.__seedreuseTimeline;
    if (tl.canvas) selectSegment(node, k);
    else {
      const el = tl.blocks.querySelector(`[data-seedreuse-segment="${k}"]`);
      if (!el) throw new Error(`timeline of node ${id} has no segment ${k}`);
      el.click();
    }
    return NS.timeline(id);
  };
  NS.checkNow = async () => {
    state.force = true;
    for (let i = 0; state.inFlight && i < 600; i++) await new Promise((r) => setTimeout(r, 50));
    await runCheck();
    return NS.lastCheck || null;
  };
  NS.state = state;
  NS.showToast = showToast;
}

// ------------------------------------------------------------------ registration

function wrapQueue() {
  if (api.__seedreuseWrapped || typeof api.queuePrompt !== "function") return;
  const original = api.queuePrompt;
  api.queuePrompt = async function (...args) {
    let res;
    try {
      res = await original.apply(this, args);
    } catch (err) {
      try {
        toastRejected(err, args[1] && args[1].output);
      } catch (e) {
        noteError("queuePrompt rejected", e);
      }
      throw err;
    }
    return res;
  };
  api.__seedreuseWrapped = true;
}

const extension = {
  name: EXT_NAME,
  async setup() {
    try {
      installApi();
      ensureStyle();
      api.addEventListener("seedreuse.slot", guard("seedreuse.slot", onSlotEvent));
      api.addEventListener("seedreuse.segments", guard("seedreuse.segments", onSegmentsEvent));
      api.addEventListener("seedreuse.merge", guard("seedreuse.merge", (ev) => {
        NS.events = NS.events || [];
        NS.events.push({ type: "seedreuse.merge", data: ev && ev.detail });
      }));
      api.addEventListener("execution_error", guard("execution_error", (e) => {
        NS.lastExecutionError = e && e.detail;
        onExecutionError(e);
        onExecutionEnd(e, false);
      }));
      api.addEventListener("execution_success", guard("execution_success", (e) => onExecutionEnd(e, true)));
      api.addEventListener("execution_interrupted", guard("execution_interrupted", (e) => onExecutionEnd(e, false)));
      api.addEventListener("graphChanged", guard("graphChanged", () => scheduleCheck(CHECK_DEBOUNCE_MS)));
      document.addEventListener("visibilitychange", guard("visibilitychange", () => {
        if (document.visibilityState === "visible") scheduleCheck(300, true);
      }));
      wrapQueue();
      NS._poll = setInterval(guard("signature poll", onSignatureTick), SIGNATURE_POLL_MS);
      NS.ready = true;
    } catch (e) {
      noteError("setup", e);
    }
  },
  async beforeRegisterNodeDef(nodeType, nodeData) {
    try {
      const name = (nodeData && nodeData.name) || nodeType.comfyClass || nodeType.type;
      if (!isReuseType(name)) return;
      const proto = nodeType.prototype;
      chain(proto, "onDrawForeground", function (ctx) {
        drawBadge(this, ctx);
        if (this.__seedreuseTimeline) {
          const sel = Number((widgetOf(sessionNodeOf(this), "reuse_prefix_segments") || {}).value) || 0;
          const m = this.__seedreuseTimeline.model;
          if (m && m.selected !== sel) renderTimeline(this);
        }
      }, "onDrawForeground");
      if (name === START_TYPE) {
        chain(proto, "onNodeCreated", function () {
          addTimeline(this);
        }, "onNodeCreated");
        chain(proto, "onConnectionsChange", function () {
          if (this.__seedreuseTimeline) renderTimeline(this);
        }, "onConnectionsChange");
      }
      chain(proto, "onRemoved", function () {
        const key = keyOf(this);
        delete state.dry[key];
        delete state.run[key];
        if (NS.badges) delete NS.badges[key];
      }, "onRemoved");
    } catch (e) {
      noteError("beforeRegisterNodeDef", e);
    }
  },
  async afterConfigureGraph() {
    try {
      state.run = {};
      state.dry = {};
      state.lastSig = null;
      scheduleCheck(300, true);
    } catch (e) {
      noteError("afterConfigureGraph", e);
    }
  },
};

(function register() {
  try {
    const already = NS.registered || (Array.isArray(app.extensions) && app.extensions.some((e) => e && e.name === EXT_NAME));
    if (already) {
      console.debug(`[seedreuse] ${EXT_NAME} is already registered; skipping the second copy`);
      return;
    }
    NS.registered = true;
    app.registerExtension(extension);
  } catch (e) {
    noteError("registerExtension", e);
  }
})();
