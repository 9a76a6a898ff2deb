// The segment timeline on Segment Loop Start: the take picker (web/seedreuse/take_picker.js: one
// row per kept take; picking one sets the Session's from_take, 0 for the latest), the picked
// take's segments as clickable blocks coloured by their validity for this graph (valid /
// run_time / invalid, the first differing field in the block's tooltip), P(N) per N, and a
// "longest valid" action. Clicking segment k sets reuse_prefix_segments = k on the connected
// SeedReuse Session (keep segments 0..k-1, regenerate from k); "longest valid" sets -1 (the
// node keeps as many as are still valid, decided before any sampling). A block past the picked
// take's longest valid prefix is disabled and says why. Only exports.
import { TIMELINE_WIDGET, guard, noteError, short, state } from "./core.js";
import { syncSignature } from "./changes.js";
import { scheduleCheck } from "./dry_run_client.js";
import { keyOf, redraw, reuseNodes, sessionNodeOf, widgetOf } from "./graph.js";
import { palette } from "./palette.js";
import { publishBadges } from "./badges.js";
import { showToast } from "./toasts.js";
import { FROM_TAKE, LONGEST_VALID, TAKE_PROPERTY, fromTakeLinked, makeActions, markDirty, renderActions,
  renderTakePicker, segmentOfTake, setWidget, takeModel, takeWidget } from "./take_picker.js";

export function timelineModel(node) {
  const key = keyOf(node);
  const d = state.dry[key];
  const sess = sessionNodeOf(node);
  const w = widgetOf(sess, "reuse_prefix_segments");
  const requested = w ? Number(w.value) || 0 : 0;
  const S = d && typeof d.S === "number" ? d.S : 0;
  const prev = (d && d.previous) || null;
  const valid = d && Array.isArray(d.valid_n) ? d.valid_n : null;
  const starts = (prev && prev.segment_starts) || null;
  const prefix = (d && d.prefix_frames_by_n) || [];
  const tk = takeModel(d, sess);
  const t = tk.take;
  const longest = t ? t.longest_valid : !tk.missing && d && typeof d.longest_valid === "number" ? d.longest_valid : null;
  // -1: the longest valid prefix of the picked take (what the dry run and the run resolve it to)
  const selected = requested === LONGEST_VALID ? (longest != null ? longest : 0) : requested;
  // the dry run lists at most `listed_segments` entries for very long videos: draw those only
  const shown = d && typeof d.listed_segments === "number" ? Math.min(S, d.listed_segments) : Math.min(S, 10000);
  const missing = tk.missing ? `from_take = ${tk.missing}: the cache keeps no take ${tk.missing}; pick a kept take` : null;
  const segments = [];
  for (let k = 0; k < shown; k++) {
    const v = segmentOfTake(t, k);
    segments.push({
      index: k,
      start: starts && starts[k] != null ? starts[k] : null,
      prefix_frames: prefix[k] != null ? prefix[k] : null,
      kept: k < selected,
      clickable: t ? v.clickable : missing ? k === 0 : valid ? valid.includes(k) : true,
      state: v.state, field: v.field, reason: v.reason || (missing && k > 0 ? missing : null),
    });
  }
  const err = (d && d.error) || null;
  return {
    node: key, segments, selected, requested_n: requested, longest, S, previous: prev, valid_n: valid,
    session: sess ? String(sess.id) : null, will: d ? d.will : null,
    reason: d ? (err && err.message) || d.reason || null : null, fix: err ? err.fix || null : null,
    plan: d ? d.plan || null : null, F: d ? d.F : null, M: d ? d.M : null, takes: tk, take: t,
  };
}

// After a change made here: the workflow is dirty, the change is handled (checked soon).
function afterChange(node) {
  if (node.__seedreuseTimeline) node.__seedreuseTimeline.noteText = "";
  markDirty();
  syncSignature();
  publishBadges();
  redraw();
  renderTimeline(node);
  scheduleCheck(200);
}

function noSession() {
  showToast("SeedReuse: no session", "connect a SeedReuse Session to this Segment Loop Start's session input", 6000);
  return false;
}

// A refused choice says why (until the next accepted one).
function refuse(node, why) {
  const tl = node.__seedreuseTimeline;
  if (tl) {
    tl.noteText = why;
    showNote(tl);
  }
  return false;
}

