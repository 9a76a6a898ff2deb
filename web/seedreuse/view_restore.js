// The saved view of the pack's own example workflows, kept when a frontend refits it.
//
// Why: our examples (example_workflows/*.json, marked by extra.seedreuse_example) are laid out to
// be read at their saved view (extra.ds: 80 % zoom, the note and the first nodes in view). Newer
// frontends (1.58.1) fit every workflow opened from the template browser to the screen instead
// (ComfyApp.loadGraphData with openSource "template" calls fitView and ignores extra.ds), so a long
// example opens at ~26 % zoom, where nothing is readable. 1.32.9 keeps the saved view.
//
// What: wraps app.loadGraphData (the ComfyApp instance the template dialog calls: in 1.58.1 the
// same object scripts/app.js gives extensions); after the original resolved, and only when
//   - the workflow is one of ours (its extra.seedreuse_example is present, in the data and in the
//     graph now loaded: a load that failed or was replaced by a newer one is left alone),
//   - it carries a valid extra.ds, the call asked for its view (restore_view not false) and the
//     user's Comfy.EnableWorkflowViewRestore is on (the default),
//   - the frontend's view differs from the saved one,
// it sets canvas.ds.offset / scale to the saved ones (scale clamped to the canvas's limits) and
// redraws. Where the frontend already restored the view (1.32.9) it changes nothing.
// What it does not do: touch any other workflow (not ours: the frontend's view stays exactly as
// the frontend made it), restore a view the file lacks, or follow a camera the frontend applies
// later (1.58.1 defers the camera while the canvas is hidden; then its fit stays). Users can
// still zoom/fit as they like afterwards; the view is set once per load. Only exports (the entry
// module calls installViewRestore in setup).
import { NS, host, noteError } from "./core.js";

const MARK = "__seedreuseViewRestore";

function settingOn(app, id) {
  try {
    const s = app.extensionManager && app.extensionManager.setting;
    const v = s && typeof s.get === "function" ? s.get(id)
      : app.ui && app.ui.settings && typeof app.ui.settings.getSettingValue === "function"
        ? app.ui.settings.getSettingValue(id) : undefined;
    return v !== false; // unknown counts as the default (on)
  } catch (_) {
    return true;
  }
}

// The saved view of one of our examples, or null (not ours, or no valid extra.ds).
export function savedView(graphData) {
  const extra = graphData && typeof graphData === "object" ? graphData.extra : null;
  if (!extra || !extra.seedreuse_example) return null;
  const ds = extra.ds;
  if (!ds || typeof ds !== "object" || !ds.offset) return null;
  const [x, y] = [Number(ds.offset[0]), Number(ds.offset[1])];
  const scale = Number(ds.scale);
  if (!isFinite(x) || !isFinite(y) || !isFinite(scale) || scale <= 0) return null;
  return { offset: [x, y], scale };
}

export function applySavedView(app, view) {
  const canvas = app.canvas;
  const ds = canvas && canvas.ds;
  if (!ds || !view) return false;
  let scale = view.scale;
  if (typeof ds.min_scale === "number" && ds.min_scale > 0) scale = Math.max(scale, ds.min_scale);
  if (typeof ds.max_scale === "number" && ds.max_scale > 0) scale = Math.min(scale, ds.max_scale);
  const same = Math.abs(ds.scale - scale) < 1e-6 && Math.abs(ds.offset[0] - view.offset[0]) < 0.5
    && Math.abs(ds.offset[1] - view.offset[1]) < 0.5;
  if (same) return false;
  ds.offset = [view.offset[0], view.offset[1]];
  ds.scale = scale;
  if (typeof canvas.setDirty === "function") canvas.setDirty(true, true);
  NS.work.viewRestores = (NS.work.viewRestores || 0) + 1;
  return true;
}

export function installViewRestore(app = host.app) {
  if (!app || typeof app.loadGraphData !== "function" || app.loadGraphData[MARK]) return;
  const original = app.loadGraphData;
  const wrapped = async function (graphData, clean, restoreView, ...rest) {
    const self = this || app;
    const result = await original.call(self, graphData, clean, restoreView, ...rest);
    try {
      const view = restoreView === false ? null : savedView(graphData);
      const graph = self.rootGraph || self.graph;
      if (view && result !== false && graph && graph.extra && graph.extra.seedreuse_example
          && settingOn(self, "Comfy.EnableWorkflowViewRestore")) {
        applySavedView(self, view);
      }
    } catch (e) {
      noteError("view restore", e);
    }
    return result;
  };
  wrapped[MARK] = true;
  app.loadGraphData = wrapped;
}
