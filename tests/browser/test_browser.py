"""Real browser test of the SeedReuse frontend extension (web/seedreuse.js).

A real ComfyUI worker (seedreuse_lab) serves the ComfyUI frontend and the pack; Debian's
Chromium, driven by Playwright, opens it and:

1. checks that seedreuse.js loads as "seedreuse.ui" exactly once (a second import of the module
   is refused by the double-registration guard; the modules under web/seedreuse/, which ComfyUI
   also imports as extension entries, register nothing), loads its stylesheet, installs no
   setInterval and logs nothing of its own to the console;
2. loads a tiny Wan 2.1 T2V reuse workflow, reads the badge of its Encode-or-Reuse node
   ("will encode (why)" from the dry run), queues it, sees "encoded", changes the seed, sees
   "will reuse", queues again and sees "reused · saved ...";
3. queues a request that must fail with a SeedReuse error and sees the error toast (with "fix:");
4. loads a Segment Loop workflow, runs it once, clicks a block of the segment timeline and reads
   reuse_prefix_segments back from the SeedReuse Session widget, then resumes from it;
5. edits a graph without SeedReuse nodes and sees that the extension does no work at all (no
   POST /seedreuse/check, no graph signature), and that the badges show the structured
   error fields (message, fix) of the dry run and of a refused /seedreuse/check.

The badges are node.badges entries (drawn on the canvas in LiteGraph mode); this test reads what
they say from the extension's registry (window.__seedreuse.badge(id)) and checks that the node's
badge entries say the same; the timeline is real DOM and is clicked as such. test_frontends.py
checks the badges as the frontends show them (both renderers, the host's and the newest
frontend). Screenshots go to test-artifacts/.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest

from seedreuse_lab import graphs, host, reuse_graphs
from seedreuse_lab.graphs import T2V
from ._canvas import APP, WIDGET_VALUE

pytestmark = [pytest.mark.comfy, pytest.mark.browser]

EXT_FILE = "seedreuse.js"
EXT_BASE = f"/extensions/{host.PACK_LINK_NAME}/"   # every module of the extension is served under it
NEEDED_NODES = ("SeedReuseSession", "SeedReuseEncodeConditioning", "SeedReuseSegmentLoopStart",
                "SeedReuseBoundarySave", "SeedReuseSegmentLoopEnd", "SeedReusePrefixMerge")

# Installed before any page script runs: records the caller of every setInterval, so a test can
# check that the extension (event-driven only) installed none.
INTERVAL_SPY = """(() => {
  const original = window.setInterval;
  window.__intervalCallers = [];
  window.setInterval = function (...args) {
    window.__intervalCallers.push(String(new Error().stack || ""));
    return original.apply(this, args);
  };
})();"""


# ------------------------------------------------------------------ graphs (API format)
# The shared builders of seedreuse_lab/reuse_graphs.py (tiny Wan 2.1 models, stand-in encoders):
#   t2v_reuse: the positive conditioning (and the zero-out negative built from it) goes through
#              Encode-or-Reuse node "101"; the session is node "100";
#   segment_graph: Wan I2V continuation in a Segment Loop (F=9, M=3, 27 frames = 4 segments),
#              Start "200", Prefix Merge "215", session "100".
ENC = "101"
SESSION = reuse_graphs.SESSION
SEG = reuse_graphs.SEG
SEG_IMAGE = "seedreuse_browser_start.png"


def _short(text: str, n: int) -> str:
    """What the extension draws of a text: its first line, cut to n characters."""
    text = str(text or "").split("\n")[0]
    return text[:n - 1] + "…" if len(text) > n else text


# ------------------------------------------------------------------ page driver

class UI:
    """A ComfyUI page with console capture and small helpers around window.__seedreuse."""

    def __init__(self, browser, worker):
        self.worker = worker
        self.console: list[dict] = []
        self.ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        self.ctx.add_init_script(INTERVAL_SPY)
        self.checks: list[str] = []   # bodies of every POST /seedreuse/check the page sent
        # Nothing outside the worker is reachable (and nothing outside it is needed).
        self.ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(worker.url)
                       or route.request.url.startswith("data:") else route.abort())
        self.page = self.ctx.new_page()
        self.page.on("console", self._on_console)
        self.page.on("request", self._on_request)
        self.page.on("pageerror", lambda e: self.console.append(
            {"type": "pageerror", "text": f"{e}\n{getattr(e, 'stack', '') or ''}", "url": ""}))

    def _on_request(self, req):
        if req.method == "POST" and req.url.split("?")[0].endswith("/seedreuse/check"):
            self.checks.append(req.post_data or "")

    def our_intervals(self) -> list[str]:
        """Stacks of setInterval calls made from the extension's modules."""
        return [s for s in self.js("() => window.__intervalCallers") if EXT_BASE in s]

    def _on_console(self, m):
        loc = m.location or {}
        self.console.append({"type": m.type, "text": m.text, "url": loc.get("url", "")})

    def open(self):
        self.page.goto(self.worker.url + "/", wait_until="domcontentloaded")
        self.page.wait_for_function("window.__seedreuse && window.__seedreuse.ready === true", timeout=60_000)
        self.page.wait_for_function(f"!!({APP} && {APP}.graph && {APP}.canvas)", timeout=30_000)
        return self

    def close(self):
        self.ctx.close()

    def js(self, expr: str, arg=None):
        return self.page.evaluate(expr, arg)

    def ours(self) -> list[dict]:
        """Console errors/warnings that come from the pack's extension: logged by one of its
        modules, a failing /seedreuse/ request, an uncaught exception thrown in one of its
        modules, or a seedreuse.* websocket event nobody listens to. (Host errors whose stack merely passes
        through one of our chained wrappers are the host's.)"""
        bad = []
        for m in self.console:
            if m["type"] not in ("error", "warning", "pageerror"):
                continue
            text, url = m["text"], m["url"]
            first_frame = next((ln for ln in text.splitlines() if ln.strip().startswith("at ")), "")
            if (EXT_BASE in url or "/seedreuse/" in url or "[seedreuse]" in text
                    or (m["type"] == "pageerror" and EXT_BASE in first_frame)
                    or ("Unhandled message" in text and "seedreuse." in text)):
                bad.append(m)
        return bad

    def load_api(self, prompt: dict, name: str):
        self.js(f"async ([p, n]) => {{ await {APP}.loadApiJson(p, n); }}", [prompt, name])
        self.page.wait_for_timeout(200)

    def badge(self, node_id) -> str | None:
        return self.js("(id) => window.__seedreuse.badge(id)", str(node_id))

    def wait_badge(self, node_id, test: str, timeout: float = 30.0) -> str:
        """Wait until the badge of node_id satisfies a JS predicate over `t` (the text); stops
        early when the badge reports a failed run (on this node or another)."""
        fn = f"(id) => {{ const t = window.__seedreuse.badge(id) || ''; return ({test}) || t === 'run failed' || t.startsWith('failed: '); }}"
        ok = f"(id) => {{ const t = window.__seedreuse.badge(id) || ''; return {test}; }}"
        try:
            self.page.wait_for_function(fn, arg=str(node_id), timeout=timeout * 1000)
            if not self.js(ok, str(node_id)):
                raise RuntimeError("the run failed: " + json.dumps(self.js("() => window.__seedreuse.lastExecutionError")))
        except Exception as e:
            raise AssertionError(f"badge of node {node_id}: waited {timeout:.0f} s for {test!r}; it says "
                                 f"{self.badge(node_id)!r} ({e}); details="
                                 f"{json.dumps(self.js('() => window.__seedreuse.badgeDetails'))[:2000]}\n"
                                 f"{self.worker.log_tail(40)}") from e
        return self.badge(node_id)

    def wait_js(self, fn: str, arg=None, timeout: float = 30.0, what: str = ""):
        """page.wait_for_function with the extension's state in the failure message."""
        try:
            self.page.wait_for_function(fn, arg=arg, timeout=timeout * 1000)
        except Exception as e:
            state = self.js("""() => { const s = window.__seedreuse; return {
                badges: s.badgeDetails, lastCheck: s.lastCheck, checks: s.checks, errors: s.errors,
                events: (s.events || []).slice(-6), toasts: s.toasts }; }""")
            raise AssertionError(f"waited {timeout:.0f} s for {what or fn}; extension state: "
                                 f"{json.dumps(state)[:4000]}\n{self.worker.log_tail(40)}") from e

    def queue(self):
        self.js(f"() => {APP}.queuePrompt(0, 1)")

    def set_widget(self, node_id, name: str, value):
        self.js(f"""([id, name, value]) => {{
            const n = {APP}.graph.getNodeById(id);
            const w = n.widgets.find((w) => w.name === name);
            w.value = value;
            if (w.callback) w.callback(value);
            {APP}.graph.setDirtyCanvas(true, true);
        }}""", [int(node_id), name, value])

    def widget(self, node_id, name: str):
        return self.js(WIDGET_VALUE, [int(node_id), name])

    def center_on(self, node_id):
        self.js(f"""(id) => {{
            const c = {APP}.canvas, n = {APP}.graph.getNodeById(id);
            c.ds.scale = 1; c.centerOnNode(n); c.setDirty(true, true);
        }}""", int(node_id))
        self.page.wait_for_timeout(300)

    def screenshot(self, path):
        self.page.screenshot(path=str(path))