// N = k (or -1: the longest valid prefix) on the Session; a block the picked take cannot resume
// at is refused with its reason.
export function selectSegment(node, k) {
  const sess = sessionNodeOf(node);
  if (!sess) return noSession();
  const w = widgetOf(sess, "reuse_prefix_segments");
  if (!w) return false;
  if (k !== LONGEST_VALID) {
    const seg = timelineModel(node).segments[k];
    if (seg && !seg.clickable) return refuse(node, seg.reason || `segment ${k}: cannot resume here`);
  }
  setWidget(sess, w, k);
  const mode = widgetOf(sess, "reuse");
  if (k !== 0 && mode && mode.value === "off") setWidget(sess, mode, "auto"); // a prefix is always reused
  afterChange(node);
  return true;
}

export function selectLongest(node) {
  return selectSegment(node, LONGEST_VALID);
}

// Resume from take `t` (a dry-run take report): from_take = its number, 0 for the latest.
export function selectTake(node, t) {
  const sess = sessionNodeOf(node);
  if (!sess) return noSession();
  if (fromTakeLinked(sess)) return refuse(node, takeModel(null, sess).disabledReason);
  const w = takeWidget(sess, true);
  if (!w) return refuse(node, "this frontend cannot add the from_take widget to the Session");
  const v = t.latest ? 0 : t.take;
  sess.properties = sess.properties || {};
  sess.properties[TAKE_PROPERTY] = v;
  setWidget(sess, w, v);
  afterChange(node);
  return true;
}

function blockTitle(seg, m) {
  const range = seg.start != null ? ` (starts at frame ${seg.start})` : "";
  const st = seg.state ? ` [${seg.state}${seg.field ? ": " + seg.field : ""}]` : "";
  if (!seg.clickable) return `segment ${seg.index}${range}${st}: ` + (seg.reason || "cannot resume here with the cached result");
  if (seg.index === 0) return `segment 0${range}${st}: regenerate every segment`;
  return `segment ${seg.index}${range}${st}: keep segments 0..${seg.index - 1}` +
    (m.take ? ` of take ${m.take.take}` : "") +
    (seg.prefix_frames != null ? ` (P(${seg.index}) = ${seg.prefix_frames} frames)` : "") +
    `, regenerate from ${seg.index}`;
}

function timelineLabel(m) {
  if (!m.S) {
    if (!m.reason) return "timeline: waiting for the dry run…";
    return `timeline unavailable: ${short(m.reason, 80)}` + (m.fix ? ` (fix: ${short(m.fix, 80)})` : "");
  }
  if (!m.previous && !m.take) return `${m.S} segments · no cached result yet (run once to enable resume)`;
  if (m.will === "fail" && m.reason) return `will fail: ${short(m.reason, 120)}`;
  const src = m.take ? `take ${m.take.take} (seed ${m.take.seed})` : `previous seed ${m.previous.seed}`;
  const how = m.requested_n === LONGEST_VALID ? `longest valid (N = -1 → ${m.selected}): ` : "";
  if (m.selected > 0) {
    const pf = m.segments[m.selected] ? m.segments[m.selected].prefix_frames : null;
    const regen = m.selected === m.S - 1 ? `${m.selected}` : `${m.selected}..${m.S - 1}`;
    return `${how}keep 0..${m.selected - 1}` + (pf != null ? ` (${pf} frames)` : "") + ` of ${src} · regenerate ${regen}`;
  }
  return `${how}regenerate all ${m.S} segments (resume source: ${src}; click a segment to keep a prefix)`;
}

function segmentBlock(node, m, seg) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "seedreuse-seg " + (seg.kept ? "seedreuse-kept" : "seedreuse-regen");
  if (seg.state) b.classList.add(`seedreuse-seg-${seg.state.replace(/_/g, "-")}`);
  if (seg.index === m.selected) b.classList.add("seedreuse-selected");
  if (!seg.clickable) b.classList.add("seedreuse-disabled");
  b.dataset.seedreuseSegment = String(seg.index);
  if (seg.state) b.dataset.seedreuseState = seg.state;
  if (seg.field) b.dataset.seedreuseField = seg.field;
  if (seg.prefix_frames != null) b.dataset.seedreusePrefixFrames = String(seg.prefix_frames);
  if (seg.reason) b.dataset.seedreuseReason = seg.reason;
  b.textContent = String(seg.index);
  b.title = blockTitle(seg, m);
  b.addEventListener("pointerdown", (e) => e.stopPropagation());
  b.addEventListener("click", guard("timeline click", (e) => {
    e.preventDefault();
    e.stopPropagation();
    selectSegment(node, seg.index); // a disabled block is refused with its reason
  }));
  return b;
}

// The widget's height, the same for any number of kept takes: the take list shows TAKE_ROWS
// rows and scrolls past them (seedreuse.css), so a kept take never grows the node over what lies
// below it (a group title, the Session).
export const TAKE_ROWS = 3;
const BLOCKS_HEIGHT = 60; // blocks, label
const TAKE_ROW_HEIGHT = 20;
const ACTIONS_HEIGHT = 22;

