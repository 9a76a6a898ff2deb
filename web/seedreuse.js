// SeedReuse frontend extension ("seedreuse.ui"): the entry module, which registers the extension.
//
// - Badges on every reuse node (SeedReuseEncode*, SeedReuseSegmentLoopStart), through the
//   frontend's node-badge list (node.badges: drawn in LiteGraph mode, rendered in the Vue
//   "Nodes 2.0" header, beside the host's own badges): before a run what the server's dry run
//   (POST /seedreuse/check) predicts ("will reuse", "will encode (why)", "will fail (why)" with
//   the error's fix); "running…" during a run; after it what happened ("reused · saved 2.3 s",
//   "encoded") and the prediction for the next run, from the "seedreuse.slot" /
//   "seedreuse.segments" websocket events.                               seedreuse/badges.js
// - A segment timeline widget on Segment Loop Start: clicking segment k sets
//   reuse_prefix_segments = k on the connected Session.                 seedreuse/timeline.js
// - Non-blocking toasts for the pack's errors (message, expected, actual, fix), read from the
//   structured error objects the server sends.              seedreuse/toasts.js, errors.js
// - A toast saying what automatic mode (SEEDREUSE_AUTO) did for a prompt this page queued: per
//   wrapped encoder output reused / encoded and the time saved ("seedreuse.auto_report").
//                                                                 seedreuse/auto_report.js
// - Work is driven by the host's graph-change events (seedreuse/changes.js), never by polling;
//   a graph without reuse nodes costs nothing.
// Styles and the one colour palette live in seedreuse.css.
//
// ComfyUI imports every .js file under web/ as an extension entry point; the modules under
// web/seedreuse/ only export, so importing them on their own does nothing. Everything is
// namespaced "seedreuse"; every hook is guarded and chained to the original. Tests read the
// state through window.__seedreuse (and the badges from node.badges or the Vue node's DOM).
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";
import { EXT_NAME, NS, START_TYPE, bindHost, chain, guard, isPackType, isReuseType, noteError }
  from "./seedreuse/core.js";
import { attachBadges, clearBadge } from "./seedreuse/badges.js";
import { notifyChange, onGraphConfigured, onHostChange, onNodeCreated } from "./seedreuse/changes.js";
import { onCheckAnswer, scheduleCheck } from "./seedreuse/dry_run_client.js";
import { installApi } from "./seedreuse/inspect.js";
import { ensureStylesheet } from "./seedreuse/palette.js";
import { noteQueued, onExecutionEnd, onExecutionError, onExecutionStart, onMergeEvent, onSegmentsEvent,
  onSlotEvent } from "./seedreuse/run_events.js";
import { addTimeline, refreshTimelineOnDraw, renderAllTimelines, renderTimeline } from "./seedreuse/timeline.js";
import { wrapQueue } from "./seedreuse/toasts.js";
import { instrumentMenuItems } from "./seedreuse/instrument.js";
import { noteQueuedAuto, onAutoReport } from "./seedreuse/auto_report.js";
import { installCacheBrowser } from "./seedreuse/cache_browser.js";
import { installViewRestore } from "./seedreuse/view_restore.js";

const STYLESHEET = new URL("./seedreuse.css", import.meta.url).href;

function listen(type, fn) {
  api.addEventListener(type, guard(type, fn));
}

function hookNodeType(nodeType, name) {
  const proto = nodeType.prototype;
  if (isReuseType(name)) {
    // badge entries in node.badges, added before the node joins the graph (seedreuse/badges.js)
    chain(proto, "onNodeCreated", function () {
      attachBadges(this);
    }, "onNodeCreated badges");
  }
  if (name === START_TYPE) {
    chain(proto, "onNodeCreated", function () {
      addTimeline(this);
    }, "onNodeCreated");
    chain(proto, "onDrawForeground", function () {
      refreshTimelineOnDraw(this);
    }, "onDrawForeground");
    chain(proto, "onConnectionsChange", function () {
      if (this.__seedreuseTimeline) renderTimeline(this);
    }, "onConnectionsChange");
  }
  chain(proto, "onRemoved", function () {
    if (isReuseType(name)) clearBadge(this);
    notifyChange("removed");
  }, "onRemoved");
}

const extension = {
  name: EXT_NAME,
  async setup() {
    try {
      ensureStylesheet(STYLESHEET);
      listen("seedreuse.slot", onSlotEvent);
      listen("seedreuse.segments", onSegmentsEvent);
      listen("seedreuse.merge", onMergeEvent);
      listen("seedreuse.auto_report", onAutoReport);
      listen("execution_start", onExecutionStart);
      listen("execution_error", onExecutionError);
      listen("execution_success", (e) => onExecutionEnd(e, true));
      listen("execution_interrupted", (e) => onExecutionEnd(e, false, "interrupted"));
      listen("graphChanged", onHostChange);
      document.addEventListener("visibilitychange", guard("visibilitychange", () => {
        if (document.visibilityState === "visible") scheduleCheck(300, true);
      }));
      wrapQueue((promptId) => {
        noteQueued(promptId);
        noteQueuedAuto(promptId);
      });
      onGraphConfigured(); // the graph as it is now (a workflow loaded later calls it again)
      NS.ready = true;
      installCacheBrowser(); // the "SeedReuse caches" sidebar tab (seedreuse/cache_browser.js)
      installViewRestore(app); // our examples keep their saved view (seedreuse/view_restore.js)
    } catch (e) {
      noteError("setup", e);
    }
  },
  async beforeRegisterNodeDef(nodeType, nodeData) {
    try {
      const name = (nodeData && nodeData.name) || nodeType.comfyClass || nodeType.type;
      if (isPackType(name)) hookNodeType(nodeType, name);
    } catch (e) {
      noteError("beforeRegisterNodeDef", e);
    }
  },
  nodeCreated(node) {
    try {
      onNodeCreated(node);
    } catch (e) {
      noteError("nodeCreated", e);
    }
  },
  getCanvasMenuItems: () => instrumentMenuItems(), // "make this workflow reusable" (seedreuse/instrument.js)
  async afterConfigureGraph() {
    try {
      onGraphConfigured();
    } catch (e) {
      noteError("afterConfigureGraph", e);
    }
  },
};

(function register() {
  try {
    const already = NS.registered || (Array.isArray(app.extensions) && app.extensions.some((e) => e && e.name === EXT_NAME));
    if (already) {
      console.debug(`[seedreuse] ${EXT_NAME} is already registered; skipping the second copy`);
      return;
    }
    NS.registered = true;
    bindHost(app, api);
    onCheckAnswer(renderAllTimelines); // each dry-run answer redraws the segment timelines
    installApi(NS);
    window.__seedreuse = NS;
    app.registerExtension(extension);
  } catch (e) {
    noteError("registerExtension", e);
  }
})();
