// The take picker of the segment timeline: one row per kept take of the segment cache (the dry
// run's `takes`: number, seed, latest, created time, segments, longest valid prefix), and the
// validity of the picked take's segments for the current graph (valid / run_time / invalid with
// the first differing field). Picking a take sets the Session's `from_take` (0 for the latest).
// `from_take` is an input socket of the Session (no widget, so saved workflows keep their
// widget layout): the first pick adds a number widget of that name to the Session, paired with
// that socket (graph.js pairWidgetWithInput: the Session shows from_take once, as a widget with
// its socket, in both canvas modes), which the prompt then carries; its value is kept in the
// node's properties (not in widgets_values), and the widget comes back from them after a reload.
// A linked from_take socket wins over the widget: the picker is then disabled, saying so. Only
// exports.
import { framesText, host, guard, noteError, short } from "./core.js";
import { captureWorkflowState, graph, isInputLinked, pairWidgetWithInput, widgetOf } from "./graph.js";

export const FROM_TAKE = "from_take";
export const TAKE_PROPERTY = "seedreuse_from_take";
export const LONGEST_VALID = -1; // reuse_prefix_segments = -1: the longest still-valid prefix
const MAX_LISTED_P = 12; // P(N) is listed per N up to this many segments
const MAX_TAKE_NUMBER = 1000000000;

// Sets a widget's value as a user edit does: its callback and the node's onWidgetChanged run.
export function setWidget(node, widget, v) {
  const old = widget.value;
  widget.value = v;
  try {
    if (widget.callback) widget.callback(v, host.app.canvas, node, null, null);
  } catch (e) {
    noteError("widget callback", e);
  }
  try {
    if (node.onWidgetChanged) node.onWidgetChanged(widget.name, v, old, widget);
  } catch (e) {
    noteError("onWidgetChanged", e);
  }
}

// The workflow changed (unsaved-changes marker, undo history).
export function markDirty() {
  try {
    const g = graph();
    if (g && g.change) g.change();
    captureWorkflowState();
  } catch (e) {
    noteError("mark dirty", e);
  }
}

export function fromTakeLinked(sess) {
  const slot = sess ? (sess.inputs || []).findIndex((i) => i.name === FROM_TAKE) : -1;
  return slot >= 0 && isInputLinked(sess, slot);
}

function storedTake(sess) {
  const v = sess && sess.properties ? Number(sess.properties[TAKE_PROPERTY]) : NaN;
  return Number.isInteger(v) && v >= 0 ? v : null;
}

// The Session's from_take widget, added on first use (create) or when its properties hold one.
export function takeWidget(sess, create = false) {
  if (!sess) return null;
  const w = widgetOf(sess, FROM_TAKE);
  if (w) return w;
  const stored = storedTake(sess);
  if ((!create && stored === null) || typeof sess.addWidget !== "function") return null;
  const added = sess.addWidget("number", FROM_TAKE, stored || 0, (v) => {
    sess.properties = sess.properties || {};
    sess.properties[TAKE_PROPERTY] = Math.max(0, Math.round(Number(v) || 0));
  }, { min: 0, max: MAX_TAKE_NUMBER, step: 10, step2: 1, precision: 0, round: 1 });
  if (added) {
    added.serialize = false; // not in widgets_values: the saved widget layout stays the node's own
    added.tooltip = "the kept take to resume from: 0 = the latest (set by the SeedReuse timeline's take picker)";
    pairWidgetWithInput(sess, FROM_TAKE); // one from_take on the node: the widget, with its socket
  }
  return added || null;
}

// The from_take the prompt carries: the widget's value (0 without one).
export function requestedTake(sess) {
  const w = takeWidget(sess);
  return w ? Math.max(0, Math.round(Number(w.value) || 0)) : 0;
}

// The take picker's model from a dry-run answer: every kept take, the picked one (from_take, or
// the latest for 0), and why picking is not possible (from_take linked).
export function takeModel(d, sess) {
  const reports = d && Array.isArray(d.takes) ? d.takes : [];
  const requested = requestedTake(sess);
  const linked = fromTakeLinked(sess);
  const chosen = requested ? reports.find((t) => t.take === requested) || null
    : reports.find((t) => t.latest) || reports[0] || null;
  return {
    takes: reports, requested, linked, take: chosen,
    missing: requested && !chosen && reports.length ? requested : null,
    disabledReason: linked ? "from_take is connected to a link on the Session: the link decides the take" : null,
  };
}

// A segment block of the picked take: its validity state for this graph, whether keeping
// segments 0..k-1 (N = k) is accepted, and why not.
export function segmentOfTake(t, k) {
  if (!t) return { state: null, field: null, clickable: null, reason: null };
  const v = (t.segment_validity || [])[k] || null;
  const state = v ? v.state : k < t.segments ? "unknown" : "new";
  const field = v && v.field ? v.field : null;
  const longest = typeof t.longest_valid === "number" ? t.longest_valid : 0;
  const clickable = k <= longest;
  let reason = null;
  if (!clickable) {
    const fi = t.first_invalid;
    if (fi && fi.segment < k) {
      reason = `segment ${fi.segment} of take ${t.take} is ${fi.state}` + (fi.field ? `: ${fi.field} differs` : "");
    } else if (k > t.segments) {
      reason = `take ${t.take} has ${t.segments} segments`;
    } else {
      reason = `take ${t.take} can be resumed after at most ${longest} segments`;
    }
    reason = `N = ${k} is beyond the longest valid prefix (N = ${longest}): ${reason}`;
  }
  return { state, field, clickable, reason };
}

