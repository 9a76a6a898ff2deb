// The cache browser: a sidebar tab ("SeedReuse caches") listing every cache of the current user
// with its size, slots, segments, takes, last use, the run that made it and a preview of its
// result video, with the actions inspect, check and delete (after a confirmation), and the
// root's budget status. Data from the pack's routes (nodes/cache_routes.py):
//   GET /seedreuse/browser, GET /seedreuse/caches/{name}/result, POST .../check, POST .../delete.
// The tab is registered with the frontend's extensionManager.registerSidebarTab (1.32.9 has
// it); a frontend without it gets a floating panel opened by window.__seedreuse.openCacheBrowser().
// It loads when shown, refreshes after every successful run while it is shown and on "Refresh";
// it never polls. Only exports (the entry module calls installCacheBrowser in setup).
import { NS, framesText, guard, host, noteError } from "./core.js";
import { errorLines, errorTitle, requestJson } from "./errors.js";

export const TAB_ID = "seedreuse-caches";
const enc = encodeURIComponent;
const view = { el: null, data: null, error: null, loading: null, detail: {}, confirm: null, busy: {},
  videos: new Map() };

function h(tag, cls, text) {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined && text !== null) el.textContent = String(text);
  return el;
}

function button(action, text, title) {
  const b = h("button", `seedreuse-browser-btn seedreuse-browser-${action}`, text);
  b.type = "button";
  b.dataset.seedreuseAction = action;
  if (title) b.title = title;
  return b;
}

