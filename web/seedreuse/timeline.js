// The segment timeline on Segment Loop Start: the cached previous result's segments as
// clickable blocks; clicking segment k sets reuse_prefix_segments = k on the connected
// SeedReuse Session (keep segments 0..k-1, regenerate from k). Only exports.
import { TIMELINE_WIDGET, guard, host, noteError, short, state } from "./core.js";
import { syncSignature } from "./changes.js";
import { scheduleCheck } from "./dry_run_client.js";
import { graph, keyOf, redraw, reuseNodes, sessionNodeOf, widgetOf } from "./graph.js";
import { palette } from "./palette.js";
import { publishBadges } from "./badges.js";
import { showToast } from "./toasts.js";

export function timelineModel(node) {
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
  // the dry run lists at most `listed_segments` entries for very long videos: draw those only
  const shown = d && typeof d.listed_segments === "number" ? Math.min(S, d.listed_segments) : Math.min(S, 10000);
  const segments = [];
  for (let k = 0; k < shown; k++) {
    segments.push({
      index: k,
      start: starts && starts[k] != null ? starts[k] : null,
      prefix_frames: prefix[k] != null ? prefix[k] : null,
      kept: k < selected,
      clickable: valid ? valid.includes(k) : true,
    });
  }
  const err = (d && d.error) || null;
  return {
    node: key, segments, selected, S, previous: prev, valid_n: valid,
    session: sess ? String(sess.id) : null, will: d ? d.will : null,
    reason: d ? (err && err.message) || d.reason || null : null, fix: err ? err.fix || null : null,
    plan: d ? d.plan || null : null,
  };
}

function setWidget(sess, widget, v) {
  const old = widget.value;
  widget.value = v;
  try {
    if (widget.callback) widget.callback(v, host.app.canvas, sess, null, null);
  } catch (e) {
    noteError("widget callback", e);
  }
  try {
    if (sess.onWidgetChanged) sess.onWidgetChanged(widget.name, v, old, widget);
  } catch (e) {
    noteError("onWidgetChanged", e);
  }
}

export function selectSegment(node, k) {
  const sess = sessionNodeOf(node);
  if (!sess) {
    showToast("SeedReuse: no session", "connect a SeedReuse Session to this Segment Loop Start's session input", 6000);
    return false;
  }
  const w = widgetOf(sess, "reuse_prefix_segments");
  if (!w) return false;
  setWidget(sess, w, k);
  const mode = widgetOf(sess, "reuse");
  if (k > 0 && mode && mode.value === "off") setWidget(sess, mode, "auto"); // a prefix is always reused
  try {
    const g = graph();
    if (g && g.change) g.change();
    const wf = host.app.extensionManager && host.app.extensionManager.workflow;
    const ct = wf && wf.activeWorkflow && wf.activeWorkflow.changeTracker;
    if (ct && ct.checkState) ct.checkState();
  } catch (e) {
    noteError("mark dirty", e);
  }
  syncSignature(); // this change is handled here: check soon
  publishBadges();
  redraw();
  renderTimeline(node);
  scheduleCheck(200);
  return true;
}

function blockTitle(seg) {
  const range = seg.start != null ? ` (starts at frame ${seg.start})` : "";
  if (!seg.clickable) return `segment ${seg.index}${range}: cannot resume here with the cached result`;
  if (seg.index === 0) return `segment 0${range}: regenerate every segment`;
  return `segment ${seg.index}${range}: keep segments 0..${seg.index - 1}` +
    (seg.prefix_frames != null ? ` (${seg.prefix_frames} frames)` : "") + `, regenerate from ${seg.index}`;
}

function timelineLabel(m) {
  if (!m.S) {
    if (!m.reason) return "timeline: waiting for the dry run…";
    return `timeline unavailable: ${short(m.reason, 80)}` + (m.fix ? ` (fix: ${short(m.fix, 80)})` : "");
  }
  if (!m.previous) return `${m.S} segments · no cached result yet (run once to enable resume)`;
  if (m.selected > 0) {
    return `keep 0..${m.selected - 1} · regenerate ${m.selected}..${m.S - 1} (previous seed ${m.previous.seed})`;
  }
  return `regenerate all ${m.S} segments (previous: ${m.previous.segments} segments, seed ${m.previous.seed})`;
}

export function renderTimeline(node) {
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
    b.title = blockTitle(seg);
    b.addEventListener("pointerdown", (e) => e.stopPropagation());
    b.addEventListener("click", guard("timeline click", (e) => {
      e.preventDefault();
      e.stopPropagation();
      if (!seg.clickable) return;
      selectSegment(node, seg.index);
    }));
    blocks.appendChild(b);
  }
  const label = timelineLabel(m);
  tl.label.textContent = label;
  tl.label.title = m.plan || m.reason || label;
  tl.root.dataset.seedreuseNode = String(node.id); // ids are assigned after onNodeCreated
  tl.root.dataset.seedreuseSelected = String(m.selected);
  tl.root.dataset.seedreuseSegments = String(m.S);
}

export function renderAllTimelines() {
  for (const n of reuseNodes()) if (n.__seedreuseTimeline) {
    try {
      renderTimeline(n);
    } catch (e) {
      noteError("renderTimeline", e);
    }
  }
}

// Re-renders when the Session's reuse_prefix_segments changed since the last render.
export function refreshTimelineOnDraw(node) {
  const tl = node.__seedreuseTimeline;
  if (!tl) return;
  const sel = Number((widgetOf(sessionNodeOf(node), "reuse_prefix_segments") || {}).value) || 0;
  if (tl.model && tl.model.selected !== sel) renderTimeline(node);
}

// Canvas fallback (no DOM widgets): a drawn widget; clicks pick the block under the pointer.
function canvasWidget() {
  return {
    name: TIMELINE_WIDGET, type: "seedreuse-timeline", value: undefined, serialize: false,
    options: { serialize: false },
    computeSize: (width) => [width, 44],
    draw(ctx, n, width, y) {
      const m = timelineModel(n);
      const p = palette();
      const bw = (width - 20) / Math.max(1, m.S);
      for (const seg of m.segments) {
        ctx.fillStyle = seg.kept ? p.segKept : p.segRegen;
        ctx.fillRect(10 + seg.index * bw, y + 4, bw - 2, 22);
        ctx.fillStyle = p.segText;
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
}

export function addTimeline(node) {
  if (node.__seedreuseTimeline) return;
  const root = document.createElement("div");
  root.className = "seedreuse-timeline";
  root.dataset.seedreuseNode = String(node.id);
  const blocks = document.createElement("div");
  blocks.className = "seedreuse-timeline-blocks";
  const label = document.createElement("div");
  label.className = "seedreuse-timeline-label";
  root.append(blocks, label);
  const tl = (node.__seedreuseTimeline = { root, blocks, label, model: null, widget: null, canvas: false });
  if (typeof node.addDOMWidget === "function") {
    const w = node.addDOMWidget(TIMELINE_WIDGET, "seedreuse-timeline", root, {
      serialize: false, hideOnZoom: false, getValue: () => undefined, setValue: () => {},
      margin: 6, getMinHeight: () => 60, getMaxHeight: () => 72,
    });
    if (w) w.serialize = false;
    tl.widget = w;
  } else {
    tl.canvas = true;
    const w = canvasWidget();
    if (node.addCustomWidget) node.addCustomWidget(w);
    else (node.widgets = node.widgets || []).push(w);
    tl.widget = w;
  }
  renderTimeline(node);
}