function fmtTime(t) {
  if (typeof t !== "number" || !isFinite(t)) return "";
  try {
    return new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  } catch (_) {
    return "";
  }
}

function rowText(t) {
  return `#${t.take}` + (t.latest ? " latest" : "") + ` · seed ${t.seed} · ${t.segments} seg` +
    (fmtTime(t.created_at) ? ` · ${fmtTime(t.created_at)}` : "") + ` · longest ${t.longest_valid}`;
}

function rowTitle(t, m, effN) {
  const lines = [`take ${t.take}${t.latest ? " (latest)" : ""}: seed ${t.seed}, ${t.segments} segments, ` +
    framesText(t) + (t.source_take ? `, resumed from take ${t.source_take}` : "")];
  if (t.created_at) lines.push(`made ${new Date(t.created_at * 1000).toLocaleString()}`);
  lines.push(`longest valid prefix for this graph: N = ${t.longest_valid}` + (t.first_invalid
    ? ` (segment ${t.first_invalid.segment} ${t.first_invalid.state}${t.first_invalid.field ? ": " +
      t.first_invalid.field : ""})` : ""));
  if (effN > t.longest_valid) lines.push(`N = ${effN} is not valid for this take: pick a segment ≤ ${t.longest_valid}`);
  if (m.disabledReason) lines.push(m.disabledReason);
  else lines.push(`click: resume from this take (from_take = ${t.latest ? 0 : t.take})`);
  return lines.join("\n");
}

// Draws the rows into `box`; onPick(take report) when a row is clicked.
export function renderTakePicker(box, m, effN, onPick) {
  box.textContent = "";
  if (!m.takes.length && !m.missing) {
    // the list keeps its height before the first take (the node does not grow when one is kept)
    const none = document.createElement("div");
    none.className = "seedreuse-take-none";
    none.textContent = "no kept take yet: each run keeps one to resume from";
    box.appendChild(none);
  }
  for (const t of m.takes) {
    const row = document.createElement("button");
    row.type = "button";
    row.className = "seedreuse-take";
    if (m.take && t.take === m.take.take) row.classList.add("seedreuse-take-picked");
    if (effN > t.longest_valid) row.classList.add("seedreuse-take-warn");
    if (m.disabledReason) row.classList.add("seedreuse-disabled");
    row.dataset.seedreuseTake = String(t.take);
    row.dataset.seedreuseSeed = String(t.seed);
    row.dataset.seedreuseLatest = String(!!t.latest);
    row.dataset.seedreuseSegments = String(t.segments);
    row.dataset.seedreuseLongest = String(t.longest_valid);
    row.textContent = rowText(t);
    row.title = rowTitle(t, m, effN);
    row.addEventListener("pointerdown", (e) => e.stopPropagation());
    row.addEventListener("click", guard("take click", (e) => {
      e.preventDefault();
      e.stopPropagation();
      onPick(t);
    }));
    box.appendChild(row);
  }
  if (m.missing) {
    const miss = document.createElement("div");
    miss.className = "seedreuse-take-missing";
    miss.textContent = short(`from_take = ${m.missing}: the cache keeps no take ${m.missing}; pick a kept one`, 90);
    box.appendChild(miss);
  }
}

// [shown text, tooltip]: P(N), the frames N kept segments hold, per N (or the formula).
function prefixLine(m) {
  if (!m.segments.length) return ["", ""];
  const rule = `P(N) = N·${m.F - m.M} + ${m.M} frames (P(0) = 0)`;
  if (m.segments.length > MAX_LISTED_P) {
    const s = m.segments[m.selected];
    return [`P(${m.selected}) = ${s ? s.prefix_frames : "?"} frames`, rule];
  }
  return ["P(N): " + m.segments.map((s) => s.prefix_frames).join(" · "),
    m.segments.map((s) => `N = ${s.index}: ${s.prefix_frames} frames`).join("\n")];
}

// The action row under the blocks: "longest valid" and P(N) per N.
export function makeActions(onLongest) {
  const actions = document.createElement("div");
  actions.className = "seedreuse-timeline-actions";
  const prefix = document.createElement("div");
  prefix.className = "seedreuse-prefix-line";
  const longest = document.createElement("button");
  longest.type = "button";
  longest.className = "seedreuse-longest";
  longest.addEventListener("pointerdown", (e) => e.stopPropagation());
  longest.addEventListener("click", guard("longest valid click", (e) => {
    e.preventDefault();
    e.stopPropagation();
    onLongest();
  }));
  actions.append(longest, prefix);
  return { actions, prefixLine: prefix, longest };
}

// tl: the timeline's elements; m: timeline.js timelineModel.
export function renderActions(tl, m) {
  const has = !!m.take && m.S > 0;
  [tl.prefixLine.textContent, tl.prefixLine.title] = prefixLine(m);
  tl.prefixLine.dataset.seedreusePrefixFrames = m.segments.map((s) => s.prefix_frames).join(",");
  const b = tl.longest;
  b.disabled = !has;
  b.textContent = "longest valid" + (m.longest != null ? ` (N = ${m.longest})` : "");
  b.title = has ? `set reuse_prefix_segments = -1: keep as many segments of take ${m.take.take} as are still ` +
    `valid (now ${m.longest}), decided again before any sampling` : "no kept take to resume from";
  b.classList.toggle("seedreuse-longest-on", m.requested_n === LONGEST_VALID);
}