@pytest.fixture(scope="module")
def ready_worker(ui_worker):
    info = ui_worker.object_info()
    missing = [n for n in NEEDED_NODES if n not in info]
    if missing:
        log = "\n".join(line for line in ui_worker.log_text().splitlines()
                        if "SeedReuse" in line or "seedreuse" in line)[-3000:]
        pytest.fail(f"the pack did not register {missing} in the worker; its log says:\n{log}", pytrace=False)
    return ui_worker


@pytest.fixture
def ui(browser, ready_worker, artifacts_dir, request):
    u = UI(browser, ready_worker).open()
    yield u
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        try:
            u.screenshot(artifacts_dir / f"FAILED-{request.node.name}.png")
        except Exception:
            pass
    u.close()


# ------------------------------------------------------------------ tests

def test_extension_loads_once_without_console_errors(ui):
    exts = ui.js(f"() => {APP}.extensions.map((e) => e.name).filter((n) => n.startsWith('seedreuse'))")
    assert exts == ["seedreuse.ui"], exts
    # A second copy of the module (another URL = another module instance) must not register again.
    ui.js("async () => { await import('/extensions/ComfyUI-SeedReuse/seedreuse.js?second-copy=1'); }")
    ui.page.wait_for_timeout(300)
    exts = ui.js(f"() => {APP}.extensions.map((e) => e.name).filter((n) => n.startsWith('seedreuse'))")
    assert exts == ["seedreuse.ui"], exts
    assert ui.js("() => typeof window.__seedreuse.timeline === 'function' && "
                 "typeof window.__seedreuse.clickSegment === 'function'")
    css = ui.js("() => !!document.getElementById('seedreuse-style')")
    assert css
    # the styles are one stylesheet (a <link> to seedreuse.css) whose palette the badges read
    href = ui.js("() => document.getElementById('seedreuse-style').href")
    assert href.split("?")[0].endswith(EXT_BASE + "seedreuse.css"), href
    ui.wait_js("() => getComputedStyle(document.documentElement).getPropertyValue('--seedreuse-fail-bg').trim() "
               "!== ''", None, 10, "the palette of seedreuse.css")
    # ComfyUI imports every .js under web/ as an extension entry: the modules register nothing
    # of their own (checked above) and none of them uses setInterval (the extension is event-driven)
    served = ui.js("async () => (await fetch('/extensions', {cache: 'no-store'})).json()")
    modules = sorted(u for u in served if u.startswith(EXT_BASE))
    assert EXT_BASE + EXT_FILE in modules and len(modules) > 1, modules
    for url in modules:
        src = ui.js("async (u) => (await fetch(u)).text()", url)
        assert "setInterval" not in src, url
    assert ui.js("() => String(window.setInterval).includes('__intervalCallers')"), "the setInterval spy"
    assert ui.our_intervals() == [], ui.our_intervals()
    assert ui.js("() => window.__seedreuse.errors") == []
    assert ui.ours() == [], ui.ours()


