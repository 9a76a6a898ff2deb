// Fitting the pack's badges into their node's width, beside the host's own badges (LiteGraph
// canvas mode: the frontend draws node.badges in one row above the title, right-aligned, and
// never shortens them). Our lines (main, fix, next) go in order into what the node's width
// leaves after the host's badges; a line that does not fit WHOLE in the room its row has left
// starts a row of its own above (the node's whole width, right-aligned like the host's row), and
// only a line wider than the node is cut with "…" (a cut shorter than MIN_CHARS is left out). So
// a line keeps its words up to the node's width (at the templates' 340 px: its verdict and
// reason), the rows never run past the node's right edge and never push the host's badges off
// it. Widths are measured with the badge object itself (its getWidth), on an offscreen canvas.
// Vue nodes: seedreuse.css wraps our badge elements the same way (the element's title holds the
// whole line). Only exports.
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

// Where our lines go: [{text, row, x}] per line (text "" for a line left out). Row 0 is the host's
// row, where drawBadges places ours after the host's badges; rows 1, 2… are above it, each laid
// out here: x is a badge's left edge from the node's left, the row right-aligned. Every entry
// takes its GAP in row 0, even an empty or a stacked one (drawBadges adds it).
export function fitRows(badges, lines, width, hostWidth) {
  const out = lines.map(() => ({ text: "", row: 0, x: 0 }));
  const rows = [[]];
  let room = width - hostWidth - GAP * lines.length;
  lines.forEach((line, i) => {
    if (!line) return;
    const row = rows.length - 1;
    if (widthWith(badges[i], line) > room && (row === 0 || rows[row].length)) {
      rows.push([]); // a row of its own, above
      room = width;
    }
    const text = cut(badges[i], line, room);
    if (!text) return;
    const w = widthWith(badges[i], text);
    rows[rows.length - 1].push({ i, w });
    room -= w + GAP;
    out[i] = { text, row: rows.length - 1, x: 0 };
  });
  for (const items of rows.slice(1)) {
    let x = width - items.reduce((sum, it) => sum + it.w, 0) - GAP * (items.length - 1);
    for (const it of items) {
      out[it.i].x = x;
      x += it.w + GAP;
    }
  }
  return out;
}

// What drawBadges gets for an entry on a row above the host's: it takes no room in the host's row
// (width 0) and draws the badge at its own row and place.
export function stackedView(badge, place) {
  return {
    seedreuseStacked: true,
    get text() { return badge.text; },
    get height() { return badge.height; },
    get visible() { return badge.visible !== false; },
    get bgColor() { return badge.bgColor; },
    get fgColor() { return badge.fgColor; },
    getWidth: () => 0,
    draw(ctx, _x, y) {
      badge.draw(ctx, place.x, y - place.row * ((badge.height || 20) + GAP));
    },
  };
}
