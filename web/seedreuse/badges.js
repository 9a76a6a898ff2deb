// Badges of the reuse nodes (SeedReuseEncode*, SeedReuseSegmentLoopStart), shown through the
// frontend's node-badge API: every reuse node carries badge entries in `node.badges` (the list
// the frontend draws above the title in LiteGraph mode and renders in the node header in the
// Vue "Nodes 2.0" mode, beside its own node-source / node-id badges, never over them).
//   before a run:  what the dry run predicts ("will reuse", "will encode (why)", "will fail
//                  (why)" + a "fix: ..." badge)
//   during a run:  "running…" until the run ends
//   after a run:   what happened ("reused · saved 2.3 s", "encoded · 1.6 s"; on the node a run
//                  failed in: "failed: why" + its "fix: ...") + a "next: ..." badge with the dry
//                  run's prediction for the next run ("next: checking…" until the dry run after
//                  the run has answered)
//   always, when the value's key depends on a seed or a sampler upstream (the dry run's
//                  `depends_on`): a "depends on ..." line naming the first (and how many more),
//                  since such a value is reused only while that input is unchanged
// A line says its verdict first and its reason in few words (the fields a key mismatch names
// rather than its whole message: errors.js errorSummary), so its key words come first.
// Each entry is a function returning an LGraphBadge (the frontend's class when it exposes
// one, else a small object with the same draw/getWidth interface), so the frontend reads the
// current text and colours on every draw.
// Vue nodes: the frontend passes each badge object's fields to its NodeBadge component, and the
// fields that are not its props become attributes of the badge's element: `title` (the full
// lines: the native tooltip) and `data-seedreuse-badge`. Frontend 1.32 renders node.badges in
// the node header, beside the title, which does not shrink them: there the badge is one compact
// entry ("will encode", "reused", "keep 2/5", "running…"), the full lines in its tooltip, so the
// title keeps its room. Newer frontends (1.49, 1.58) render them in a row of their own under the
// widgets: there every line is an entry, and seedreuse.css wraps an entry that does not fit beside
// the others onto a line of its own (cut with "…" only past the node's width). On the canvas the
// lines are fitted the same way into rows above the title (badge_fit.js). Only exports.
import { NS, host, fmtSeconds, short, state, typeOf } from "./core.js";
import { errorSummary, errorTitle } from "./errors.js";
import { keyOf, reuseNodes } from "./graph.js";
import { toneColors } from "./palette.js";
import { drawnHostWidth, fitRows, hostBadgesWidth, stackedView } from "./badge_fit.js";

export const RUNNING_TEXT = "running…";
export const CHECKING_TEXT = "checking…";
const MAX_BADGE_CHARS = 90; // a line's longest text; the node's width cuts it further ("…")
export const MAX_VUE_HEADER_CHARS = 13; // Vue node header (frontend 1.32): one entry beside the title
export const BADGE_ATTR = "data-seedreuse-badge"; // attribute of our badge elements in a Vue node
const BADGES = "__seedreuseBadges"; // node -> {entries: [LGraphBadge-like], fns: [function]}

function failBadge(d) {
  const err = d.error || null;
  return { text: `will fail (${short(errorSummary(err, d.reason), 60)})`, tone: "fail", error: err,
    fix: (err && err.fix) || null };
}

// What a run that failed in this node says on it (run_events.js): "failed: why", and its fix.
export function failedText(err, fallback) {
  return `failed: ${short(errorSummary(err, fallback), 60)}`;
}

export function dryBadge(d) {
  if (!d) return null;
  if (d.kind === "segments") {
    if (d.will === "fail" || d.valid === false) return failBadge(d);
    const S = d.S;
    if (d.will === "resume" && d.N > 0) {
      return { text: `will keep ${d.N}/${S} segments, generate ${S - d.N}`, tone: "reuse" };
    }
    if (S == null) return { text: "will generate every segment (length from the audio)", tone: "encode" };
    return { text: `will generate all ${S} segment${S === 1 ? "" : "s"}`, tone: "encode" };
  }
  if (d.will === "reuse") return { text: "will reuse", tone: "reuse" };
  if (d.will === "encode") return { text: `will encode (${short(d.reason, 60)})`, tone: "encode" };
  if (d.will === "fail") return failBadge(d);
  return null;
}