def test_badges_encode_then_reuse_and_error_toast(ui, ready_worker, artifacts_dir):
    cache = "browser_t2v_" + uuid.uuid4().hex[:8]
    sess, enc = SESSION, ENC
    ui.load_api(reuse_graphs.t2v_reuse(11, "a red ball", cache_name=cache, text_work_ms=300), "seedreuse_browser_t2v")

    # before the first run: the dry run predicts an encode and says why
    text = ui.wait_badge(enc, "t.startsWith('will encode')")
    assert "no successful run" in text, text

    ready_worker.reset_counts()
    t0 = time.monotonic()
    ui.queue()
    text = ui.wait_badge(enc, "t.startsWith('encoded')", timeout=120)
    # the dry run refreshed after the commit: the next run would reuse
    ui.wait_js("(id) => (window.__seedreuse.badgeDetails[id] || {}).next === 'will reuse'", str(enc), 20,
               "the post-run dry run to predict reuse")
    assert ui.badge(enc).startswith("encoded")
    assert ready_worker.counts()["text_encode"] == 1

    # a new seed: the badge now predicts reuse; queue and see it happen
    ui.set_widget(T2V.SAMPLER, "control_after_generate", "fixed")
    ui.set_widget(T2V.SAMPLER, "seed", 424242)
    assert ui.wait_badge(enc, "t === 'will reuse'") == "will reuse"
    ui.queue()
    text = ui.wait_badge(enc, "t.startsWith('reused')", timeout=120)
    assert "saved" in text, text
    # what the frontend shows: the node's own badge entries in node.badges (beside the host's)
    shown = [b["text"] for b in ui.js("(id) => window.__seedreuse.nodeBadges(id)", enc) if b["ours"] and b["text"]]
    assert shown and shown[0] == _short(text, 44), (shown, text)
    assert ready_worker.counts()["text_encode"] == 1, "the encoder ran although the badge said reused"
    slot_events = ui.js("() => window.__seedreuse.events.filter((e) => e.type === 'seedreuse.slot')"
                        ".map((e) => e.data.action)")
    assert slot_events[-2:] == ["encoded", "reused"], slot_events
    ui.center_on(enc)
    ui.screenshot(artifacts_dir / "browser_t2v_reused.png")
    elapsed = time.monotonic() - t0

    # a SeedReuse error is shown as a toast with its fix: 'require' on a cache that has no run yet
    ui.set_widget(sess, "cache_name", "browser_empty_" + uuid.uuid4().hex[:8])
    ui.set_widget(sess, "reuse", "require")
    text = ui.wait_badge(enc, "t.startsWith('will fail')")
    assert "no successful run" in text, text
    # the badge shows the dry run's structured error: its message, and its fix as a second line
    err = ui.js("(id) => window.__seedreuse.lastCheck.answer.nodes[id].error", enc)
    assert err["type"] == "NoCommittedCacheError" and err["code"] == "no_committed_cache" and err["fix"], err
    info = ui.js("(id) => window.__seedreuse.badgeInfo(id)", enc)
    assert info["text"] == f"will fail ({_short(err['message'], 60)})", (info, err)
    assert info["lines"][:2] == [info["text"], f"fix: {err['fix']}"], info
    assert info["error"]["fix"] == err["fix"] and info["tone"] == "fail", info
    n_toasts = ui.js("() => window.__seedreuse.toasts.length")
    ui.queue()
    ui.wait_js(f"() => window.__seedreuse.toasts.length > {n_toasts}", None, 60, "an error toast")
    toast = ui.js("() => window.__seedreuse.toasts[window.__seedreuse.toasts.length - 1]")
    assert "NoCommittedCacheError" in toast["summary"], toast
    assert "fix:" in toast["detail"], toast
    # the toast is made from the structured error the execution_error message carries
    structured = (ui.js("() => window.__seedreuse.lastExecutionError") or {}).get("seedreuse") or {}
    assert structured.get("type") == "NoCommittedCacheError" and structured.get("fix"), structured
    assert structured["message"] in toast["detail"] and f"fix: {structured['fix']}" in toast["detail"], toast
    # the host's toast component shows it (PrimeVue), not a blocking dialog of ours
    ui.page.wait_for_selector("text=NoCommittedCacheError", timeout=10_000)
    ui.screenshot(artifacts_dir / "browser_error_toast.png")

    assert ui.js("() => window.__seedreuse.errors") == []
    assert ui.ours() == [], ui.ours()
    assert ui.our_intervals() == [], ui.our_intervals()
    assert elapsed < 120


