// Shared constants, state and small helpers of the SeedReuse extension ("seedreuse.ui").
//
// ComfyUI imports every .js file under the pack's web/ folder as an extension entry point, so
// this module (like every module under web/seedreuse/) only declares and exports: importing
// it has no side effect. The entry module web/seedreuse.js binds the host (app, api) and
// registers the extension.

export const EXT_NAME = "seedreuse.ui";
export const PACK_PREFIX = "SeedReuse";
export const ENCODE_PREFIX = "SeedReuseEncode";
export const START_TYPE = "SeedReuseSegmentLoopStart";
export const SESSION_TYPE = "SeedReuseSession";
export const TIMELINE_WIDGET = "seedreuse_timeline";
export const STYLE_ID = "seedreuse-style";

// The ComfyUI app and api objects, bound by the entry module (bindHost) before any hook runs.
export const host = { app: null, api: null };

export function bindHost(app, api) {
  host.app = app;
  host.api = api;
}

// The inspection namespace: the entry module exposes it as window.__seedreuse (tests read the
// badges from here, since canvas drawing cannot be read from the DOM).
export const NS = {
  badges: {}, errors: [], toasts: [], events: [], autoReports: [],
  work: { changes: 0, signatures: 0, prompts: 0, posts: 0 }, // what the extension did (tests)
};

export const state = {
  active: false,      // the graph has reuse nodes; without them the extension does nothing
  dry: {},            // node id -> dry-run answer of /seedreuse/check ("nodes" or "segments" entry)
  run: {},            // node id -> {text, tone, sig, at, payload} from execution events
  pendingCheck: null, // debounce timer
  inFlight: false,
  force: false,       // the next check posts even if the prompt is unchanged (the cache may have changed)
  rerun: false,
  lastSentJson: null,
  lastSig: null,      // graph signature of the last change seen
  checkError: null,   // structured error of the last failed /seedreuse/check (see errors.js)
  segRuns: {},        // prompt_id -> [start node ids] announced by seedreuse.segments
  running: null,      // prompt_id of this graph's run while it executes (badges say "running…")
  queued: [],         // prompt ids this page queued (the last few)
  lastStarted: null,  // prompt_id of the last execution_start (it may come before the queue reply)
  lastEnded: null,    // prompt_id of the last run that ended
  failed: null,       // the last execution_error, until its node shows it (run_events.js)
  runEndedAt: 0,      // when that run ended: dry-run answers asked for before it are stale
  dryStale: false,    // the dry-run answers predate the last run (badges say "next: checking…")
};

export function isReuseType(type) {
  return typeof type === "string" && (type.startsWith(ENCODE_PREFIX) || type === START_TYPE);
}

export function isPackType(type) {
  return typeof type === "string" && type.startsWith(PACK_PREFIX);
}

export function typeOf(node) {
  return node && (node.type || node.comfyClass);
}

export function noteError(where, err) {
  // Hooks never throw into the host; the first failure of each hook is logged once.
  try {
    NS.errors.push({ where, message: String(err && (err.stack || err.message || err)) });
    NS._warned = NS._warned || {};
    if (!NS._warned[where]) {
      NS._warned[where] = true;
      console.warn(`[seedreuse] ${where}:`, err);
    }
  } catch (_) { /* never throw from the error path */ }
}

export function guard(where, fn) {
  return function (...args) {
    try {
      return fn.apply(this, args);
    } catch (e) {
      noteError(where, e);
      return undefined;
    }
  };
}

// Call the original handler first (its exceptions are its own), then ours (guarded).
export function chain(target, name, ours, where) {
  const original = target[name];
  const guarded = guard(where || name, ours);
  target[name] = function (...args) {
    const r = original ? original.apply(this, args) : undefined;
    guarded.apply(this, args);
    return r;
  };
}

export function fmtSeconds(s) {
  if (typeof s !== "number" || !isFinite(s)) return "";
  return s >= 10 ? `${s.toFixed(0)} s` : s >= 1 ? `${s.toFixed(1)} s` : `${(s * 1000).toFixed(0)} ms`;
}

export function short(text, n) {
  text = String(text || "").split("\n")[0];
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

// The frames of a take as the user saved them (routes: frames, output_frames, trimmed): the output
// video ends with its audio, the cache keeps every frame the segments made (resumes chain from them).
export function framesText(t) {
  if (!t) return "";
  const out = t.output_frames != null ? t.output_frames : t.frames;
  return t.trimmed > 0 ? `${out} frames (the cache keeps ${t.frames}: ${t.trimmed} past the audio's end trimmed)`
    : `${out} frames`;
}
