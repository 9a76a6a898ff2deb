// The pack's requests and its errors as the server sends them: requestJson (errors.js), used by
// the cache browser and "make this workflow reusable" (instrument.js), driven against a fake api.
import { test } from "node:test";
import assert from "node:assert/strict";
import { answer, effects, fakeApi, fakeApp, installGlobals } from "./fake_host.mjs";

installGlobals();
const { requestJson, executionError, errorLines, errorTitle } = await import("../../web/seedreuse/errors.js");
const { bindHost, NS } = await import("../../web/seedreuse/core.js");
const { instrumentCurrentGraph, instrumentMenuItems } = await import("../../web/seedreuse/instrument.js");

const REFUSED = { error: { code: "x_refused", type: "BrandNewError", message: "no", expected: ">= 1", actual: 0,
  fix: "give it one", details: { k: 1 } } };

test("requestJson answers the body of an OK answer and POSTs JSON", async () => {
  const api = fakeApi({ "POST /seedreuse/x": (body) => answer(200, { got: body }) });
  assert.deepEqual(await requestJson(api, "/seedreuse/x", { a: 1 }), { got: { a: 1 } });
  const sent = effects.fetches.at(-1);
  assert.equal(sent.method, "POST");
  assert.equal(sent.headers["Content-Type"], "application/json");
});

test("requestJson raises the server's structured error as given (any error type)", async () => {
  const api = fakeApi({ "GET /seedreuse/y": answer(400, REFUSED) });
  const e = await requestJson(api, "/seedreuse/y").then(() => null, (err) => err);
  assert.ok(e instanceof Error);
  assert.equal(errorTitle(e.seedreuse), "BrandNewError");
  assert.deepEqual(errorLines(e.seedreuse), ["no", "expected: >= 1", "actual: 0", "fix: give it one"]);
  assert.deepEqual(e.seedreuse.details, { k: 1 });
});

test("requestJson turns an answer that is not JSON, or an error body of a 200, into an error", async () => {
  const api = fakeApi({ "GET /a": answer(502, "<html>bad gateway</html>"), "GET /b": answer(200, REFUSED) });
  const a = await requestJson(api, "/a").catch((err) => err);
  assert.equal(a.seedreuse.type, "HTTP");
  assert.equal(a.seedreuse.message, "HTTP 502");
  const b = await requestJson(api, "/b").catch((err) => err);
  assert.equal(b.seedreuse.type, "BrandNewError");
});

test("an execution_error of a SeedReuse node carries its structured error", () => {
  const err = executionError({ exception_type: "reuse_backend.errors.CorruptCacheError", exception_message: "m",
    seedreuse: { message: "broken", fix: "check it" } });
  assert.equal(err.type, "CorruptCacheError");
  assert.equal(err.fix, "check it");
  assert.equal(executionError({ exception_type: "RuntimeError", exception_message: "m" }), null);
});

test("make this workflow reusable: the instrumented graph is loaded and the report returned", async () => {
  const app = fakeApp([{ id: 1, type: "CLIPTextEncode" }]);
  const report = { changed: true, cache_name: "wf", session: { node: 9, created: true }, wrapped: [], not_wrapped: [] };
  bindHost(app, fakeApi({ "POST /seedreuse/instrument": (body) => answer(200, { workflow: { nodes: body.workflow.nodes, x: 1 }, report }) }));
  assert.equal(instrumentMenuItems()[1].content, "SeedReuse: make this workflow reusable");
  assert.deepEqual(await instrumentCurrentGraph(), report);
  assert.deepEqual(app.loaded, [{ nodes: [{ id: 1, type: "CLIPTextEncode" }], x: 1 }]);
  assert.deepEqual(NS.lastInstrument, report);
});

test("make this workflow reusable: a refusal is a toast with the error's title and lines, the graph stays", async () => {
  const app = fakeApp([]);
  bindHost(app, fakeApi({ "POST /seedreuse/instrument": answer(413, REFUSED) }));
  const toasts = effects.toasts.length;
  assert.equal(await instrumentCurrentGraph(), null);
  assert.deepEqual(app.loaded, []);
  const t = effects.toasts.slice(toasts);
  assert.equal(t.length, 1);
  assert.equal(t[0].summary, "SeedReuse: BrandNewError");
  assert.equal(t[0].detail, "no\nexpected: >= 1\nactual: 0\nfix: give it one");
});
