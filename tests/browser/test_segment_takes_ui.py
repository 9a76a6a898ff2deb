"""The segment timeline's take picker (web/seedreuse/take_picker.js, timeline.js) in a real
Chromium against a real ComfyUI worker.

A real worker makes three takes of one segment cache (3 segments each, seeds 1, 2, 3); take 1
was made with the per-segment prompts of the graph the canvas then opens, takes 2 and 3 with
another line for segment 1. In the canvas:

* the Segment Loop Start is as tall with three kept takes as with one (and after a refusal's note
  and a fourth take): the take list has fixed rows and scrolls, so a take never grows the node
  over what lies below it;
* the picker lists the three kept takes (newest first) with their seeds, "latest" on take 3,
  which is picked; its segments are coloured by their validity for this graph (segment 0 valid,
  1 and 2 invalid, naming the segment prompt), and a click on segment 2 (N = 2, beyond take 3's
  longest valid prefix 1) is refused with that reason, reuse_prefix_segments unchanged;
* picking take 1 (the oldest) adds and sets the Session's from_take widget to 1 and marks the
  workflow changed through the change tracker's current API (captureCanvasState where the
  frontend has it, never the deprecated checkState there), the dry run re-runs (its answer says from_take 1), the timeline shows take 1's segments, all valid;
* clicking segment 2 sets reuse_prefix_segments = 2; "longest valid" sets -1, which the dry run
  resolves to 2;
* the queued prompt resumes from take 1: its seedreuse.segments event names source take 1, kept
  2 of 3, requested -1, and the output video's first P(2) frames are take 1's, bit-exact;
  afterwards the picker lists takes 4, 3, 2 (take 1 made way) and says the cache keeps no take 1;
* the saved workflow keeps from_take in the Session's properties (its widgets_values unchanged),
  and reloading it brings the widget back, the dry run asking for take 1 again.
Screenshots: test-artifacts/browser/takes_latest.png, takes_picked.png, takes_resumed.png.
"""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from seedreuse_lab import graphs
from seedreuse_lab.graphs import link
from seedreuse_lab.reuse_graphs import SEG, SESSION, segment_graph
from reuse_backend.media import segments, video
from ._canvas import APP, WIDGET_VALUE

pytestmark = [pytest.mark.comfy, pytest.mark.browser]

IMAGE = "seedreuse_takes_ui.png"
F, M, TOTAL = 5, 1, 13                      # 3 segments: P(1) = 5, P(2) = 9, P(3) = 13
FPS = 20.0                                  # the sine lasts 13 / 20 = 0.65 s: a value the canvas keeps as is
SAME = "a head\na smiling head"             # the canvas graph's per-segment prompts (and take 1's)
OTHER = "a head\na head"                    # takes 2 and 3: segment 1 onwards differs
START = SEG.START
TL = f'.seedreuse-timeline[data-seedreuse-node="{START}"]'

# Records who calls the workflow change tracker: checkState() (deprecated where
# captureCanvasState() exists: 1.49.6 and 1.58.1 warn on it) and captureCanvasState().
TRACKER_SPY = """() => {
  const CT = window.comfyAPI && window.comfyAPI.changeTracker && window.comfyAPI.changeTracker.ChangeTracker;
  if (!CT) return null;
  window.__trackerCalls = [];
  for (const name of ['checkState', 'captureCanvasState']) {
    const original = CT.prototype[name];
    if (typeof original !== 'function') continue;
    CT.prototype[name] = function (...args) {
      window.__trackerCalls.push({ name, stack: String(new Error().stack || '') });
      return original.apply(this, args);
    };
  }
  return typeof CT.prototype.captureCanvasState === 'function';
}"""


def P(n: int) -> int:
    return segments.prefix_frames(n, F, M)


