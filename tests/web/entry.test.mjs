// The entry module web/seedreuse.js against a fake ComfyUI frontend: it registers one extension,
// hooks the pack's node types only, gives a reuse node its badges as entries of node.badges
// (the frontend's badge API; nothing drawn over the node) and never polls.
import { test } from "node:test";
import assert from "node:assert/strict";
import { register } from "node:module";
import { effects, fakeApi, fakeApp, installGlobals } from "./fake_host.mjs";

installGlobals();
class LGraphBadge {
  constructor(o) { Object.assign(this, o); }
  draw() {}
}
globalThis.LGraphBadge = LGraphBadge;
globalThis.LiteGraph = { vueNodesMode: false };
const app = (globalThis.__seedreuseFakeApp = fakeApp());
globalThis.__seedreuseFakeApi = fakeApi();
register("./host_loader.mjs", import.meta.url);
await import("../../web/seedreuse.js");
const ext = app.extensions[0];

function nodeTypeWith(created) {
  const T = function () {};
  T.prototype.onNodeCreated = function () { created.push(this); };
  return T;
}

test("the entry module registers exactly one extension, seedreuse.ui", () => {
  assert.deepEqual(effects.extensions, ["seedreuse.ui"]);
  assert.equal(typeof ext.beforeRegisterNodeDef, "function");
  assert.equal(typeof ext.setup, "function");
  assert.equal(globalThis.__seedreuse.registered, true);
});

test("a reuse node gets its badges as node.badges entries, after the host's own handler", async () => {
  const created = [];
  const T = nodeTypeWith(created);
  await ext.beforeRegisterNodeDef(T, { name: "SeedReuseEncodeConditioning" });
  assert.equal(T.prototype.onDrawForeground, undefined, "nothing is drawn over a reuse node");
  const node = new T();
  Object.assign(node, { id: 7, type: "SeedReuseEncodeConditioning", size: [320, 80], badges: [() => "host badge"] });
  node.onNodeCreated();
  assert.deepEqual(created, [node], "the host's onNodeCreated still runs");
  const ours = node.badges.slice(1);
  assert.equal(node.badges[0](), "host badge");
  assert.ok(ours.length >= 1, "badge entries added");
  const drawn = ours.map((fn) => fn());
  assert.ok(drawn.every((b) => b instanceof LGraphBadge), "the frontend's badge class");
  assert.ok(drawn[0].text.length > 0, "the main badge says something");
  const palette = Object.values(effects.palette);
  assert.ok(palette.includes(drawn[0].bgColor) && palette.includes(drawn[0].fgColor),
    "its colours come from the stylesheet's palette");
});

test("a node of another pack is left alone", async () => {
  const T = nodeTypeWith([]);
  const before = T.prototype.onNodeCreated;
  await ext.beforeRegisterNodeDef(T, { name: "KSampler" });
  assert.equal(T.prototype.onNodeCreated, before);
  assert.deepEqual(Object.keys(T.prototype), ["onNodeCreated"]);
});

test("nothing polls", async () => {
  await ext.setup();
  assert.equal(globalThis.__seedreuse.ready, true);
  assert.equal(effects.timers.setInterval, 0);
});
