// Badges over the reuse nodes (SeedReuseEncode*, SeedReuseSegmentLoopStart), drawn on the
// canvas: before a run what the dry run predicts ("will reuse", "will encode (why)",
// "will fail (why)" + the error's fix), after a run what happened ("reused · saved 2.3 s",
// "encoded"). Only exports.
import { NS, fmtSeconds, short, state, typeOf } from "./core.js";
import { errorTitle } from "./errors.js";
import { keyOf, reuseNodes } from "./graph.js";
import { toneColors } from "./palette.js";

function failBadge(d) {
  const err = d.error || null;
  const why = (err && err.message) || d.reason;
  return { text: `will fail (${short(why, 60)})`, tone: "fail", error: err, fix: (err && err.fix) || null };
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

function withLines(b) {
  const lines = [b.text];
  if (b.fix) lines.push(`fix: ${b.fix}`);
  if (b.next) lines.push(`next: ${b.next}`);
  return { ...b, lines };
}

// What the badge shows now: the last run's result while the graph is unchanged since it
// arrived, else the dry run's prediction for the current graph.
export function badgeFor(key) {
  const r = state.run[key];
  const d = dryBadge(state.dry[key]);
  if (r && (r.sig === null || r.sig === state.lastSig)) {
    return withLines({ text: r.text, tone: r.tone, next: d && d.text !== r.text ? d.text : null, source: "run" });
  }
  if (d) return withLines({ ...d, source: "dry-run" });
  const err = state.checkError;
  if (err) {
    return withLines({ text: `check failed (${short(`${errorTitle(err)}: ${err.message}`, 50)})`, tone: "fail",
      error: err, fix: err.fix, source: "error" });
  }
  return withLines({ text: "checking…", tone: "pending", source: "pending" });
}

export function badgeDetail(node) {
  const key = keyOf(node);
  return { ...badgeFor(key), type: typeOf(node), dry: state.dry[key] || null, run: state.run[key] || null };
}

export function publishBadges() {
  const badges = {};
  const details = {};
  for (const node of reuseNodes()) {
    const key = keyOf(node);
    details[key] = badgeDetail(node);
    badges[key] = details[key].text;
  }
  NS.badges = badges;
  NS.badgeDetails = details;
}

export function clearBadge(node) {
  const key = keyOf(node);
  delete state.dry[key];
  delete state.run[key];
  delete NS.badges[key];
}

export function drawBadge(node, ctx) {
  const key = keyOf(node);
  const b = badgeFor(key);
  NS.badges[key] = b.text;
  if (!ctx || (node.flags && node.flags.collapsed)) return;
  const tone = toneColors(b.tone);
  const titleH = (window.LiteGraph && window.LiteGraph.NODE_TITLE_HEIGHT) || 30;
  const h = 18;
  ctx.save();
  ctx.font = "11px sans-serif";
  let y = -titleH - 6 - h * b.lines.length;
  for (let i = 0; i < b.lines.length; i++) {
    const text = short(b.lines[i], 70);
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