export function runText(p) {
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

// The line that says what a value depends on (dry_run.py `depends_on`: a seed or a sampler
// upstream, the prompt itself); null when nothing.
export function dependsLine(deps) {
  if (!Array.isArray(deps) || deps.length === 0) return null;
  const d = deps[0] || {};
  const who = `node ${d.node} (${d.class_type})`;
  const what = d.kind === "seed" ? `${d.input} of ${who}`
    : d.kind === "sampler" ? `sampler ${who}`
    : `the ${d.kind === "prompt" ? "prompt" : "workflow"} ${who} reads`;
  const more = deps.length > 1 ? ` +${deps.length - 1} more` : "";
  return `depends on ${what}${more}: reused only while unchanged`;
}

function withLines(b, deps) {
  const lines = [b.text];
  if (b.fix) lines.push(`fix: ${b.fix}`);
  if (b.next) lines.push(`next: ${b.next}`);
  const dep = dependsLine(deps);
  if (dep) lines.push(dep);
  return { ...b, depends: dep, lines };
}

// What the badge says now. While a run of this graph is executing: "running…". Afterwards the
// run's result while the graph is unchanged since it arrived, with the prediction for the next
// run; otherwise the dry run's prediction for the current graph.
export function badgeFor(key) {
  if (state.running) return withLines({ text: RUNNING_TEXT, tone: "pending", source: "running" });
  const r = state.run[key];
  const d = state.dryStale ? null : dryBadge(state.dry[key]);
  const deps = state.dryStale ? null : (state.dry[key] || {}).depends_on;
  if (r && (r.sig === null || r.sig === state.lastSig)) {
    const next = state.dryStale ? CHECKING_TEXT : d && d.text !== r.text ? d.text : null;
    return withLines({ text: r.text, tone: r.tone, next, source: "run", error: r.error || null, fix: r.fix || null },
      deps);
  }
  if (d) return withLines({ ...d, source: "dry-run" }, deps);
  const err = state.checkError;
  if (err && !state.dryStale) {
    return withLines({ text: `check failed (${short(`${errorTitle(err)}: ${err.message}`, 50)})`, tone: "fail",
      error: err, fix: err.fix, source: "error" });
  }
  return withLines({ text: CHECKING_TEXT, tone: "pending", source: "pending" });
}

export function badgeDetail(node) {
  const key = keyOf(node);
  return { ...badgeFor(key), type: typeOf(node), dry: state.dry[key] || null, run: state.run[key] || null,
    shown: shownBadges(node) };
}

// The compact form of a badge line for the Vue node header: the words before the details
// ("will encode (why)" -> "will encode", "reused · saved 2.3 s" -> "reused", "failed: why" ->
// "failed", "will keep 2/5 segments, generate 3" -> "keep 2/5"), at most MAX_VUE_HEADER_CHARS.
export function compactLine(text) {
  let t = String(text || "").split("\n")[0];
  for (const sep of [" (", " · ", ", ", ": "]) {
    const i = t.indexOf(sep);
    if (i > 0) t = t.slice(0, i);
  }
  t = t.replace(/ segments?(…?)$/, "$1").replace(/^will generate all (\d+)$/, "generate $1")
    .replace(/^will generate every$/, "generate all");
  if (t.length > MAX_VUE_HEADER_CHARS && t.startsWith("will ")) t = t.slice(5);
  if (t.length > MAX_VUE_HEADER_CHARS) t = t.replace(/^(\w+) [\d/]+(…?)$/, "$1$2"); // "generating 120…"
  return short(t, MAX_VUE_HEADER_CHARS);
}

// Where Vue nodes render node.badges: null until one of ours is on the page, then "header"
// (frontend 1.32: in the node header, beside the title) or "row" (a badge row of its own).
let vuePlacement = null;
let placementTries = 0;
let placementTimer = null;

function detectPlacement() {
  placementTimer = null;
  if (vuePlacement) return;
  const el = document.querySelector(`[data-node-id] [${BADGE_ATTR}]`); // in a Vue node
  if (!el) {
    if (++placementTries < 200) placementTimer = setTimeout(detectPlacement, 100);
    return;
  }
  vuePlacement = el.closest(".lg-node-header") ? "header" : "row";
  NS.vueBadgePlacement = vuePlacement;
  const t = reactiveTick();
  t.n = (t.n + 1) % 1e9; // render again, in the placement's form
}

function schedulePlacement() {
  if (vuePlacement || placementTimer) return;
  placementTries = 0;
  placementTimer = setTimeout(detectPlacement, 0);
}

// ------------------------------------------------------------------ node.badges entries

// A reactive counter the badge functions read, so that a frontend rendering node.badges from
// a computed value (the Vue node header) renders again when a text changes. The frontend's
// workspace store (app.extensionManager) is a reactive object: the counter lives on it under
// the pack's prefix. Without one (older frontends) a plain object does: drawing reads anyway.
let tick = null;

function reactiveTick() {
  if (tick) return tick;
  const em = host.app && host.app.extensionManager;
  try {
    if (em && em.__v_isReactive) {
      if (!em.seedreuseBadgeTick) em.seedreuseBadgeTick = { n: 0 };
      tick = em.seedreuseBadgeTick;
      return tick;
    }
  } catch (_) { /* not a reactive store: fall back below */ }
  return { n: 0 }; // not cached: the store may appear later
}

// The same interface as the frontend's LGraphBadge (text, colours, visible, getWidth, draw),
// for a frontend that does not expose the class.
class FallbackBadge {
  constructor({ text, fgColor, bgColor }) {
    Object.assign(this, { text, fgColor, bgColor, fontSize: 12, padding: 6, height: 20, cornerRadius: 5,
      xOffset: 0, yOffset: 0 });
  }

  get visible() {
    return (this.text || "").length > 0;
  }

  getWidth(ctx) {
    if (!this.visible) return 0;
    const font = ctx.font;
    ctx.font = `${this.fontSize}px sans-serif`;
    const w = ctx.measureText(this.text).width;
    ctx.font = font;
    return w + this.padding * 2;
  }

  draw(ctx, x, y) {
    if (!this.visible) return;
    const { font, fillStyle, textBaseline, textAlign } = ctx;
    const w = this.getWidth(ctx);
    ctx.font = `${this.fontSize}px sans-serif`;
    ctx.fillStyle = this.bgColor;
    ctx.beginPath();
    if (ctx.roundRect) ctx.roundRect(x + this.xOffset, y + this.yOffset, w, this.height, this.cornerRadius);
    else ctx.rect(x + this.xOffset, y + this.yOffset, w, this.height);
    ctx.fill();
    ctx.fillStyle = this.fgColor;
    ctx.textBaseline = "middle";
    ctx.textAlign = "left";
    ctx.fillText(this.text, x + this.xOffset + this.padding, y + this.yOffset + this.height / 2 + 1);
    Object.assign(ctx, { font, fillStyle, textBaseline, textAlign });
  }
}

function makeBadge() {
  const Cls = typeof window.LGraphBadge === "function" ? window.LGraphBadge : FallbackBadge;
  try {
    return new Cls({ text: "", fgColor: "", bgColor: "" });
  } catch (_) {
    return new FallbackBadge({ text: "", fgColor: "", bgColor: "" });
  }
}

// The badge lines of a node: [main, "fix: ..."?, "next: ..."?, "depends on ..."?] with their tones.
function lineTones(b) {
  return b.lines.map((line, i) => ({
    text: line,
    tone: i === 0 ? b.tone : line.startsWith("fix: ") ? "fail" : "pending",
  }));
}

const SLOTS = 4; // main + fix + next + depends

// Adds the node's badge entries to node.badges (once, when the node is created: a Vue node
// header takes the list it finds when the node is added to the graph).
export function attachBadges(node) {
  if (!node || node[BADGES]) return;
  const entries = [];
  const fns = [];
  for (let i = 0; i < SLOTS; i++) {
    const badge = makeBadge();
    entries.push(badge);
    const fn = () => {
      void reactiveTick().n; // read: a computed that calls this renders again on a change
      const vue = !!(window.LiteGraph && window.LiteGraph.vueNodesMode);
      const line = badge.seedreuseLine || "";
      let place = null;
      if (!vue) {
        // the canvas: all our lines fitted together into rows above the title (badge_fit.js)
        const own = node[BADGES];
        if (own.quiet) {
          badge.text = ""; // measuring the host's badges (badge_fit.js drawnHostWidth)
          return badge;
        }
        if (i === 0 || !own.fitted) own.fitted = fitCanvasRows(node, own);
        place = own.fitted[i] || { text: "", row: 0 };
        badge.text = place.text;
        badge["data-seedreuse-fit"] = undefined;
      } else {
        if (!vuePlacement) schedulePlacement();
        if (vuePlacement === "header") {
          // one compact entry; the other lines only in its tooltip
          badge.text = i === 0 && line ? compactLine(line) : "";
          badge.title = i === 0 ? badge.seedreuseAll || line : "";
        } else {
          // a row of its own: seedreuse.css wraps these elements onto lines of their own
          badge.text = line ? short(line, MAX_BADGE_CHARS) : "";
          badge.title = line;
          badge["data-seedreuse-fit"] = "row";
        }
      }
      const t = palette(badge.seedreuseTone);
      if (t.bg) badge.bgColor = t.bg;
      if (t.fg) badge.fgColor = t.fg;
      return place && place.row > 0 ? stackedView(badge, place) : badge;
    };
    fn.seedreuse = true;
    fns.push(fn);
  }
  node[BADGES] = { entries, fns };
  if (!Array.isArray(node.badges)) node.badges = [];
  node.badges.push(...fns);
  updateNodeBadges(node);
}

// Where our entries go on the canvas (badge_fit.js fitRows), within the node's width beside the
// host's badges. The host's width is measured again when the node's width or a badge line changed.
function fitCanvasRows(node, own) {
  const lines = own.entries.map((b) => (b.seedreuseLine ? short(b.seedreuseLine, MAX_BADGE_CHARS) : ""));
  const width = Array.isArray(node.size) || ArrayBuffer.isView(node.size) ? node.size[0] : node.width || 0;
  const key = `${width}|${lines.join("|")}`;
  if (own.hostKey !== key) {
    const drawn = drawnHostWidth(node, own.fns.length, (q) => { own.quiet = q; });
    own.hostWidth = drawn !== null ? drawn : hostBadgesWidth(node, own.fns);
    own.hostKey = key;
  }
  return fitRows(own.entries, lines, width, own.hostWidth);
}

function palette(tone) {
  return toneColors(tone || "pending");
}

export function updateNodeBadges(node) {
  const own = node && node[BADGES];
  if (!own) return null;
  const b = badgeFor(keyOf(node));
  const lines = lineTones(b);
  own.entries.forEach((badge, i) => {
    const l = lines[i];
    badge.seedreuseAll = b.lines.join("\n"); // the tooltip of the compact header entry
    badge[BADGE_ATTR] = i === 0 ? "main" : l && l.text.startsWith("fix: ") ? "fix" : "next";
    badge.seedreuseLine = l ? l.text : ""; // shortened for the renderer when read
    badge.text = l ? short(l.text, MAX_BADGE_CHARS) : "";
    badge.seedreuseTone = l ? l.tone : "pending";
  });
  return b;
}

// The texts the node's badge entries show now (what the frontend draws / renders).
export function shownBadges(node) {
  const own = node && node[BADGES];
  if (!own) return [];
  return (node.badges || []).filter((f) => own.fns.includes(f)).map((f) => f().text).filter((t) => t);
}

// Every change of a badge's lines, in order (the last 400): what a user saw, for the tests.
function recordHistory(details) {
  const h = (NS.badgeHistory = NS.badgeHistory || []);
  NS.badgeLast = NS.badgeLast || {};
  for (const [key, d] of Object.entries(details)) {
    const lines = d.lines.join(" | ");
    if (NS.badgeLast[key] === lines) continue;
    NS.badgeLast[key] = lines;
    h.push({ key, lines: d.lines, running: !!state.running, at: Date.now() });
  }
  if (h.length > 400) h.splice(0, h.length - 400);
}

export function publishBadges() {
  const badges = {};
  const details = {};
  for (const node of reuseNodes()) {
    const key = keyOf(node);
    if (!node[BADGES]) attachBadges(node);
    updateNodeBadges(node);
    details[key] = badgeDetail(node);
    badges[key] = details[key].text;
  }
  NS.badges = badges;
  NS.badgeDetails = details;
  recordHistory(details);
  const t = reactiveTick();
  t.n = (t.n + 1) % 1e9;
}

export function clearBadge(node) {
  const key = keyOf(node);
  delete state.dry[key];
  delete state.run[key];
  delete NS.badges[key];
}
