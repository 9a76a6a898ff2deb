// A tiny stand-in for what the web extension's modules touch of the browser and of ComfyUI's
// frontend: `window`/`document` (elements that keep their children, text and listeners; a 2D
// context that measures 7 px a character), the timers (counted), and the `app` / `api` objects
// (the extension registry, graph, toasts, fetchApi answering from a table). Every call the
// modules make is recorded in `effects`, so a test can say what importing or driving one did.
import { readFileSync } from "node:fs";

export const effects = { dom: [], timers: { setTimeout: 0, setInterval: 0 }, fetches: [], toasts: [], extensions: [] };

class FakeElement {
  constructor(tag) {
    this.tagName = String(tag).toUpperCase();
    this.children = [];
    this.dataset = {};
    this.style = {};
    this.attributes = {};
    this.listeners = {};
    this.className = "";
    this.textContent = "";
  }
  appendChild(c) { this.children.push(c); c.parentNode = this; effects.dom.push(`append ${c.tagName}`); return c; }
  append(...cs) { for (const c of cs) this.appendChild(typeof c === "string" ? Object.assign(new FakeElement("#text"), { textContent: c }) : c); }
  replaceChildren(...cs) { this.children = []; this.append(...cs); }
  remove() { if (this.parentNode) this.parentNode.children = this.parentNode.children.filter((c) => c !== this); }
  setAttribute(k, v) { this.attributes[k] = String(v); }
  getAttribute(k) { return k in this.attributes ? this.attributes[k] : null; }
  addEventListener(type, fn) { (this.listeners[type] ||= []).push(fn); effects.dom.push(`listen ${type}`); }
  removeEventListener() {}
  querySelector() { return null; }
  querySelectorAll() { return []; }
  closest() { return null; }
  getContext() {
    return { font: "", measureText: (t) => ({ width: 7 * String(t).length }), fillText() {}, fillRect() {},
      beginPath() {}, roundRect() {}, rect() {}, fill() {}, save() {}, restore() {} };
  }
  get text() { return [this.textContent, ...this.children.map((c) => c.text)].join(""); }
}

export function installGlobals() {
  const doc = {
    head: new FakeElement("head"), body: new FakeElement("body"), documentElement: new FakeElement("html"),
    visibilityState: "visible",
    createElement(tag) { effects.dom.push(`create ${tag}`); return new FakeElement(tag); },
    getElementById() { return null; },
    querySelector() { return null; },
    querySelectorAll() { return []; },
    addEventListener(type) { effects.dom.push(`document listens ${type}`); },
  };
  const realTimeout = globalThis.setTimeout;
  globalThis.window = globalThis;
  globalThis.document = doc;
  globalThis.setTimeout = (fn, ms, ...a) => { effects.timers.setTimeout++; return realTimeout(fn, ms, ...a); };
  globalThis.setInterval = () => { effects.timers.setInterval++; return 0; };
  globalThis.requestAnimationFrame = (fn) => globalThis.setTimeout(fn, 0);
  // the stylesheet's custom properties, as the browser computes them for the page
  const css = readFileSync(new URL("../../web/seedreuse.css", import.meta.url), "utf8");
  const props = Object.fromEntries([...css.matchAll(/(--seedreuse-[\w-]+)\s*:\s*([^;]+);/g)].map((m) => [m[1], m[2].trim()]));
  globalThis.getComputedStyle = () => ({ getPropertyValue: (name) => props[name] || "" });
  effects.palette = props;
  return doc;
}

// A Response-like answer of fetchApi.
export function answer(status, body) {
  return { ok: status >= 200 && status < 300, status,
    json: async () => { if (typeof body === "string") throw new SyntaxError("not JSON"); return body; },
    blob: async () => body };
}

// The `api` object: `routes` maps "METHOD path" to an answer (or a function of the request body).
export function fakeApi(routes = {}) {
  return {
    user: undefined,
    listeners: {},
    apiURL: (p) => `http://comfy${p}`,
    addEventListener(type, fn) { (this.listeners[type] ||= []).push(fn); },
    async fetchApi(path, options) {
      const method = (options && options.method) || "GET";
      const body = options && options.body ? JSON.parse(options.body) : undefined;
      effects.fetches.push({ method, path, body, headers: options && options.headers });
      const r = routes[`${method} ${path}`];
      if (r === undefined) return answer(404, { error: { type: "NotFound", message: `no ${method} ${path}` } });
      return typeof r === "function" ? r(body) : r;
    },
  };
}

// The `app` object: extensions, a graph of `nodes`, the toast service, loadGraphData.
export function fakeApp(nodes = []) {
  const graph = { _nodes: nodes, nodes, links: {}, serialize: () => ({ nodes: nodes.map((n) => ({ id: n.id, type: n.type })) }),
    getNodeById: (id) => nodes.find((n) => n.id === id) || null, setDirtyCanvas() {} };
  return {
    extensions: [],
    graph,
    canvas: { setDirty() {}, graph },
    loaded: [],
    registerExtension(ext) { this.extensions.push(ext); effects.extensions.push(ext.name); },
    async loadGraphData(data) { this.loaded.push(data); },
    async graphToPrompt() { return { output: {}, workflow: graph.serialize() }; },
    extensionManager: { toast: { add: (t) => effects.toasts.push(t) } },
  };
}