def seg_prompt(seed: int, cache: str, prompts: str, n: int = 0) -> dict:
    p = segment_graph(IMAGE, seed, prefix_segments=n, cache_name=cache, F=F, M=M, total_frames=TOTAL, fps=FPS,
                      steps=1)
    p[SEG.WAN_I2V]["inputs"].update(width=32, height=32)
    p[SEG.SAMPLER]["inputs"]["cfg"] = 1
    # a per-segment prompt inside the loop body: Segment Prompt -> text encode -> positive
    p["230"] = {"class_type": "SeedReuseSegmentPrompt", "inputs": {"loop": link(START), "prompts": prompts}}
    p["231"] = {"class_type": "SeedReuseTestTextEncode", "inputs": {
        "clip": link(graphs.I2V.TEXT_LOADER), "text": link("230"), "work_ms": 0}}
    p[SEG.WAN_I2V]["inputs"]["positive"] = link("231")
    return p


def frames_of(worker, outputs: dict) -> np.ndarray:
    files = [x for v in (outputs.get(SEG.MERGE) or {}).values() if isinstance(v, list)
             for x in v if isinstance(x, dict) and "filename" in x]
    assert files, outputs
    return video.decode_frames(str(worker.output_path(files[0])))


@pytest.fixture(scope="module")
def takes(ui_worker):
    """Three takes of one cache, made by real runs: take k has seed k."""
    w = ui_worker
    graphs.write_test_image(Path(w.input_dir) / IMAGE, seed=5)
    cache = "takes_ui_" + uuid.uuid4().hex[:6]
    results = {}
    for seed, prompts in ((1, SAME), (2, OTHER), (3, OTHER)):
        r = w.run(seg_prompt(seed, cache, prompts)).raise_for_status()
        results[seed] = frames_of(w, r.outputs)
    assert not np.array_equal(results[1][:P(1)], results[3][:P(1)])   # the seeds made different takes
    w.run(seg_prompt(1, cache + "_one", SAME)).raise_for_status()       # a cache with one take
    return cache, results