def test_segment_timeline_click_sets_session_prefix(ui, ready_worker, artifacts_dir):
    cache = "browser_seg_" + uuid.uuid4().hex[:8]
    start, session = SEG.START, SESSION
    graphs.write_test_image(ready_worker.input_dir / SEG_IMAGE, seed=3)
    ui.load_api(reuse_graphs.segment_graph(SEG_IMAGE, 5, cache_name=cache), "seedreuse_browser_segments")
    ui.wait_badge(start, "t.startsWith('will generate all 4')")
    tl = ui.js("(id) => window.__seedreuse.timeline(id)", start)
    assert tl is not None and tl["dom"], tl
    assert tl["S"] == 4 and tl["previous"] is None and tl["selected"] == 0, tl

    ui.queue()
    ui.wait_badge(start, "t.startsWith('generated 4')", timeout=150)
    # the dry run after the commit sees the run: every segment is a valid resume point
    ui.wait_js("(id) => { const t = window.__seedreuse.timeline(id); "
               "return t && t.previous && (t.valid_n || []).includes(3); }", start, 20, "a resumable timeline")
    tl = ui.js("(id) => window.__seedreuse.timeline(id)", start)
    assert tl["previous"]["segments"] == 4 and tl["previous"]["seed"] == 5, tl

    # click the real DOM block of segment 2: keep segments 0..1, regenerate 2..3
    ui.set_widget(start, "control_after_generate", "fixed")
    ui.center_on(start)
    block = ui.page.locator(f'.seedreuse-timeline[data-seedreuse-node="{start}"] [data-seedreuse-segment="2"]')
    block.wait_for(state="visible", timeout=10_000)
    block.click()
    assert ui.widget(session, "reuse_prefix_segments") == 2
    tl = ui.js("(id) => window.__seedreuse.timeline(id)", start)
    assert tl["selected"] == 2 and [s["kept"] for s in tl["segments"]] == [True, True, False, False], tl
    assert ui.js("() => document.querySelector('.seedreuse-seg.seedreuse-selected').dataset.seedreuseSegment") == "2"
    ui.wait_badge(start, "t.startsWith('will keep 2/4')")

    # the helper clicks the same DOM path
    tl = ui.js("([id, k]) => window.__seedreuse.clickSegment(id, k)", [start, 1])
    assert tl["selected"] == 1 and ui.widget(session, "reuse_prefix_segments") == 1
    block.click()
    assert ui.widget(session, "reuse_prefix_segments") == 2
    ui.screenshot(artifacts_dir / "browser_segment_timeline.png")

    # resume from segment 2 with a new seed: segments 0..1 are kept
    ui.set_widget(start, "seed", 6)
    ui.wait_badge(start, "t.startsWith('will keep 2/4')")
    ui.queue()
    ui.wait_badge(start, "t.startsWith('kept 2/4')", timeout=150)
    merges = ui.js("() => window.__seedreuse.events.filter((e) => e.type === 'seedreuse.merge').map((e) => e.data)")
    assert merges and merges[-1]["frames"] == 27, merges
    ui.center_on(start)
    ui.screenshot(artifacts_dir / "browser_segment_resumed.png")

    # a prompt the server rejects at validation because of a SeedReuse node is toasted too
    n_toasts = ui.js("() => window.__seedreuse.toasts.length")
    ui.set_widget(session, "reuse", "off")   # 'off' with reuse_prefix_segments = 2 is invalid
    ui.queue()
    ui.wait_js(f"() => window.__seedreuse.toasts.length > {n_toasts}", None, 30, "a rejection toast")
    toast = ui.js("() => window.__seedreuse.toasts[window.__seedreuse.toasts.length - 1]")
    assert "rejected" in toast["summary"] and "SeedReuseSession" in toast["detail"], toast

    assert ui.js("() => window.__seedreuse.errors") == []
    assert ui.ours() == [], ui.ours()
    assert ui.our_intervals() == [], ui.our_intervals()


