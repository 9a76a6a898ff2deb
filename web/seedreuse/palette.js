// The stylesheet (web/seedreuse.css) and its palette. Every colour is defined once, as a CSS
// custom property of the stylesheet; canvas drawing reads them through getComputedStyle once
// the stylesheet has loaded. Only exports.
import { STYLE_ID } from "./core.js";
import { redraw } from "./graph.js";

// badge tone -> palette tokens (--seedreuse-<token>-bg / -fg)
const TONE_TOKENS = { reuse: "reuse", reused: "reuse", encode: "encode", encoded: "encoded", fail: "fail",
  pending: "pending" };

let cached = null;

export function ensureStylesheet(href) {
  if (document.getElementById(STYLE_ID)) return;
  const link = document.createElement("link");
  link.id = STYLE_ID;
  link.rel = "stylesheet";
  link.href = href;
  link.addEventListener("load", () => {
    cached = null; // read the palette again, now that it is there
    redraw();
  });
  document.head.appendChild(link);
}

function read() {
  const cs = getComputedStyle(document.documentElement);
  const v = (name) => cs.getPropertyValue(`--seedreuse-${name}`).trim();
  const tones = {};
  for (const [tone, token] of Object.entries(TONE_TOKENS)) tones[tone] = { bg: v(`${token}-bg`), fg: v(`${token}-fg`) };
  return { tones, segKept: v("seg-kept-bg"), segRegen: v("seg-regen-bg"), segText: v("seg-label") };
}

// The palette for canvas drawing; read once (until the stylesheet has loaded, every call reads).
export function palette() {
  if (cached) return cached;
  const p = read();
  if (p.tones.pending.bg) cached = p;
  return p;
}

export function toneColors(tone) {
  const t = palette().tones;
  return t[tone] || t.pending;
}
