// Fitting the pack's badges into their node's width, beside the host's own badges (LiteGraph
// canvas mode: the frontend draws node.badges in one row above the title, aligned to the node's
// left or right edge, and never shortens them). Our lines share what the node's width leaves after the
// host's badges, in order (main, fix, next): each is cut with "…" to the room left, and a line
// with no room for MIN_CHARS is left out; so the row never runs past the node's right edge and
// never pushes the host's badges off it. Widths are measured with the badge object itself
// (its getWidth), on an offscreen canvas. Vue nodes: seedreuse.css shrinks our badge elements
// instead (the element's title holds the whole line). Only exports.
const MIN_CHARS = 4;
const GAP = 2; // LGraphNode.drawBadges' gap between badges

let measureCtx = null;

function ctx() {
  if (!measureCtx) measureCtx = document.createElement("canvas").getContext("2d");
  return measureCtx;
}

// The width a badge object draws at with `text` (its own getWidth; 0 when it draws nothing).
function widthWith(badge, text) {
  const keep = badge.text;
  try {
    badge.text = text;
    return text ? badge.getWidth(ctx()) : 0;
  } catch (_) {
    return 0;
  } finally {
    badge.text = keep;
  }
}

function hostBadge(entry) {
  try {
    return typeof entry === "function" ? entry() : entry;
  } catch (_) {
    return null;
  }
}

// The width the host's badges take in the node's row, as the frontend lays it out: the row is
// drawn once on an offscreen canvas with our entries empty (`quiet` makes our badge functions
// return them so), through a context that records where the host's badges draw. drawBadges
// right-aligns the row (1.32.9, 1.49.6, 1.58.1), so the leftmost drawing is where it starts;
// 1.58.1 draws badges that are not in node.badges (its badge rows) first. null: the frontend has
// no drawBadges, or it failed (then hostBadgesWidth below counts node.badges).
export function drawnHostWidth(node, count, quiet) {
  if (typeof node.drawBadges !== "function") return null;
  const real = ctx();
  let left = Infinity;
  const rec = new Proxy(real, {
    get(t, k) {
      const v = t[k];
      if (typeof v !== "function") return v;
      return (...a) => {
        if ((k === "fillText" || k === "strokeText") && typeof a[1] === "number" && a[0]) left = Math.min(left, a[1]);
        if ((k === "rect" || k === "roundRect" || k === "fillRect" || k === "drawImage") && typeof a[k === "drawImage" ? 1 : 0] === "number") {
          left = Math.min(left, a[k === "drawImage" ? 1 : 0]);
        }
        return v.apply(t, a);
      };
    },
    set(t, k, v) {
      t[k] = v;
      return true;
    },
  });
  try {
    quiet(true);
    real.save();
    node.drawBadges(rec);
  } catch (_) {
    return null;
  } finally {
    real.restore();
    quiet(false);
  }
  const width = Array.isArray(node.size) || ArrayBuffer.isView(node.size) ? node.size[0] : node.width || 0;
  return left === Infinity ? 0 : Math.max(0, width - left - GAP * count);
}

// The width of the node's badges in node.badges that are not ours (the host's node-source,
// node-id badges...).
export function hostBadgesWidth(node, ours) {
  let w = 0;
  for (const entry of node.badges || []) {
    if (ours.includes(entry)) continue;
    const b = hostBadge(entry);
    if (b && b.text && typeof b.getWidth === "function") {
      try {
        w += b.getWidth(ctx()) + GAP;
      } catch (_) { /* a badge that cannot measure itself takes no room */ }
    }
  }
  return w;
}

// The longest cut of `line` ("…" at the end) that draws within `room`; "" below MIN_CHARS.
function cut(badge, line, room) {
  if (widthWith(badge, line) <= room) return line;
  let lo = 0;
  let hi = line.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (widthWith(badge, line.slice(0, mid).trimEnd() + "…") <= room) lo = mid;
    else hi = mid - 1;
  }
  return lo >= MIN_CHARS ? line.slice(0, lo).trimEnd() + "…" : "";
}

// The texts our badge entries draw: lines[i] fitted into badges[i], all within `width` minus
// the host's badges. Every entry takes its GAP, even an empty one (drawBadges adds it).
export function fitRow(badges, lines, width, hostWidth) {
  let room = width - hostWidth - GAP * lines.length;
  return lines.map((line, i) => {
    if (!line || room <= 0) return "";
    const t = cut(badges[i], line, room);
    if (t) room -= widthWith(badges[i], t);
    return t;
  });
}