class Page:
    def __init__(self, browser, worker):
        self.worker = worker
        self.ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        self.ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(worker.url)
                       or route.request.url.startswith("data:") or route.request.url.startswith("blob:")
                       else route.abort())
        self.page = self.ctx.new_page()
        self.console: list[tuple] = []
        self.checks: list[str] = []
        self.page.on("console", lambda m: self.console.append((m.type, m.text, (m.location or {}).get("url", ""))))
        self.page.on("pageerror", lambda e: self.console.append(("pageerror", str(e), "")))
        self.page.on("request", lambda r: self.checks.append(r.post_data or "") if r.method == "POST"
                     and r.url.split("?")[0].endswith("/seedreuse/check") else None)
        self.page.goto(worker.url + "/", wait_until="domcontentloaded")
        self.page.wait_for_function("window.__seedreuse && window.__seedreuse.ready === true", timeout=60_000)
        self.page.wait_for_function(f"!!({APP} && {APP}.graph && {APP}.canvas)", timeout=30_000)
        self.has_capture = self.js(TRACKER_SPY)

    def tracker_calls(self) -> list[str]:
        """The change-tracker methods the pack's modules called."""
        return [c["name"] for c in self.js("() => window.__trackerCalls || []") if "/seedreuse/" in c["stack"]]

    def js(self, expr: str, arg=None):
        return self.page.evaluate(expr, arg)

    def wait(self, fn: str, what: str, timeout: float = 30.0, arg=None):
        try:
            self.page.wait_for_function(fn, arg=arg, timeout=timeout * 1000)
        except Exception as e:
            st = self.js("""() => { const s = window.__seedreuse; return { lastCheck: s.lastCheck, errors: s.errors,
                events: (s.events || []).slice(-4), toasts: s.toasts }; }""")
            raise AssertionError(f"waited {timeout:.0f} s for {what}; extension state: {json.dumps(st)[:4000]}"
                                 f"\n{self.worker.log_tail(30)}") from e

    def widget(self, node_id, name: str):
        return self.js(WIDGET_VALUE, [int(node_id), name])

    def set_widget(self, node_id, name: str, value):
        self.js(f"""([id, name, value]) => {{
            const w = {APP}.graph.getNodeById(id).widgets.find((w) => w.name === name);
            w.value = value; if (w.callback) w.callback(value);
        }}""", [int(node_id), name, value])

    def answer(self) -> dict:
        """The last dry-run answer for the Segment Loop Start."""
        return self.js(f"() => ((window.__seedreuse.lastCheck || {{}}).answer || {{}}).segments?.['{START}'] || null")

    def rows(self) -> list[dict]:
        return self.js(f"""() => [...document.querySelectorAll('{TL} .seedreuse-take')].map((r) => ({{
            take: +r.dataset.seedreuseTake, seed: +r.dataset.seedreuseSeed, latest: r.dataset.seedreuseLatest === 'true',
            picked: r.classList.contains('seedreuse-take-picked'), text: r.textContent }}))""")

    def blocks(self) -> list[dict]:
        return self.js(f"""() => [...document.querySelectorAll('{TL} .seedreuse-seg')].map((b) => ({{
            k: +b.dataset.seedreuseSegment, state: b.dataset.seedreuseState || null,
            field: b.dataset.seedreuseField || null, p: b.dataset.seedreusePrefixFrames == null ? null
            : +b.dataset.seedreusePrefixFrames, disabled: b.classList.contains('seedreuse-disabled'),
            kept: b.classList.contains('seedreuse-kept'), reason: b.dataset.seedreuseReason || null }}))""")

    def heights(self) -> dict:
        """The Segment Loop Start's height (graph units) and its timeline's (CSS px, unscaled)."""
        return self.js(f"""() => ({{ node: Math.round({APP}.graph.getNodeById({START}).size[1]),
            timeline: document.querySelector('{TL}')?.offsetHeight ?? null,
            takes: document.querySelector('{TL} .seedreuse-takes')?.offsetHeight ?? null }})""")

    def root(self) -> dict:
        return self.js(f"() => ({{ ...document.querySelector('{TL}').dataset }})")

    def text(self, sel: str) -> str:
        return self.js(f"() => document.querySelector('{TL} {sel}')?.textContent || ''")

    def center(self):
        self.js(f"""(id) => {{ const c = {APP}.canvas, n = {APP}.graph.getNodeById(id);
            c.ds.scale = 1; c.centerOnNode(n); c.setDirty(true, true); }}""", int(START))
        self.page.wait_for_timeout(300)

    def ours(self) -> list[tuple]:
        return [m for m in self.console if m[0] in ("error", "warning", "pageerror")
                and ("/seedreuse" in m[2] or "[seedreuse]" in m[1] or "seedreuse" in m[1].lower())]