def test_no_work_without_seedreuse_nodes_and_structured_check_error(ui):
    # a graph without SeedReuse nodes: edits of every kind the extension listens to cause no
    # dry run, no graph signature, no work at all
    plain = graphs.wan_t2v_graph(seed=3)   # with the core text encoder instead of the (SeedReuseTest*) stand-in
    plain[T2V.TEXT_LOADER] = {"class_type": "CLIPLoader",
                              "inputs": {"clip_name": "umt5_xxl.safetensors", "type": "wan", "device": "default"}}
    plain[T2V.POS] = {"class_type": "CLIPTextEncode", "inputs": {"clip": graphs.link(T2V.TEXT_LOADER), "text": "x"}}
    ui.load_api(plain, "seedreuse_browser_plain")
    assert ui.js(f"() => {APP}.graph.nodes.length > 3 && "
                 f"!{APP}.graph.nodes.some((n) => String(n.type).startsWith('SeedReuse'))")
    ui.page.wait_for_timeout(500)
    work0 = ui.js("() => ({ ...window.__seedreuse.work })")
    checks0 = len(ui.checks)
    ui.set_widget(T2V.SAMPLER, "seed", 777)                        # widget callback
    ui.js(f"""() => {{
        const g = {APP}.graph, n = window.LiteGraph.createNode("EmptyLatentImage");
        n.pos = [50, 50]; g.add(n);                                   // nodeCreated, graph change
        window.comfyAPI.api.api.dispatchCustomEvent("graphChanged", {{}});
        {APP}.extensionManager.workflow.activeWorkflow?.changeTracker?.checkState();
        window.dispatchEvent(new MouseEvent("mouseup"));              // the change tracker's trigger
    }}""")
    ui.page.wait_for_timeout(2500)                                    # > the 1.5 s debounce
    assert ui.checks[checks0:] == [], ui.checks[checks0:]
    assert ui.js("() => ({ ...window.__seedreuse.work })") == work0
    assert ui.js("() => window.__seedreuse.badges") == {}

    # the same page with a SeedReuse graph does check (so the requests above were observable)
    ui.load_api(reuse_graphs.t2v_reuse(11, "a red ball", cache_name="browser_plain_" + uuid.uuid4().hex[:8]),
                "seedreuse_browser_t2v_check")
    ui.wait_badge(ENC, "t.startsWith('will encode')")
    assert len(ui.checks) > checks0 and '"SeedReuseEncodeConditioning"' in ui.checks[-1]
    assert ui.js("() => window.__seedreuse.errors") == []
    assert ui.ours() == [], ui.ours()

    # a refused /seedreuse/check ({"error": {...}}, as nodes/routes.py answers): the badge shows
    # the error's fields as given
    fix = "do what the structured fix says"
    error = {"code": "invalid_request", "type": "InvalidRequestError", "message": "refused by the browser test",
             "expected": "an API prompt", "actual": "a test", "fix": fix, "details": {}}
    ui.page.route("**/seedreuse/check", lambda route: route.fulfill(
        status=400, content_type="application/json", body=json.dumps({"error": error})))
    ui.js("() => window.__seedreuse.checkNow()")
    info = ui.js("(id) => window.__seedreuse.badgeInfo(id)", ENC)
    assert info["text"] == "check failed (InvalidRequestError: refused by the browser test)", info
    assert info["lines"][:2] == [info["text"], f"fix: {fix}"] and info["error"]["code"] == "invalid_request", info
    ui.page.unroute("**/seedreuse/check")
    ui.js("() => window.__seedreuse.checkNow()")
    assert ui.badge(ENC).startswith("will encode"), ui.badge(ENC)
    assert ui.js("() => window.__seedreuse.errors") == []
    assert ui.our_intervals() == [], ui.our_intervals()