function timelineHeight() {
  return BLOCKS_HEIGHT + 8 + TAKE_ROWS * TAKE_ROW_HEIGHT + ACTIONS_HEIGHT;
}

// A refusal's note takes the label's two lines (the node keeps its height); the label is back
// after the next accepted choice.
function showNote(tl) {
  tl.note.textContent = tl.noteText || "";
  tl.note.title = tl.noteText || "";
  tl.note.hidden = !tl.noteText;
  tl.label.hidden = !!tl.noteText;
}

export function renderTimeline(node) {
  const tl = node.__seedreuseTimeline;
  if (!tl) return;
  const m = timelineModel(node);
  tl.model = m;
  renderTakePicker(tl.takes, m.takes, m.selected, (t) => selectTake(node, t));
  tl.blocks.textContent = "";
  for (const seg of m.segments) tl.blocks.appendChild(segmentBlock(node, m, seg));
  renderActions(tl, m);
  showNote(tl);
  const label = timelineLabel(m);
  tl.label.textContent = label;
  tl.label.title = m.plan || m.reason || label;
  tl.root.dataset.seedreuseNode = String(node.id); // ids are assigned after onNodeCreated
  tl.root.dataset.seedreuseSelected = String(m.selected);
  tl.root.dataset.seedreuseRequested = String(m.requested_n);
  tl.root.dataset.seedreuseSegments = String(m.S);
  tl.root.dataset.seedreuseTake = m.take ? String(m.take.take) : "";
  tl.root.dataset.seedreuseFromTake = String(m.takes.requested);
  // a from_take widget restored from the Session's properties (a reloaded workflow): check with it
  const hasTake = !!widgetOf(sessionNodeOf(node), FROM_TAKE);
  if (hasTake && !tl.sawTake) scheduleCheck(300);
  tl.sawTake = hasTake;
  tl.rows = m.takes.takes.length;
  tl.root.dataset.seedreuseTakes = String(tl.rows);
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

// Re-renders when the Session's reuse_prefix_segments or from_take changed since the last render.
export function refreshTimelineOnDraw(node) {
  const tl = node.__seedreuseTimeline;
  if (!tl || !tl.model) return;
  const sess = sessionNodeOf(node);
  const n = Number((widgetOf(sess, "reuse_prefix_segments") || {}).value) || 0;
  const take = Number((widgetOf(sess, FROM_TAKE) || {}).value) || 0;
  if (tl.model.requested_n !== n || tl.model.takes.requested !== take) renderTimeline(node);
}

// Canvas fallback (no DOM widgets): a drawn widget; clicks pick the block under the pointer
// (no take picker: the from_take widget, once added, is set by hand there).
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
        ctx.globalAlpha = seg.clickable ? 1 : 0.45;
        ctx.fillStyle = seg.kept ? p.segKept : p.segRegen;
        ctx.fillRect(10 + seg.index * bw, y + 4, bw - 2, 22);
        ctx.fillStyle = p.segText;
        ctx.fillText(String(seg.index), 14 + seg.index * bw, y + 18);
      }
      ctx.globalAlpha = 1;
    },
    mouse(event, pos, n) {
      if (event.type !== "pointerdown" && event.type !== "mousedown") return false;
      const m = timelineModel(n);
      const bw = (n.size[0] - 20) / Math.max(1, m.S);
      const k = Math.floor((pos[0] - 10) / bw);
      if (m.segments[k]) selectSegment(n, k);
      return true;
    },
  };
}

function div(cls) {
  const el = document.createElement("div");
  el.className = cls;
  return el;
}

export function addTimeline(node) {
  if (node.__seedreuseTimeline) return;
  const root = div("seedreuse-timeline");
  root.dataset.seedreuseNode = String(node.id);
  const takes = div("seedreuse-takes");
  const blocks = div("seedreuse-timeline-blocks");
  const { actions, prefixLine, longest } = makeActions(() => selectLongest(node));
  const note = div("seedreuse-timeline-note");
  note.hidden = true;
  const label = div("seedreuse-timeline-label");
  root.append(takes, blocks, actions, note, label);
  const tl = (node.__seedreuseTimeline = { root, takes, blocks, actions, prefixLine, longest, note, label,
    rows: 0, noteText: "", model: null, widget: null, canvas: false });
  if (typeof node.addDOMWidget === "function") {
    const w = node.addDOMWidget(TIMELINE_WIDGET, "seedreuse-timeline", root, {
      serialize: false, hideOnZoom: false, getValue: () => undefined, setValue: () => {},
      margin: 6, getMinHeight: () => timelineHeight(), getMaxHeight: () => timelineHeight() + 12,
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