def test_take_picker_resumes_from_the_picked_take(browser, ui_worker, takes, browser_artifacts):
    cache, take_frames = takes
    ui = Page(browser, ui_worker)
    try:
        # the same graph on a cache with one take: the node's height with one take row
        ui.js(f"async ([p, n]) => {{ await {APP}.loadApiJson(p, n); }}",
              [seg_prompt(4, cache + "_one", SAME), "seedreuse_takes_ui_one"])
        ui.set_widget(START, "control_after_generate", "fixed")
        ui.wait(f"() => document.querySelectorAll('{TL} .seedreuse-take').length === 1", "1 take row", 60)
        ui.page.wait_for_timeout(300)
        before = ui.heights()
        assert before["timeline"] and before["takes"], before

        ui.js(f"async ([p, n]) => {{ await {APP}.loadApiJson(p, n); }}",
              [seg_prompt(4, cache, SAME), "seedreuse_takes_ui"])
        ui.set_widget(START, "control_after_generate", "fixed")
        ui.wait(f"() => document.querySelectorAll('{TL} .seedreuse-take').length === 3", "3 take rows", 60)
        ui.page.wait_for_timeout(300)
        # three kept takes do not grow the node over one (the take list has fixed rows, it scrolls)
        assert ui.heights() == before, (ui.heights(), before)
        ui.center()

        # the kept takes, newest first, with their seeds; the latest (take 3) is picked
        rows = ui.rows()
        assert [(r["take"], r["seed"], r["latest"]) for r in rows] == [(3, 3, True), (2, 2, False), (1, 1, False)], rows
        assert [r["picked"] for r in rows] == [True, False, False], rows
        assert "seed 1" in rows[2]["text"] and "3 seg" in rows[2]["text"], rows
        assert ui.root()["seedreuseTake"] == "3" and ui.widget(SESSION, "from_take") is None
        # take 3's segments for this graph: segment 1's prompt line differs
        b = ui.blocks()
        assert [x["state"] for x in b] == ["valid", "invalid", "invalid"], b
        assert "segment prompt under segment 1" in (b[1]["field"] or ""), b
        assert [x["disabled"] for x in b] == [False, False, True], b
        assert [x["p"] for x in b] == [P(0), P(1), P(2)] == [0, 5, 9], b
        assert "N = 2" in b[2]["reason"] and "segment prompt under segment 1" in b[2]["reason"], b
        assert ui.text(".seedreuse-prefix-line") == "P(N): 0 · 5 · 9"
        assert "longest valid (N = 1)" in ui.text(".seedreuse-longest")
        # N = 2 from take 3 is refused with the reason, not accepted
        ui.page.locator(f'{TL} [data-seedreuse-segment="2"]').click()
        assert ui.widget(SESSION, "reuse_prefix_segments") == 0
        assert "segment prompt under segment 1" in ui.text(".seedreuse-timeline-note")
        ui.page.screenshot(path=str(browser_artifacts / "takes_latest.png"))

        # pick the oldest take: from_take = 1 on the Session, the dry run re-runs for it
        posts = len(ui.checks)
        ui.page.locator(f'{TL} [data-seedreuse-take="1"]').click()
        assert ui.widget(SESSION, "from_take") == 1
        assert ui.root()["seedreuseTake"] == "1" and ui.root()["seedreuseFromTake"] == "1"
        # the pick marked the workflow changed through the tracker's current API where it has one
        assert ui.has_capture is not None, "the frontend exposes no ChangeTracker (comfyAPI.changeTracker)"
        calls = ui.tracker_calls()
        assert calls and set(calls) == {"captureCanvasState" if ui.has_capture else "checkState"}, calls
        assert [r["picked"] for r in ui.rows()] == [False, False, True]
        b = ui.blocks()
        assert [x["state"] for x in b] == ["valid", "valid", "valid"] and not any(x["disabled"] for x in b), b
        ui.wait("() => { const a = ((window.__seedreuse.lastCheck || {}).answer || {}).segments?.['" + START +
                "']; return a && a.from_take === 1; }", "the dry run for from_take 1")
        assert len(ui.checks) > posts and json.loads(ui.checks[-1])["prompt"][SESSION]["inputs"]["from_take"] == 1
        ans = ui.answer()
        assert ans["longest_valid"] == 2 and [t["take"] for t in ans["takes"]] == [3, 2, 1], ans

        # segment 2: keep segments 0..1 of take 1
        ui.page.locator(f'{TL} [data-seedreuse-segment="2"]').click()
        assert ui.widget(SESSION, "reuse_prefix_segments") == 2
        assert [x["kept"] for x in ui.blocks()] == [True, True, False]
        ui.wait("() => { const a = ((window.__seedreuse.lastCheck || {}).answer || {}).segments?.['" + START +
                "']; return a && a.N === 2 && a.will === 'resume'; }", "the dry run at N = 2")
        # longest valid: N = -1, which the dry run resolves to 2 for take 1
        ui.page.locator(f"{TL} .seedreuse-longest").click()
        assert ui.widget(SESSION, "reuse_prefix_segments") == -1
        ui.wait("() => { const a = ((window.__seedreuse.lastCheck || {}).answer || {}).segments?.['" + START +
                "']; return a && a.requested_n === -1 && a.N === 2 && a.will === 'resume'; }", "the dry run at N = -1")
        assert ui.root()["seedreuseSelected"] == "2" and ui.root()["seedreuseRequested"] == "-1"
        assert "longest valid" in ui.text(".seedreuse-timeline-label") and "take 1" in ui.text(".seedreuse-timeline-label")
        ui.page.screenshot(path=str(browser_artifacts / "takes_picked.png"))

        # the run resumes from take 1 at the longest valid prefix
        ui.js(f"() => {APP}.queuePrompt(0, 1)")
        ui.wait("() => (window.__seedreuse.events || []).some((e) => e.type === 'seedreuse.segments')",
                "the run's seedreuse.segments event", 120)
        ev = ui.js("() => window.__seedreuse.events.filter((e) => e.type === 'seedreuse.segments').pop().data")
        assert (ev["source_take"], ev["kept"], ev["requested"], ev["segments"], ev["take"]) == (1, 2, -1, 3, 4), ev
        pid = ev["prompt_id"]
        ui.wait("(pid) => window.__seedreuse.state.lastEnded === pid", "the end of the run", 150, pid)
        hist = {}
        deadline = time.monotonic() + 30
        while pid not in hist and time.monotonic() < deadline:     # bounded: history is written at the end
            hist = ui_worker.get_json(f"/history/{pid}")
            if pid not in hist:
                time.sleep(0.2)
        assert hist[pid]["status"]["status_str"] == "success", hist[pid]["status"]
        out = frames_of(ui_worker, hist[pid]["outputs"])
        assert out.shape[0] == P(3)
        assert np.array_equal(out[:P(2)], take_frames[1][:P(2)])         # take 1's frames, bit-exact
        assert not np.array_equal(out[:P(1)], take_frames[3][:P(1)])     # not the latest take's

        # the timeline redraws: takes 4, 3, 2 are kept; from_take 1 names a take no longer kept
        ui.wait(f"() => [...document.querySelectorAll('{TL} .seedreuse-take')].map((r) => r.dataset.seedreuseTake)"
                ".join() === '4,3,2'", "the takes after the run", 60)
        assert "keeps no take 1" in ui.text(".seedreuse-take-missing")
        assert ui.heights() == before, (ui.heights(), before)    # nor does a fourth take
        ui.center()
        ui.page.screenshot(path=str(browser_artifacts / "takes_resumed.png"))

        # the picked take is saved with the workflow (the Session's properties; its widgets_values
        # keep the node's own layout) and comes back with it, the dry run asking for it again
        wf = ui.js(f"() => {APP}.graph.serialize()")
        sess = next(n for n in wf["nodes"] if str(n["id"]) == SESSION)
        assert sess["properties"]["seedreuse_from_take"] == 1 and len(sess["widgets_values"]) == 3, sess
        posts = len(ui.checks)
        ui.js(f"async (wf) => {{ await {APP}.loadGraphData(wf, true, true, 'seedreuse_takes_ui_2'); }}", wf)
        ui.wait(f"() => document.querySelector('{TL}')?.dataset.seedreuseFromTake === '1'", "from_take restored")
        assert ui.widget(SESSION, "from_take") == 1 and ui.widget(SESSION, "reuse_prefix_segments") == -1
        deadline = time.monotonic() + 30       # bounded: the reloaded graph's dry run carries from_take 1
        while time.monotonic() < deadline and not any(
                json.loads(c)["prompt"][SESSION]["inputs"].get("from_take") == 1 for c in ui.checks[posts:]):
            ui.page.wait_for_timeout(100)
        assert [json.loads(c)["prompt"][SESSION]["inputs"].get("from_take") for c in ui.checks[posts:]][-1:] == [1]
        ui.wait("() => { const c = window.__seedreuse.lastCheck; const a = c && c.answer.segments?.['" + START +
                "']; return a && a.will === 'fail' && /keeps no take 1/.test(a.reason || ''); }",
                "the dry run of the reloaded workflow with from_take 1")
        assert ui.js("() => window.__seedreuse.errors") == []
        assert ui.ours() == [], ui.ours()
    except Exception:
        try:
            ui.page.screenshot(path=str(browser_artifacts / "FAILED-takes_ui.png"))
        except Exception:
            pass
        raise
    finally:
        ui.ctx.close()
