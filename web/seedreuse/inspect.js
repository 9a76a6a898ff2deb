// The inspection API on window.__seedreuse (tests read the badges and timelines from here). Only exports.
import { NS, state } from "./core.js";
import { badgeDetail, badgeFor } from "./badges.js";
import { checkNow } from "./dry_run_client.js";
import { keyOf, nodeById } from "./graph.js";
import { selectSegment, timelineModel } from "./timeline.js";
import { showToast } from "./toasts.js";

function timeline(id) {
  const node = nodeById(id);
  if (!node || !node.__seedreuseTimeline) return null;
  const m = timelineModel(node);
  return { segments: m.segments, selected: m.selected, S: m.S, previous: m.previous, valid_n: m.valid_n,
    session: m.session, will: m.will, reason: m.reason, fix: m.fix, dom: !node.__seedreuseTimeline.canvas };
}

// Clicks the real DOM block (so the click path is exercised) or, for the canvas fallback,
// selects directly. Returns the resulting timeline.
function clickSegment(id, k) {
  const node = nodeById(id);
  if (!node || !node.__seedreuseTimeline) throw new Error(`node ${id} has no seedreuse timeline`);
  const tl = node.__seedreuseTimeline;
  if (tl.canvas) selectSegment(node, k);
  else {
    const el = tl.blocks.querySelector(`[data-seedreuse-segment="${k}"]`);
    if (!el) throw new Error(`timeline of node ${id} has no segment ${k}`);
    el.click();
  }
  return timeline(id);
}

// Every entry of a node's node.badges as the frontend reads it (the host's badges too), in order:
// [{text, ours, bg, fg}].
function nodeBadges(id) {
  const node = nodeById(id);
  if (!node) return null;
  return (node.badges || []).map((b) => {
    let v = b;
    try {
      v = typeof b === "function" ? b() : b;
    } catch (_) {
      v = null;
    }
    return { text: v ? String(v.text || "") : "", ours: !!(b && b.seedreuse), bg: v ? v.bgColor : null,
      fg: v ? v.fgColor : null };
  });
}

export function installApi(target) {
  Object.assign(target, {
    version: 2,
    badge: (id) => {
      const node = nodeById(id);
      return node ? badgeFor(keyOf(node)).text : NS.badges[String(id)] || null;
    },
    // The badge as drawn now: text, every drawn line (incl. "fix: ..."), tone, structured error.
    badgeInfo: (id) => {
      const node = nodeById(id);
      return node ? badgeDetail(node) : null;
    },
    nodeBadges,
    timeline,
    clickSegment,
    checkNow,
    state,
    showToast,
  });
}
