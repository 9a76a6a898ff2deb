// The inspection API on window.__seedreuse (tests read the canvas badges from here). Only exports.
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
    timeline,
    clickSegment,
    checkNow,
    state,
    showToast,
  });
}
