// The badge lines of a reuse node: where they go on the canvas (badge_fit.js fitRows: a line that
// does not fit whole beside the others takes a row of its own, cut only past the node's width),
// their few-word reasons (errors.js errorSummary), and the outcome a failed run leaves on the node
// it failed in (run_events.js) in place of the prediction; one place reads the graph's links
// (graph.js inputLink), through the node's method where the frontend has one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fakeApp, installGlobals } from "./fake_host.mjs";

installGlobals();
const { fitRows, stackedView } = await import("../../web/seedreuse/badge_fit.js");
const { errorSummary } = await import("../../web/seedreuse/errors.js");
const { bindHost, state } = await import("../../web/seedreuse/core.js");
const badgesModule = await import("../../web/seedreuse/badges.js");
const { badgeFor } = badgesModule;
const { onExecutionError, noteQueued } = await import("../../web/seedreuse/run_events.js");
const { inputLink, isInputLinked, pairWidgetWithInput } = await import("../../web/seedreuse/graph.js");

// 7 px a character (fake_host's 2D context) plus 6 px padding each side, as LGraphBadge measures
class Badge {
  constructor() { this.text = ""; this.height = 20; this.drawn = []; }
  getWidth(ctx) { return this.text ? ctx.measureText(this.text).width + 12 : 0; }
  draw(ctx, x, y) { this.drawn.push({ x, y, text: this.text }); }
}
const W = (t) => 7 * t.length + 12;
const GAP = 2;

test("lines that fit stay beside the host's badges; a longer one takes a row of its own, whole", () => {
  const badges = [new Badge(), new Badge(), new Badge()];
  const main = "encoded · 1.6 s";
  const next = "next: will reuse";
  const fix = "fix: set reuse to 'auto'";
  // 340 px, the host's badges 70: main fits beside them, the fix does not (row 1), next joins row 1
  const rows = fitRows(badges, [main, fix, next], 340, 70);
  assert.deepEqual(rows.map((r) => [r.text, r.row]), [[main, 0], [fix, 1], [next, 1]]);
  // row 1 is right-aligned within the node: fix then next, GAP apart
  assert.equal(rows[2].x, 340 - W(next));
  assert.equal(rows[1].x, 340 - W(next) - GAP - W(fix));
  assert.ok(rows[1].x >= 0);
});

test("only a line wider than the node is cut, on its own row, with its first words", () => {
  const badges = [new Badge(), new Badge()];
  const main = "failed: inputs changed: value:text";
  const fix = "fix: set reuse to 'auto' (re-encode and replace the cache), run a normal request first";
  const rows = fitRows(badges, [main, fix], 340, 70);
  assert.equal(rows[0].text, main);
  assert.equal(rows[1].row, 1);
  assert.ok(rows[1].text.endsWith("…") && rows[1].text.startsWith("fix: set reuse to 'auto'"), rows[1].text);
  assert.ok(W(rows[1].text) <= 340, rows[1].text);
  assert.equal(rows[1].x, 340 - W(rows[1].text));
});

test("a stacked entry takes no room in the host's row and draws on its own row", () => {
  const b = new Badge();
  b.text = "fix: x";
  const v = stackedView(b, { row: 2, x: 40 });
  assert.equal(v.getWidth({}), 0);
  assert.equal(v.text, "fix: x");
  v.draw({}, 999, -52);
  assert.deepEqual(b.drawn, [{ x: 40, y: -52 - 2 * (20 + GAP), text: "fix: x" }]);
});

test("an error says in few words what it names: the changed fields, else its message", () => {
  const mismatch = { message: "cache 'a very long cache name' holds slot 'positive' made from different inputs: …",
    details: { fields: [{ field: "value:text" }, { field: "value.clip:clip_name" }, { field: "a" }, { field: "b" }] } };
  assert.equal(errorSummary(mismatch), "inputs changed: value:text, value.clip:clip_name, a, …");
  assert.equal(errorSummary({ message: "no successful run yet", details: {} }), "no successful run yet");
  assert.equal(errorSummary(null, "fallback"), "fallback");
});

function sessionGraph() {
  const enc = { id: 7, type: "SeedReuseEncodeConditioning", mode: 0, inputs: [], widgets: [] };
  const app = fakeApp([enc]);
  app.rootGraph = app.graph;
  bindHost(app, { addEventListener() {} });
  state.active = true;
  return enc;
}