export function fmtBytes(n) {
  if (typeof n !== "number" || !isFinite(n)) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i += 1;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

export function fmtAgo(ts) {
  if (typeof ts !== "number") return "never";
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} days ago`;
}

function fmtDate(ts) {
  return typeof ts === "number" ? new Date(ts * 1000).toLocaleString() : "?";
}

function errorText(e) {
  const err = e && e.seedreuse;
  return err ? [errorTitle(err), ...errorLines(err)].join("\n") : String((e && e.message) || e);
}

async function load() {
  try {
    view.data = await requestJson(host.api, "/seedreuse/browser");
    view.error = null;
  } catch (e) {
    view.error = errorText(e);
  }
  renderPanel();
  return view.data;
}

// One request at a time; a refresh asked for during one runs once more after it (the caches
// may have changed since that request was answered).
export function refreshCacheBrowser() {
  const next = (view.loading || Promise.resolve()).then(load);
  const mine = next.finally(() => {
    if (view.loading === mine) view.loading = null;
  });
  view.loading = mine;
  return mine;
}

function resultPath(name) {
  return `/seedreuse/caches/${enc(name)}/result`;
}

// The preview: a direct, range-served src; on a multi-user server (the route needs the
// comfy-user header, which a <video> src does not send) the file is fetched on demand as a blob.
function videoFor(c) {
  const key = `${c.name}/${c.version}`;
  let v = view.videos.get(key);
  if (v) return v;
  v = h("video", "seedreuse-cache-video");
  v.controls = true;
  v.muted = true;
  v.preload = "metadata";
  v.dataset.seedreuseVideo = c.name;
  if (!host.api.user) v.src = host.api.apiURL(resultPath(c.name));
  view.videos.set(key, v);
  return v;
}

async function loadBlob(name, video) {
  const resp = await host.api.fetchApi(resultPath(name));
  if (!resp.ok) throw new Error(`result of '${name}': HTTP ${resp.status}`);
  video.src = URL.createObjectURL(await resp.blob());
}

function metaLine(c) {
  const parts = [`${Object.keys(c.slots || {}).length} slot(s)`];
  if (c.segments) parts.push(`${c.segments.S} segment(s), ${framesText(c.segments)}`);
  if (c.takes) parts.push(`${c.takes.length} take(s)`);
  parts.push(`last used ${fmtAgo(c.last_used)}`);
  return parts.join(" · ");
}

function runLine(c) {
  const r = c.run || {};
  const prompt = r.prompt_id ? `prompt ${String(r.prompt_id).slice(0, 8)}` : `run ${String(r.run_id).slice(0, 8)}`;
  return `made by ${prompt} on ${r.host} (pid ${r.pid}), ${fmtDate(c.created_at)}`;
}

export function inspectLines(c) {
  const lines = [`version ${c.version}`, `committed ${fmtDate(c.created_at)}; last used ${fmtDate(c.last_used)}`];
  const r = c.run || {};
  lines.push(`run ${r.run_id} on ${r.host} pid ${r.pid}, prompt ${r.prompt_id}`);
  lines.push(`size on disk ${fmtBytes(c.bytes)} (files ${fmtBytes(c.manifest_bytes)})`);
  for (const [slot, s] of Object.entries(c.slots || {})) lines.push(`slot ${slot}: ${s.file} (${fmtBytes(s.bytes)})`);
  const g = c.segments;
  if (g) lines.push(`segments: S=${g.S}, F=${g.F}, M=${g.M}, ${g.fps} fps, ${framesText(g)}, seed ${g.seed}` +
    (g.reused_prefix_segments ? `, the first ${g.reused_prefix_segments} kept from an earlier take` : ""));
  if (g && g.trim) lines.push(`output video: ${g.trim}`);
  for (const t of c.takes || []) {
    lines.push(`take ${t.take}: seed ${t.seed}, ${framesText(t)}, ${t.segments} segment(s), ${t.result} ` +
      `(${fmtBytes(t.bytes)})` + (t.source_take ? `, resumed from take ${t.source_take}` : ""));
  }
  lines.push(`${c.boundaries} boundary file(s), ${Object.keys(c.files || {}).length} file(s)`);
  return lines;
}

function checkLines(res) {
  if (res.ok) return [`check: OK (${res.name})`];
  return [`check: ${res.problems.length} problem(s)`,
    ...res.problems.map((p) => `[${p.code}] ${p.path}: ${p.message}\n  fix: ${p.fix}`)];
}

function budgetBox(b) {
  const box = h("div", "seedreuse-browser-budget");
  box.dataset.seedreuseBudget = "";
  const used = `${fmtBytes(b.bytes)} used`;
  const budget = b.budget ? ` of a ${fmtBytes(b.budget)} budget (${b.env})` : ` (no budget: ${b.env} is not set)`;
  box.appendChild(h("div", b.over_budget ? "seedreuse-browser-over" : null, used + budget +
    (b.over_budget ? " — over budget" : "")));
  if (b.budget) {
    const bar = h("div", "seedreuse-browser-bar");
    const fill = h("div", "seedreuse-browser-bar-fill");
    fill.style.width = `${Math.min(100, (100 * b.bytes) / b.budget).toFixed(1)}%`;
    bar.appendChild(fill);
    box.appendChild(bar);
  }
  box.appendChild(h("div", "seedreuse-browser-dim", b.free === null ? "disk free: unknown"
    : `disk: ${fmtBytes(b.free)} free of ${fmtBytes(b.capacity)}`));
  if (b.budget_error) box.appendChild(h("div", "seedreuse-browser-error", errorLines(b.budget_error).join("\n")));
  return box;
}

function cacheCard(c) {
  const card = h("div", "seedreuse-cache");
  card.dataset.seedreuseCache = c.name;
  const head = h("div", "seedreuse-cache-head");
  head.appendChild(h("span", "seedreuse-cache-name", c.name));
  head.appendChild(h("span", "seedreuse-cache-size", fmtBytes(c.bytes)));
  card.appendChild(head);
  if (c.committed && !c.error) {
    card.appendChild(h("div", "seedreuse-cache-meta", metaLine(c)));
    card.appendChild(h("div", "seedreuse-browser-dim", runLine(c)));
  } else if (!c.error) {
    card.appendChild(h("div", "seedreuse-browser-dim", "no committed version yet"));
  }
  if (c.in_use) card.appendChild(h("div", "seedreuse-cache-busy", `in use: ${c.in_use}`));
  if (c.error) card.appendChild(h("div", "seedreuse-browser-error", errorLines(c.error).join("\n")));
  if (c.result) {
    const v = videoFor(c);
    card.appendChild(v);
    if (host.api.user && !v.src) card.appendChild(button("preview", "Load preview", "fetch the result video"));
  }
  const actions = h("div", "seedreuse-cache-actions");
  if (c.committed && !c.error) actions.appendChild(button("inspect", "Inspect", "details of this cache"));
  actions.appendChild(button("check", "Check", "verify every file (sizes, sha256, structure)"));
  if (c.committed) actions.appendChild(button("delete", "Delete", "delete this cache (asks first)"));
  if (view.busy[c.name]) actions.appendChild(h("span", "seedreuse-browser-dim", view.busy[c.name]));
  card.appendChild(actions);
  if (view.confirm === c.name) {
    const box = h("div", "seedreuse-cache-confirm");
    box.appendChild(h("div", null, `Delete cache '${c.name}' (${fmtBytes(c.bytes)})? Its encoder outputs, ` +
      "segments and result videos are removed; the next run rebuilds it."));
    box.appendChild(button("confirm-delete", `Delete '${c.name}'`));
    box.appendChild(button("cancel", "Cancel"));
    card.appendChild(box);
  }
  const d = view.detail[c.name];
  if (d) card.appendChild(h("pre", `seedreuse-cache-detail${d.bad ? " seedreuse-browser-error" : ""}`, d.text));
  return card;
}

function renderPanel() {
  const el = view.el;
  if (!el) return;
  el.replaceChildren();
  const head = h("div", "seedreuse-browser-head");
  head.appendChild(h("span", "seedreuse-browser-title", "SeedReuse caches"));
  head.appendChild(button("refresh", "Refresh", "read the caches again"));
  el.appendChild(head);
  if (view.error) el.appendChild(h("div", "seedreuse-browser-error", view.error));
  const data = view.data;
  if (!data) {
    el.appendChild(h("div", "seedreuse-browser-dim", "loading…"));
    return;
  }
  el.appendChild(budgetBox(data.budget));
  const list = h("div", "seedreuse-browser-list");
  if (!data.caches.length) list.appendChild(h("div", "seedreuse-browser-dim", "no caches yet"));
  for (const c of data.caches) list.appendChild(cacheCard(c));
  el.appendChild(list);
}

function find(name) {
  return ((view.data && view.data.caches) || []).find((c) => c.name === name) || null;
}

async function act(action, name) {
  const c = find(name);
  if (action === "refresh") return refreshCacheBrowser();
  if (!c && action !== "cancel") return null;
  if (action === "inspect") {
    const shown = view.detail[name];
    view.detail[name] = shown && shown.inspect ? null : { text: inspectLines(c).join("\n"), inspect: true };
  } else if (action === "delete") {
    view.confirm = name;
  } else if (action === "cancel") {
    view.confirm = null;
  } else if (action === "preview") {
    await loadBlob(name, videoFor(c));
  } else if (action === "check" || action === "confirm-delete") {
    view.busy[name] = action === "check" ? "checking…" : "deleting…";
    renderPanel();
    try {
      if (action === "check") {
        const res = await requestJson(host.api, `/seedreuse/caches/${enc(name)}/check`, {});
        view.detail[name] = { text: checkLines(res).join("\n"), bad: !res.ok, check: true };
      } else {
        await requestJson(host.api, `/seedreuse/caches/${enc(name)}/delete`, { confirm: name });
        view.confirm = null;
        NS.lastCacheDelete = name;
        for (const [key, v] of [...view.videos]) {
          if (key.startsWith(`${name}/`)) {
            if (v.src.startsWith("blob:")) URL.revokeObjectURL(v.src);
            view.videos.delete(key);
          }
        }
        await refreshCacheBrowser();
      }
    } catch (e) {
      view.detail[name] = { text: errorText(e), bad: true };
      if (action === "confirm-delete") view.confirm = null;
    } finally {
      delete view.busy[name];
    }
  }
  renderPanel();
  return null;
}

function onClick(ev) {
  const btn = ev.target && ev.target.closest && ev.target.closest("[data-seedreuse-action]");
  if (!btn) return;
  const card = btn.closest("[data-seedreuse-cache]");
  act(btn.dataset.seedreuseAction, card ? card.dataset.seedreuseCache : null)
    .catch((e) => noteError(`cache browser ${btn.dataset.seedreuseAction}`, e));
}

// render(el) of the sidebar tab: called each time the tab is shown.
export function mountCacheBrowser(el) {
  if (view.el !== el) {
    el.classList.add("seedreuse-browser");
    el.addEventListener("click", guard("cache browser click", onClick));
    view.el = el;
  }
  renderPanel();
  refreshCacheBrowser().catch((e) => noteError("cache browser", e));
}

function openFloating() {
  let el = document.querySelector(".seedreuse-browser-floating");
  if (!el) {
    el = h("div", "seedreuse-browser-floating");
    document.body.appendChild(el);
  }
  mountCacheBrowser(el);
  return el;
}

export function installCacheBrowser() {
  const app = host.app;
  const em = app && app.extensionManager;
  NS.cacheBrowser = { refresh: refreshCacheBrowser, view, tabId: TAB_ID };
  NS.openCacheBrowser = openFloating;
  if (host.api && typeof host.api.addEventListener === "function") {
    host.api.addEventListener("execution_success", guard("cache browser refresh", () => {
      if (view.el && view.el.isConnected) refreshCacheBrowser();
    }));
  }
  if (!em || typeof em.registerSidebarTab !== "function") {
    console.debug("[seedreuse] no registerSidebarTab in this frontend; window.__seedreuse.openCacheBrowser() opens the cache browser");
    return false;
  }
  em.registerSidebarTab({
    id: TAB_ID, icon: "pi pi-database", title: "SeedReuse caches", label: "Caches",
    tooltip: "SeedReuse caches: size, last use, result, check, delete", type: "custom",
    render: (el) => mountCacheBrowser(el),
  });
  return true;
}
