// Importing a module under web/seedreuse/ does nothing (ComfyUI imports every .js under web/ as
// an extension entry point): no element created, no listener, no timer, no request, no
// extension registered; only the entry module registers the extension.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { effects, installGlobals } from "./fake_host.mjs";

installGlobals();
const DIR = new URL("../../web/seedreuse/", import.meta.url);
const MODULES = readdirSync(DIR).filter((f) => f.endsWith(".js")).sort();

test("every submodule imports without a side effect", async () => {
  assert.ok(MODULES.length > 10, MODULES.join(","));
  for (const f of MODULES) {
    const mod = await import(new URL(f, DIR).href);
    assert.ok(Object.keys(mod).length > 0, `${f} exports nothing`);
  }
  assert.deepEqual(effects.dom, []);
  assert.deepEqual(effects.timers, { setTimeout: 0, setInterval: 0 });
  assert.deepEqual(effects.fetches, []);
  assert.deepEqual(effects.extensions, []);
});