test("a run that fails in a reuse node leaves what happened on it, not its prediction", async () => {
  sessionGraph();
  state.dry["7"] = { kind: "slot", will: "fail", reason: "cache 'c' holds …",
    error: { message: "cache 'c' holds …", fix: "set reuse to 'auto'", details: { fields: [{ field: "value:text" }] } } };
  assert.equal(badgeFor("7").text, "will fail (inputs changed: value:text)");
  const detail = { prompt_id: "p1", node_id: "7", node_type: "SeedReuseEncodeConditioning",
    exception_type: "x.KeyMismatchError", exception_message: "cache 'c' holds …",
    seedreuse: { code: "key_mismatch", type: "KeyMismatchError", message: "cache 'c' holds …",
      fix: "set reuse to 'auto'", details: { fields: [{ field: "value:text" }] } } };
  // the failure comes before the queue reply: shown once the queueing is over
  onExecutionError({ detail });
  assert.equal(badgeFor("7").text, "checking…"); // the prediction is stale: the run ended
  noteQueued("p1");
  await new Promise((r) => setTimeout(r, 5));
  const b = badgeFor("7");
  assert.equal(b.text, "failed: inputs changed: value:text");
  assert.deepEqual(b.lines.slice(0, 2), ["failed: inputs changed: value:text", "fix: set reuse to 'auto'"]);
  assert.equal(b.tone, "fail");
});

test("a failure of a prompt this page did not queue, or of another pack's node, changes no badge", () => {
  sessionGraph();
  state.run = {};
  onExecutionError({ detail: { prompt_id: "other", node_id: "7", node_type: "SeedReuseEncodeConditioning",
    exception_message: "boom" } });
  assert.equal(state.run["7"], undefined);
  noteQueued("p2");
  onExecutionError({ detail: { prompt_id: "p2", node_id: "7", node_type: "KSampler", exception_message: "boom" } });
  assert.equal(state.run["7"], undefined);
});

test("links are read through the node's getInputLink where the frontend has one, never input.link", () => {
  const links = new Map([[5, { id: 5, origin_id: 1, origin_slot: 0 }]]);
  class LGraphNode {
    getInputLink(slot) { return slot === 0 ? links.get(5) : null; }
  }
  globalThis.LGraphNode = LGraphNode;
  const node = new LGraphNode();
  node.graph = { links, getNodeById: () => null };
  node.inputs = [{ name: "session", get link() { throw new Error("input.link is deprecated"); } }, { name: "x" }];
  assert.deepEqual(inputLink(node, 0), links.get(5));
  assert.equal(isInputLinked(node, 1), false);
  delete globalThis.LGraphNode;
  // a frontend without the method: the slot's link field and the graph's table
  const old = { graph: { links: { 5: { id: 5, origin_id: 1, origin_slot: 0 } } }, inputs: [{ link: 5 }, { link: null }] };
  assert.equal(inputLink(old, 0).id, 5);
  assert.equal(isInputLinked(old, 1), false);
});

test("the widget the pack adds is paired with the socket of its name, and the frontend told", () => {
  const events = [];
  const node = { id: 3, inputs: [{ name: "from_take", type: "INT", link: null }],
    graph: { trigger: (type, e) => events.push([type, e]) } };
  assert.equal(pairWidgetWithInput(node, "from_take"), true);
  assert.deepEqual(node.inputs[0].widget, { name: "from_take" });
  assert.deepEqual(events, [["node:slot-label:changed", { nodeId: 3, slotType: 1 }],
    ["node:slot-links:changed", { nodeId: 3, slotType: 1, slotIndex: 0, connected: false, linkId: null }]]);
  assert.equal(pairWidgetWithInput(node, "missing"), false);
});

test("a value whose key depends on a seed or a sampler upstream says so on its badge", () => {
  const { dependsLine } = badgesModule;
  assert.equal(dependsLine([]), null);
  assert.equal(dependsLine(undefined), null);
  const seed = { node: "12", class_type: "ImpactWildcardProcessor", kind: "seed", input: "seed" };
  const sampler = { node: "3", class_type: "KSampler", kind: "sampler", input: "" };
  assert.equal(dependsLine([seed]), "depends on seed of node 12 (ImpactWildcardProcessor): reused only while unchanged");
  assert.equal(dependsLine([sampler, seed]), "depends on sampler node 3 (KSampler) +1 more: reused only while unchanged");
  // the dry run's answer puts the line under the verdict, before and after a run
  state.running = false;
  state.dryStale = false;
  state.dry["k-dep"] = { kind: "encode", will: "reuse", depends_on: [seed] };
  const b = badgeFor("k-dep");
  assert.deepEqual(b.lines, ["will reuse", dependsLine([seed])]);
  state.dry["k-nodep"] = { kind: "encode", will: "reuse", depends_on: [] };
  assert.deepEqual(badgeFor("k-nodep").lines, ["will reuse"]);
  delete state.dry["k-dep"];
  delete state.dry["k-nodep"];
});
