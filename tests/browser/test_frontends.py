"""The reuse badges in a real browser, on two frontends and in both node renderers.

Frontends: the host's own (comfyui-frontend-package 1.32.9 for ComfyUI 0.3.75, 1.49.6 for 0.33.0;
what each does differently is in FRONTENDS, by version) and the newest
one on PyPI (tests/browser/newest-frontend.txt, installed under .cache/frontend/ and served with
--front-end-root). Renderers: classic LiteGraph canvas nodes and the Vue "Nodes 2.0" nodes
(setting Comfy.VueNodes.Enabled).

For each of the four combinations a tiny Wan 2.1 T2V reuse workflow is loaded and:
- the Encode-or-Reuse node's badges are entries of its node.badges list (the frontend's
  node-badge API), beside the host's own badges: in LiteGraph mode every badge the canvas draws
  for the node is recorded (LGraphBadge.prototype.draw) and ours must not overlap the host's
  node-source badge; in Vue mode the texts are read from the node's DOM and the boxes of ours and
  the host's must not intersect. Vue nodes of frontend 1.32 render node.badges in the header,
  beside the title, without shrinking them: there ours is ONE compact entry ("will encode",
  "encoded", at most 13 characters, the full lines in its tooltip) that takes at most 30 % of
  the header, and a title that fits beside the host's badge is not truncated by ours; 1.49 and
  1.58 render them in a row of their own, where the title keeps its whole text;
- the node narrowed to NARROW px: every badge (ours and the host's) stays within the node's
  width, ours beside the host's (which stay whole) or on lines of their own, cut with "…" only
  past the node's width (in Vue the whole line in the element's tooltip);
- a run is queued: until it ends the badge says "running…" (never the outcome above a stale
  "next: will encode"), then the outcome ("encoded · …") with the prediction for the next run
  ("next: will reuse": the seed is randomized after queueing);
- at the examples' width (340 px) the prompt is changed under reuse "require": the prediction
  ("will fail (inputs changed: …)", "fix: set reuse to 'auto' …") keeps its key words readable
  where the user reads it (the Vue element's visible characters, the canvas' drawn text; 1.32.9's
  header: the verdict, the lines in its tooltip); the run fails in the node, which then says what
  happened ("failed: inputs changed: …", its fix, "next: will fail …") instead of its prediction.
Every example workflow (the second test: whatever example_workflows/ holds) is loaded in BOTH
modes: no two nodes' boxes meet, title bars included, as the mode draws them (the Vue node's
element, the canvas node's box), after the badges and the timeline have grown them; in one mode
per frontend it opens readable on a 1280x800 window: loaded as the template browser loads it, at
>= 80 % zoom with its note and first nodes in view, no missing input file (ComfyUI ships
input/example.png; the pack ships example_workflows/inputs/), badges from the dry run, and for the
segment examples a timeline with its segments before any run, on the screen and not covered by
the frontend's own panels; picking a kept take on the Wan 2.1 segment example shows the Session's
from_take once (the widget, on its socket). The template browser itself (the third test, both
frontends) lists the examples by their human titles with their thumbnails and opens one. On the
way the pack uses no API the frontend reports as deprecated (1.58.1's LiteGraph.onDeprecationWarning:
input.link). Screenshots go to test-artifacts/browser/, test-artifacts/browser/examples/ and
test-artifacts/browser/templates-*.png.
"""
from __future__ import annotations

import json
import shutil
import uuid
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote

import pytest

from seedreuse_lab import graphs, host, reuse_graphs
from seedreuse_lab.tools import example_files
from ._canvas import APP

pytestmark = [pytest.mark.comfy, pytest.mark.browser]

ENC = "101"
EXT_BASE = f"/extensions/{host.PACK_LINK_NAME}/"
RUNNING = "running…"
MAX_HEADER_CHARS = 13      # our compact badge in a Vue node header (web/seedreuse/badges.js)
MAX_HEADER_SHARE = 0.30    # of the header's width, for all of our badges there
# What each frontend the suite runs does differently, read in its bundle, by version (the host's
# own frontend is 1.32.9 on ComfyUI 0.3.75 and 1.49.6 on 0.33.0; the newest is pinned in
# newest-frontend.txt):
#   vue_badges: where Vue nodes render node.badges: 1.32.9's NodeHeader beside the title, in a
#               flex item that does not shrink ("header"); 1.49.6 and 1.58.1 in a NodeBadges row
#               of their own under the widgets ("row");
#   description: the template card prints the description under the title (1.32.9 only);
#   fits_templates: loadGraphData with openSource "template" fits the view to the screen, which
#               the pack's view_restore.js undoes for its own examples (1.49.6, 1.58.1).
FRONTENDS = {
    "1.32.9": {"vue_badges": "header", "description": True, "fits_templates": False},
    "1.49.6": {"vue_badges": "row", "description": False, "fits_templates": True},
    "1.58.1": {"vue_badges": "row", "description": False, "fits_templates": True},
}


def traits(version: str) -> dict:
    assert version in FRONTENDS, (f"frontend {version} is not one the suite knows: read its bundle and add what it "
                                  f"does to FRONTENDS in {__file__}")
    return FRONTENDS[version]

# Records every LGraphBadge the canvas draws: text, x, width and the node's translation, so the
# badges of one node can be compared (installed once the frontend has defined the class).
DRAW_SPY = """() => {
  const B = window.LGraphBadge;
  if (!B || B.prototype.__seedreuseSpy) return !!B;
  const original = B.prototype.draw;
  window.__badgeDraws = [];
  B.prototype.draw = function (ctx, x, y, ...rest) {
    try {
      const t = ctx.getTransform();
      window.__badgeDraws.push({ text: String(this.text || ""), x: x + (this.xOffset || 0),
        y: y + (this.yOffset || 0), w: this.getWidth(ctx), h: this.height || 20, tx: Math.round(t.e),
        ty: Math.round(t.f) });
      if (window.__badgeDraws.length > 5000) window.__badgeDraws.splice(0, 2500);
    } catch (_) { /* recording only */ }
    return original.call(this, ctx, x, y, ...rest);
  };
  B.prototype.__seedreuseSpy = true;
  return true;
}"""


# The newest frontend runs against the primary host only: what it checks is the frontend's, the
# same on either backend (CI time); each host's own frontend runs on that host.
@pytest.fixture(scope="module", params=["host", pytest.param("newest", marks=pytest.mark.one_host("0.33.0"))])
def frontend(request, module_workers, write_ui_settings):
    """(name, version, worker) of one frontend; the worker serves it."""
    if request.param == "host":
        version, extra = metadata.version("comfyui-frontend-package"), []
    else:
        version, static = request.getfixturevalue("newest_frontend")
        extra = ["--front-end-root", str(static)]
    w = module_workers.one(extra_args=extra, api_nodes=True)     # serves a browser (worker.py)
    write_ui_settings(w)
    yield request.param, version, w
    w.stop()


# Records every deprecation warning LiteGraph gives (frontend 1.58.1: LiteGraph.onDeprecationWarning,
# e.g. "input.link is deprecated"), each time (alwaysRepeatWarnings), with the stack of the caller.
DEPRECATION_SPY = """() => {
  const LG = window.LiteGraph;
  if (!LG || !Array.isArray(LG.onDeprecationWarning)) return false;
  window.__deprecations = [];
  LG.alwaysRepeatWarnings = true;
  LG.onDeprecationWarning.push((message) => window.__deprecations.push({ message: String(message),
    stack: String(new Error().stack || '') }));
  return true;
}"""


class Page:
    def __init__(self, browser, worker):
        self.worker = worker
        self.console: list[dict] = []
        self.ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        self.ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(worker.url)
                       or route.request.url.startswith("data:") else route.abort())
        self.page = self.ctx.new_page()
        self.missing: list[str] = []   # URLs answered 404
        self.page.on("response", lambda r: self.missing.append(r.url) if r.status == 404 else None)
        self.page.on("console", lambda m: self.console.append(
            {"type": m.type, "text": m.text, "url": (m.location or {}).get("url", "")}))
        self.page.on("pageerror", lambda e: self.console.append(
            {"type": "pageerror", "text": f"{e}\n{getattr(e, 'stack', '') or ''}", "url": ""}))

    def open(self):
        self.page.goto(self.worker.url + "/", wait_until="domcontentloaded")
        self.page.wait_for_function("window.__seedreuse && window.__seedreuse.ready === true", timeout=90_000)
        self.page.wait_for_function(f"!!({APP} && {APP}.graph && {APP}.canvas)", timeout=30_000)
        self.warns_deprecations = self.js(DEPRECATION_SPY)
        return self

    def our_deprecations(self) -> list[str]:
        """The deprecated frontend APIs the pack's modules used since the page opened."""
        return [d["message"] for d in self.js("() => window.__deprecations || []") if EXT_BASE in d["stack"]]

    def js(self, expr: str, arg=None):
        return self.page.evaluate(expr, arg)

    def wait(self, fn: str, arg=None, timeout: float = 60.0, what: str = ""):
        try:
            self.page.wait_for_function(fn, arg=arg, timeout=timeout * 1000)
        except Exception as e:
            state = self.js("""() => { const s = window.__seedreuse; return { badges: s.badgeDetails,
                history: (s.badgeHistory || []).slice(-12), errors: s.errors, events: (s.events || []).slice(-4) }; }""")
            raise AssertionError(f"waited {timeout:.0f} s for {what or fn}; extension state: "
                                 f"{json.dumps(state)[:4000]}\n{self.worker.log_tail(30)}") from e

    def ours(self) -> list[str]:
        """Our badge entries of a node, as the frontend reads them."""
        return [b["text"] for b in self.js("(id) => window.__seedreuse.nodeBadges(id)", ENC) if b["ours"] and b["text"]]

    def vue_texts(self) -> list[str]:
        """The texts of the leaf elements of the Vue node (empty without a Vue node)."""
        return self.js("""(id) => {
            const el = document.querySelector(`[data-node-id="${id}"]`);
            if (!el) return [];
            return [...el.querySelectorAll('*')].filter((e) => !e.children.length)
                .map((e) => e.textContent.trim()).filter((t) => t);
        }""", ENC)

    def vue_header(self) -> dict:
        """The Vue node's header: its box, the title's text and widths (visible, and the text's
        own: scrollWidth), and our badge elements (data-seedreuse-badge) with their tooltips."""
        return self.js("""(id) => {
            const el = document.querySelector(`[data-node-id="${id}"]`);
            if (!el) return null;
            const header = el.querySelector('.lg-node-header');
            const title = el.querySelector('[data-testid="node-title"]');
            const inner = title && (title.querySelector('.truncate') || title);
            const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
            return {
              header: header ? box(header) : null,
              title: title ? title.textContent.trim() : null,
              title_visible: inner ? inner.clientWidth : 0, title_text: inner ? inner.scrollWidth : 0,
              ours: [...el.querySelectorAll('[data-seedreuse-badge]')].map((b) => ({
                role: b.getAttribute('data-seedreuse-badge'), text: b.textContent.trim(),
                tooltip: b.getAttribute('title'), box: box(b), in_header: !!b.closest('.lg-node-header') })),
            };
        }""", ENC)

    def vue_boxes(self, texts: list[str]) -> dict:
        return self.js("""([id, texts]) => {
            const el = document.querySelector(`[data-node-id="${id}"]`);
            const out = {};
            for (const e of el.querySelectorAll('*')) {
              const t = e.textContent.trim();
              if (!e.children.length && texts.includes(t)) {
                const r = e.getBoundingClientRect();
                out[t] = [r.left, r.top, r.right, r.bottom];
              }
            }
            return out;
        }""", [ENC, texts])

    def drawn_row(self) -> list[dict]:
        """The badges the canvas drew last for the node whose badges include ours."""
        return self.js("""(text) => {
            const d = window.__badgeDraws || [];
            let i = d.length - 1;
            while (i >= 0 && d[i].text !== text) i--;
            if (i < 0) return [];
            const { tx, ty } = d[i];
            const row = [];
            for (let j = i; j >= 0 && row.length < 12; j--) {
              const r = d[j];
              if (r.tx !== tx || r.ty !== ty) continue;
              if (row.some((o) => o.text === r.text && o.x === r.x)) break; // the previous frame
              row.push(r);
            }
            return row.reverse();
        }""", self.ours()[0])

    def center(self):
        self.js(f"""(id) => {{ const c = {APP}.canvas, n = {APP}.graph.getNodeById(+id);
            c.ds.scale = 1; c.centerOnNode(n); c.setDirty(true, true); }}""", ENC)
        self.page.wait_for_timeout(400)

    def our_console_errors(self) -> list[dict]:
        return [m for m in self.console if m["type"] in ("error", "pageerror")
                and (EXT_BASE in m["url"] or "[seedreuse]" in m["text"] or EXT_BASE in m["text"].split("\n", 2)[-1][:400])]


NARROW = 240     # a node this wide cannot show our badge lines whole beside the host's badge

# The narrow Vue node's box, our badge elements (box, tooltip) and the host's badges of the
# node (the leaf elements of its badge row that are not ours: box, and whether their text is
# shown whole, not clipped).
VUE_FIT = """(id) => {
  const el = document.querySelector(`[data-node-id="${id}"]`);
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const ours = [...el.querySelectorAll('[data-seedreuse-badge]')].filter((b) => b.textContent.trim());
  const row = ours.length ? ours[0].parentElement.parentElement : null;
  const host = row ? [...row.querySelectorAll('*')].filter((e) => !e.children.length && e.textContent.trim()
    && !e.closest('[data-seedreuse-badge]')) : [];
  return { node: box(el),
    ours: ours.map((b) => ({ text: b.textContent.trim(), tooltip: b.getAttribute('title'), box: box(b) })),
    host: host.map((e) => ({ text: e.textContent.trim(), box: box(e), whole: e.scrollWidth <= e.clientWidth + 1 })) };
}"""


# The badges (with a text) of the last frame the canvas drew for the node whose row holds `text`:
# back from the last draw of `text`, the draws at the same node translation until a text repeats.
LAST_FRAME_ROW = """(text) => {
  const d = (window.__badgeDraws || []).filter((r) => r.text);
  let i = d.length - 1;
  while (i >= 0 && d[i].text !== text) i--;
  if (i < 0) return [];
  const { tx, ty } = d[i];
  const row = [];
  for (let j = d.length - 1; j >= 0; j--) {
    const r = d[j];
    if (r.tx !== tx || r.ty !== ty) continue;
    if (row.some((o) => o.text === r.text)) break;
    row.push(r);
  }
  return row.reverse();
}"""


def _rect(d: dict) -> list[float]:
    """[left, top, right, bottom] of a drawn badge (DRAW_SPY)."""
    return [d["x"], d["y"], d["x"] + d["w"], d["y"] + d["h"]]


def _meet(a, b) -> bool:
    return not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1])


def _assert_narrow_node_fits(ui: Page, vue: bool, lines: list[str]) -> None:
    """The node narrowed to NARROW: every badge of it (ours and the host's) lies within its width,
    ours cover none of the host's (shown whole) and keep their whole line in their tooltip."""
    ui.js(f"([id, w]) => {{ const n = {APP}.graph.getNodeById(+id); n.setSize([w, n.size[1]]); "
          f"{APP}.canvas.setDirty(true, true); }}", [ENC, NARROW])
    if vue:
        ui.wait(f"(w) => {{ const el = document.querySelector('[data-node-id=\"{ENC}\"]'); "
                "return !!el && el.offsetWidth <= w + 1; }", NARROW, 20, "the narrow Vue node")
        ui.page.wait_for_timeout(400)
        fit = ui.js(VUE_FIT, ENC)
        assert fit["ours"] and fit["host"], fit
        for b in fit["ours"] + fit["host"]:
            assert fit["node"][0] - 1 <= b["box"][0] and b["box"][2] <= fit["node"][2] + 1, ("past the node", b, fit)
        for a in fit["ours"]:
            assert a["tooltip"] and a["tooltip"] in lines, (a, lines)    # the whole line in its tooltip
            for h in fit["host"]:
                assert not _meet(a["box"], h["box"]), ("over the host's badge", a, h, fit)
        assert all(h["whole"] for h in fit["host"]), fit
    else:   # the draws of frames after the resize only
        ui.js(f"() => {{ window.__badgeDraws = []; {APP}.canvas.setDirty(true, true); }}")
        ui.wait("(t) => (window.__badgeDraws || []).some((d) => d.text === t)", ui.ours()[0], 20,
                "the canvas drawing the narrow node's badges")
        row = ui.js(LAST_FRAME_ROW, ui.ours()[0])
        width = ui.js(f"(id) => {APP}.graph.getNodeById(+id).size[0]", ENC)
        shown = [(r["text"], round(r["x"], 1), round(r["y"], 1), round(r["w"], 1)) for r in row]
        assert width == NARROW and any("SeedReuse" in r["text"] for r in row), (width, shown)
        assert all(0 <= r["x"] and r["x"] + r["w"] <= width + 0.5 for r in row), ("past the node", width, shown)
        for i, a in enumerate(row):   # side by side or on rows of their own (badge_fit.js fitRows)
            for b in row[i + 1:]:
                assert not _meet(_rect(a), _rect(b)), ("badges overlap", shown)


TEMPLATE_WIDTH = 340   # the width the shipped examples give their nodes

# What the user reads of each of our badges in the Vue node: the characters of the element's text
# that lie inside it (an ellipsis, as wide as "…", takes the place of the last ones when cut).
VUE_READ = """(id) => {
  const el = document.querySelector(`[data-node-id="${id}"]`);
  const ctx = document.createElement('canvas').getContext('2d');
  return [...el.querySelectorAll('[data-seedreuse-badge]')].filter((b) => b.textContent.trim()).map((b) => {
    const cs = getComputedStyle(b), r = b.getBoundingClientRect();
    const cut = b.scrollWidth > b.clientWidth + 1;
    ctx.font = cs.font;
    const right = r.right - parseFloat(cs.paddingRight) - (cut ? ctx.measureText('…').width : 0);
    const t = [...b.childNodes].find((c) => c.nodeType === 3 && c.textContent.trim());
    let read = '';
    const range = document.createRange();
    for (let i = 0; t && i < t.textContent.length; i++) {
      range.setStart(t, i); range.setEnd(t, i + 1);
      if (range.getBoundingClientRect().right > right + 0.5) break;
      read += t.textContent[i];
    }
    return { read: read.trim(), cut, title: b.getAttribute('title') };
  });
}"""


def _read_badges(ui: Page, vue: bool, placement: str | None) -> list[str]:
    """What the user reads of our badge lines now, at the node's width: in a Vue row each element's
    visible characters, in the 1.32.9 Vue header the compact entry, on the canvas the drawn texts
    (a line cut there ends with "…")."""
    if placement == "header":
        return [b["text"] for b in ui.vue_header()["ours"] if b["text"]]
    if vue:
        return [b["read"] for b in ui.js(VUE_READ, ENC)]
    ui.js(f"() => {{ window.__badgeDraws = []; {APP}.canvas.setDirty(true, true); }}")
    ui.wait("(t) => (window.__badgeDraws || []).some((d) => d.text === t)", ui.ours()[0], 20, "the canvas drawing")
    drawn = {r["text"] for r in ui.js(LAST_FRAME_ROW, ui.ours()[0])}
    return [t.rstrip("…") for t in ui.ours() if t in drawn]


def _assert_key_words(read: list[str], want: list[list[str]], placement: str | None, lines: list[str]) -> None:
    """Each of our lines shows its key words (`want[i]` for line i) where the user reads it; the
    1.32.9 header shows the first line's verdict, the lines whole in its tooltip."""
    if placement == "header":
        assert read == [want[0][0]], (read, want, lines)
        return
    assert len(read) == len(want), (read, want, lines)
    for shown, words in zip(read, want):
        assert all(w in shown for w in words), f"key words {words} not readable in {shown!r} (lines: {lines})"


def _failed_run_shows_its_outcome(ui: Page, vue: bool, placement: str | None, worker) -> tuple[list, list]:
    """At the examples' width (TEMPLATE_WIDTH), the prompt changed under reuse 'require': the badge
    predicts the failure with its reason and fix, every key word readable; the run fails in the
    Encode-or-Reuse node, which then says what happened ("failed: why", the fix, the next run's
    prediction) instead of its prediction. Returns (prediction lines, outcome lines)."""
    ui.js(f"([id, w]) => {{ const n = {APP}.graph.getNodeById(+id); n.setSize([w, n.size[1]]); "
          f"{APP}.canvas.setDirty(true, true); }}", [ENC, TEMPLATE_WIDTH])
    ui.js(f"""() => {{ const g = {APP}.graph;
        const set = (n, name, v) => {{ const w = n.widgets.find((w) => w.name === name); w.value = v; w.callback && w.callback(v); }};
        set(g.nodes.find((n) => n.type === 'SeedReuseSession'), 'reuse', 'require');
        set(g.nodes.find((n) => (n.widgets || []).some((w) => w.name === 'text')), 'text', 'another prompt'); }}""")
    ui.wait(f"() => (window.__seedreuse.badgeInfo('{ENC}').lines || []).length === 2 && "
            "window.__seedreuse.badge('{ENC}').startsWith('will fail')".replace("{ENC}", ENC), None, 60,
            "the failure predicted")
    ui.page.wait_for_timeout(400)
    before = ui.js("(id) => window.__seedreuse.badgeInfo(id).lines", ENC)
    _assert_key_words(_read_badges(ui, vue, placement), [["will fail", "inputs changed"], ["fix: set reuse to 'auto'"]],
                      placement, before)
    n_hist = ui.js("() => (window.__seedreuse.badgeHistory || []).length")
    ui.js(f"() => {APP}.queuePrompt(0, 1)")
    ui.wait(f"() => (window.__seedreuse.badge('{ENC}') || '').startsWith('failed')", None, 120, "the failed outcome")
    ui.wait(f"() => (window.__seedreuse.badgeInfo('{ENC}').lines || []).some((l) => l.startsWith('next: will fail'))",
            None, 60, "the next run's prediction after the failure")
    ui.page.wait_for_timeout(400)
    after = ui.js("(id) => window.__seedreuse.badgeInfo(id).lines", ENC)
    assert after[0].startswith("failed: inputs changed") and after[1] == before[1], (before, after)
    _assert_key_words(_read_badges(ui, vue, placement), [["failed", "inputs changed"], ["fix: set reuse to 'auto'"],
                                                          ["next: will fail"]], placement, after)
    err = ui.js("() => window.__seedreuse.lastExecutionError")
    assert str(err["node_id"]) == ENC and err["node_type"] == "SeedReuseEncodeConditioning", err
    # from the end of the run on, the node never went back to its prediction
    hist = [h for h in ui.js("() => window.__seedreuse.badgeHistory")[n_hist:] if h["key"] == ENC and not h["running"]]
    ended = [i for i, h in enumerate(hist) if h["lines"][0].startswith("failed")]
    assert ended and all(h["lines"][0].startswith("failed") for h in hist[ended[0]:]), hist
    return before, after


def _assert_title_readable(ui: Page, placement: str, lines: list[str]) -> None:
    """Our badges in the Vue node leave its title readable. `lines`: the badge's lines now.
    header (1.32): one entry of at most MAX_HEADER_CHARS whose tooltip holds every line, taking at
    most MAX_HEADER_SHARE of the header, and a title that fits beside the host's badge is not
    truncated beside ours (the node's own long title is cut by the host's badge already); row
    (1.58): each entry's tooltip is its whole line and the title keeps its whole text."""
    h = ui.vue_header()
    mine = [b for b in h["ours"] if b["text"]]
    assert mine and all(b["in_header"] == (placement == "header") for b in mine), h
    if placement == "header":
        assert len(mine) == 1 and len(mine[0]["text"]) <= MAX_HEADER_CHARS, h
        assert mine[0]["tooltip"] == "\n".join(lines), (h, lines)
        width = h["header"][2] - h["header"][0]
        used = sum(b["box"][2] - b["box"][0] for b in mine)
        assert used <= MAX_HEADER_SHARE * width, f"our badges take {used:.0f} of the header's {width:.0f} px: {h}"
        title = ui.js(f"(id) => {APP}.graph.getNodeById(+id).title", ENC)
        try:
            ui.js(f"(id) => {{ {APP}.graph.getNodeById(+id).title = 'Positive'; }}", ENC)
            ui.wait(f"() => document.querySelector('[data-node-id=\"{ENC}\"] [data-testid=\"node-title\"]')"
                    "?.textContent.trim() === 'Positive'", None, 10, "the short title in the Vue node")
            short = ui.vue_header()
            assert short["title_text"] > 0 and short["title_visible"] >= short["title_text"], \
                f"a short title is truncated beside our badge: {short}"
        finally:
            ui.js(f"([id, t]) => {{ {APP}.graph.getNodeById(+id).title = t; }}", [ENC, title])
            ui.wait(f"(t) => document.querySelector('[data-node-id=\"{ENC}\"] [data-testid=\"node-title\"]')"
                    "?.textContent.trim() === t", title, 10, "the node's title back")
    else:
        assert [b["tooltip"] for b in mine] == lines[:len(mine)], (h, lines)
        assert h["title_text"] > 0 and h["title_visible"] >= h["title_text"], f"the title is truncated: {h}"


@pytest.mark.parametrize("mode", ["litegraph", "vue"])
def test_badges_beside_the_host_badges_and_consistent_during_a_run(frontend, mode, browser, browser_artifacts,
                                                                   write_ui_settings):
    name, version, worker = frontend
    vue = mode == "vue"
    write_ui_settings(worker, {"Comfy.VueNodes.Enabled": vue})
    ui = Page(browser, worker).open()
    try:
        assert ui.js("() => window.__COMFYUI_FRONTEND_VERSION__") == version
        assert ui.js(DRAW_SPY), "the frontend exposes no LGraphBadge class"
        cache = f"browser_badges_{name}_{mode}_{uuid.uuid4().hex[:8]}"
        prompt = reuse_graphs.t2v_reuse(7, f"badges {cache}", cache_name=cache, text_work_ms=1500)
        ui.js(f"async (p) => {{ await {APP}.loadApiJson(p, 'seedreuse_badges'); }}", prompt)
        ui.wait("() => (window.__seedreuse.badge('101') || '').startsWith('will encode')", what="'will encode'")
        ui.center()
        placement = None
        if vue:   # the extension finds out where this frontend's Vue nodes render node.badges
            ui.wait("() => !!window.__seedreuse.vueBadgePlacement", None, 20, "the Vue badge placement")
            placement = ui.js("() => window.__seedreuse.vueBadgePlacement")
            assert placement == traits(version)["vue_badges"], (name, version, placement)
            ui.page.wait_for_timeout(400)
        before = ui.ours()
        assert before and before[0].startswith("will encode"), before
        full = ui.js("() => window.__seedreuse.badge('101')")
        if placement == "header":   # one compact entry beside the title: the words before the reason
            assert before == ["will encode"], (before, full)
        elif vue:    # the whole line (seedreuse.css wraps it onto a line of its own, cut only past the node)
            assert before[0] == full, (before, full)
        else:        # the canvas: the line, cut to what the node's width leaves beside the host's badges
            assert before[0] == full or (len(before[0]) > 4 and before[0].endswith("…")
                                         and full.startswith(before[0][:-1].rstrip())), (before, full)

        # the node is rendered by the mode asked for
        has_vue_node = ui.js(f"() => !!document.querySelector('[data-node-id=\"{ENC}\"]')")
        assert has_vue_node == vue, f"{mode}: Vue node element present = {has_vue_node}"

        if vue:
            ui.wait(f"(t) => {{ const el = document.querySelector('[data-node-id=\"{ENC}\"]'); "
                    f"return !!el && el.textContent.includes(t); }}", before[0], 20, "the badge in the Vue node")
            texts = ui.vue_texts()
            assert before[0] in texts, texts
            # the host's node-source badge is there too, as its own element, and the boxes do not meet
            assert "SeedReuse" in texts, texts
            boxes = ui.vue_boxes([before[0], "SeedReuse"])
            a, b = boxes[before[0]], boxes["SeedReuse"]
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], boxes
            _assert_title_readable(ui, placement, ui.js("(id) => window.__seedreuse.badgeInfo(id).lines", ENC))
        else:
            ui.js(f"() => {APP}.canvas.setDirty(true, true)")
            ui.wait("(t) => (window.__badgeDraws || []).some((d) => d.text === t)", before[0], 20,
                    "the canvas drawing our badge")
            row = ui.drawn_row()
            texts = [r["text"] for r in row]
            assert before[0] in texts, row
            host_badges = [r for r in row if "SeedReuse" in r["text"] and r["text"] != before[0]]
            assert host_badges, f"the host's node-source badge is not drawn beside ours: {row}"
            mine = next(r for r in row if r["text"] == before[0])
            for h in host_badges:   # side by side, or ours on a row of its own above
                assert not _meet(_rect(mine), _rect(h)), row
        ui.page.screenshot(path=str(browser_artifacts / f"badges-{name}-{version}-{mode}-before.png"))

        # a run: "running…" until it ends, then the outcome and the next prediction
        n_hist = ui.js("() => (window.__seedreuse.badgeHistory || []).length")
        worker.reset_counts()
        ui.js(f"() => {APP}.queuePrompt(0, 1)")
        if vue:
            ui.wait(f"(t) => {{ const el = document.querySelector('[data-node-id=\"{ENC}\"]'); "
                    f"return !!el && el.textContent.includes(t); }}", RUNNING, 60, "'running…' in the Vue node")
        else:
            ui.wait(f"(t) => window.__seedreuse.nodeBadges('{ENC}').some((b) => b.ours && b.text === t)",
                    RUNNING, 60, "'running…' in node.badges")
        ui.wait("() => (window.__seedreuse.badge('101') || '').startsWith('encoded')", None, 120, "'encoded'")
        if placement == "header":   # the lines, shown as one compact entry (below)
            ui.wait(f"() => (window.__seedreuse.badgeInfo('{ENC}').lines || []).includes('next: will reuse')",
                    None, 60, "'next: will reuse'")
            lines = ui.js("(id) => window.__seedreuse.badgeInfo(id).lines", ENC)
            assert lines[0].startswith("encoded · ") and lines[1:] == ["next: will reuse"], lines
            after = ui.ours()
            assert after == ["encoded"], (after, lines)
        else:
            ui.wait(f"() => window.__seedreuse.nodeBadges('{ENC}').some((b) => b.ours && b.text === 'next: will reuse')",
                    None, 60, "'next: will reuse'")
            after = ui.ours()
            assert after[0].startswith("encoded · ") and after[1:] == ["next: will reuse"], after
            lines = ui.js("(id) => window.__seedreuse.badgeInfo(id).lines", ENC)
        hist = [h for h in ui.js("() => window.__seedreuse.badgeHistory")[n_hist:] if h["key"] == ENC]
        during = [h for h in hist if h["running"]]
        assert during and all(h["lines"] == [RUNNING] for h in during), hist
        first_after = hist.index(during[-1]) + 1
        assert hist[first_after]["lines"][0].startswith("encoded"), hist
        assert not any("will encode" in line for h in hist[first_after:] for line in h["lines"]), hist
        if placement == "header":   # the compact outcome; the lines with the next prediction in its tooltip
            ui.wait(f"() => {{ const b = document.querySelector('[data-node-id=\"{ENC}\"] [data-seedreuse-badge]'); "
                    "return !!b && b.textContent.trim() === 'encoded' && "
                    "(b.getAttribute('title') || '').includes('next: will reuse'); }", None, 20,
                    "the compact outcome in the Vue node header")
            _assert_title_readable(ui, placement, lines)
        elif vue:
            ui.wait(f"() => {{ const el = document.querySelector('[data-node-id=\"{ENC}\"]'); "
                    f"return !!el && el.textContent.includes('next: will reuse') && el.textContent.includes('encoded · '); }}",
                    None, 20, "the outcome in the Vue node")
            _assert_title_readable(ui, placement, lines)
        else:
            ui.js(f"() => {APP}.canvas.setDirty(true, true)")
            ui.wait("(t) => (window.__badgeDraws || []).some((d) => d.text === t)", after[0], 20,
                    "the canvas drawing the outcome")
        ui.center()
        ui.page.screenshot(path=str(browser_artifacts / f"badges-{name}-{version}-{mode}-after-run.png"))
        assert worker.counts().get("text_encode") == 1

        # a narrow node: our badges stay within its width and beside the host's, whose stay whole
        # (1.32.9's Vue header: one compact entry, checked above)
        if placement != "header":
            _assert_narrow_node_fits(ui, vue, lines)
        ui.page.screenshot(path=str(browser_artifacts / f"badges-{name}-{version}-{mode}-narrow.png"))

        # a run that fails in the node: its badge says what happened, its key words readable at 340 px
        _failed_run_shows_its_outcome(ui, vue, placement, worker)
        ui.center()
        ui.page.screenshot(path=str(browser_artifacts / f"badges-{name}-{version}-{mode}-failed.png"))
        # no API the frontend reports as deprecated on the way (1.58.1: input.link)
        assert ui.warns_deprecations, "the frontend has no LiteGraph.onDeprecationWarning"
        assert ui.our_deprecations() == [], ui.our_deprecations()
        assert ui.js("() => window.__seedreuse.errors") == []
        assert ui.our_console_errors() == [], ui.our_console_errors()
    finally:
        ui.ctx.close()


EXAMPLES = sorted((host.REPO_ROOT / "example_workflows").glob("*.json"))
MIN_SCALE = 0.8
VIEWPORT = (1280, 800)

# Where the note and the nodes of the loaded graph are on the screen, from the canvas view.
LAYOUT = """() => {
  const app = window.comfyAPI.app.app, c = app.canvas, ds = c.ds;
  const r = c.canvas.getBoundingClientRect(), th = window.LiteGraph.NODE_TITLE_HEIGHT || 30;
  const box = (n) => {
    const x = (n.pos[0] + ds.offset[0]) * ds.scale + r.left, y = (n.pos[1] - th + ds.offset[1]) * ds.scale + r.top;
    return { id: n.id, type: n.type, x, y, w: n.size[0] * ds.scale, h: (n.size[1] + th) * ds.scale };
  };
  return { scale: ds.scale, nodes: app.graph.nodes.map(box) };
}"""


# The timeline's box on the screen, and what the page shows at its centre and at its first
# segment block's centre (the timeline itself, or a panel of the frontend covering it).
TIMELINE_BOX = """(id) => {
  const el = document.querySelector(`.seedreuse-timeline[data-seedreuse-node="${id}"]`);
  if (!el) return null;
  const r = el.getBoundingClientRect(), cs = getComputedStyle(el);
  const seg = el.querySelector('[data-seedreuse-segment="0"]');
  const s = seg ? seg.getBoundingClientRect() : null;
  const hit = (x, y) => { const e = document.elementFromPoint(x, y); return !!e && el.contains(e); };
  return { x: r.left, y: r.top, w: r.width, h: r.height,
    shown: cs.display !== 'none' && cs.visibility !== 'hidden' && r.width > 0 && r.height > 0,
    centre_is_timeline: hit(r.left + r.width / 2, r.top + r.height / 2),
    segment_is_timeline: !!s && hit(s.left + s.width / 2, s.top + s.height / 2) };
}"""


def _inside(b: dict, w: float, h: float, whole: bool) -> bool:
    if whole:
        return b["x"] >= 0 and b["y"] >= 0 and b["x"] + b["w"] <= w and b["y"] + b["h"] <= h
    return 0 <= b["x"] < w - 40 and 0 <= b["y"] < h - 20   # the title bar's corner is on the screen


def _copy_example_inputs(worker) -> list[str]:
    """What a user has: ComfyUI's own input/example.png and the pack's example_workflows/inputs/."""
    worker.input_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(host.comfyui_dir() / "input" / "example.png", worker.input_dir / "example.png")
    names = ["example.png"]
    for f in sorted((host.REPO_ROOT / "example_workflows" / "inputs").iterdir()):
        if f.suffix in (".wav", ".png", ".mp3", ".flac"):
            shutil.copy(f, worker.input_dir / f.name)
            names.append(f.name)
    return names


# Readability (the view, the note, the timeline in view) is the same for every frontend: it is
# checked in one mode per frontend; the layout (no node over another) in both modes. The mode
# follows the module's frontend fixture (an indirect parametrization would start two more
# frontend workers).
EXAMPLES_MODE = {"host": "litegraph", "newest": "vue"}

# The boxes of the graph's nodes as the mode draws them, in graph units, title bars included: the
# Vue node's element (its DOM box, which grows with its rows) or the canvas node's bounding box.
NODE_BOXES = """() => {
  const app = window.comfyAPI.app.app, c = app.canvas, ds = c.ds;
  const r = c.canvas.getBoundingClientRect(), th = window.LiteGraph.NODE_TITLE_HEIGHT || 30;
  return app.graph.nodes.map((n) => {
    const el = document.querySelector(`[data-node-id="${n.id}"]`);
    let b;
    if (el) {
      const d = el.getBoundingClientRect();
      b = [(d.left - r.left) / ds.scale - ds.offset[0], (d.top - r.top) / ds.scale - ds.offset[1],
        d.width / ds.scale, d.height / ds.scale];
    } else b = [n.pos[0], n.pos[1] - th, n.size[0], n.size[1] + th];
    return { id: n.id, type: n.type, title: n.title, box: b, dom: !!el };
  });
}"""


def _overlapping(nodes: list[dict]) -> list[str]:
    """'a x b: w x h px' for every two nodes whose boxes meet."""
    out = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            (ax, ay, aw, ah), (bx, by, bw, bh) = a["box"], b["box"]
            w, h = min(ax + aw, bx + bw) - max(ax, bx), min(ay + ah, by + bh) - max(ay, by)
            if w > 0.5 and h > 0.5:
                out.append(f"{a['id']} {a['title'] or a['type']} x {b['id']} {b['title'] or b['type']}: "
                           f"{w:.0f} x {h:.0f} px")
    return out


# The Session's from_take as the mode shows it: the inputs and widgets of that name, whether the
# input is the widget's own socket, and (Vue) the elements whose text is "from_take".
FROM_TAKE_SHOWN = f"""(id) => {{
  const n = {APP}.graph.getNodeById(id), el = document.querySelector(`[data-node-id="${{id}}"]`);
  const inputs = (n.inputs || []).filter((i) => i.name === 'from_take');
  return {{ inputs: inputs.length, paired: inputs.every((i) => !!i.widget && i.widget.name === 'from_take'),
    widgets: (n.widgets || []).filter((w) => w.name === 'from_take').map((w) => w.value),
    shown: el ? [...el.querySelectorAll('*')].filter((e) => !e.children.length
      && e.textContent.trim() === 'from_take').length : null }};
}}"""
TAKE_IMAGE = "seedreuse_layout_take.png"


@pytest.fixture(scope="module")
def segment_example_take(frontend):
    """A kept take in the cache the Wan 2.1 segment example names (a tiny run of its own graph
    shape), so its timeline lists a take to pick; made once per module (the workers share a root)."""
    name, version, worker = frontend
    seg = json.loads(example_files.pairs()["wan21_i2v_segment_reuse"].read_text())
    cache = next(n["widgets_values"][0] for n in seg["nodes"] if n["type"] == "SeedReuseSession")
    listed = {c.get("name"): c for c in worker.get_json("/seedreuse/browser").get("caches", [])}
    if not (listed.get(cache) or {}).get("takes"):
        graphs.write_test_image(worker.input_dir / TAKE_IMAGE, seed=3)
        worker.run(reuse_graphs.segment_graph(TAKE_IMAGE, 1, cache_name=cache, steps=1)).raise_for_status()
    return cache


def test_examples_open_readable_and_no_node_overlaps_another(frontend, browser, browser_artifacts,
                                                              write_ui_settings, segment_example_take):
    """Every example_workflows/*.json (whatever is in the folder), loaded as the template browser
    opens it, in BOTH canvas modes: no two nodes' boxes meet, title bars included, as the mode
    draws them (the Vue node's element; the canvas node's box), after the dry run's badges and
    Segment Loop Start's timeline have grown them. In one mode per frontend (EXAMPLES_MODE) also
    readable: >= 80 % zoom, its note and first nodes in view, every input file shipped, a timeline
    with its segments in view and not under a panel. Picking the kept take of the Wan 2.1 segment
    example shows the Session's from_take once: the widget the picker adds, on the socket of that
    name (Vue: one element says from_take). No error of the pack in the console."""
    name, version, worker = frontend
    assert EXAMPLES, "example_workflows/*.json: the pack ships example workflows"
    shipped = _copy_example_inputs(worker)
    out = browser_artifacts / "examples"
    out.mkdir(exist_ok=True)
    problems = []
    picked = {}
    for mode in ("litegraph", "vue"):
        write_ui_settings(worker, {"Comfy.VueNodes.Enabled": mode == "vue"})
        ui = Page(browser, worker).open()
        try:
            for f in EXAMPLES:
                problems += _open_example(ui, f, mode, readable=mode == EXAMPLES_MODE[name], shipped=shipped)
                shot = example_files.example_id(json.loads(f.read_text())) or f.stem
                ui.page.screenshot(path=str(out / f"{shot}-{name}-{version}-{mode}.png"))
                if f == example_files.pairs()["wan21_i2v_segment_reuse"]:
                    picked[mode] = _pick_take(ui)
            assert ui.js("() => window.__seedreuse.errors") == [], mode
            assert ui.our_console_errors() == [], (mode, ui.our_console_errors())
            assert ui.our_deprecations() == [], (mode, ui.our_deprecations())
        finally:
            ui.ctx.close()
    assert not problems, "\n".join(problems)
    for mode, shown in picked.items():   # once: the widget (with its socket), never a socket beside it
        assert shown["inputs"] == 1 and shown["paired"] and shown["widgets"] == [shown["picked"]], (mode, shown)
        assert shown["shown"] == (1 if mode == "vue" else None), (mode, shown)


def _open_example(ui: Page, f: Path, mode: str, readable: bool, shipped: list[str]) -> list[str]:
    """Loads one example as the template browser does; what is wrong with it in this mode."""
    problems = []
    wf = json.loads(f.read_text())
    if readable:
        named = sorted({v for n in wf["nodes"] for v in (n.get("widgets_values") or [])
                        if isinstance(v, str) and Path(v).suffix in (".png", ".jpg", ".wav", ".mp3", ".flac")})
        missing_inputs = [v for v in named if v not in shipped]
        if missing_inputs:
            problems.append(f"{f.name}: names input files nobody ships: {missing_inputs}")
    ui.missing.clear()
    # as the template browser opens a template (the saved view restored)
    ui.js(f"async ([wf, n]) => {{ await {APP}.loadGraphData(wf, true, true, n); }}", [wf, f.stem])
    ids = ui.js(f"""() => {APP}.graph.nodes.filter((n) => n.type.startsWith('SeedReuseEncode')
                   || n.type === 'SeedReuseSegmentLoopStart').map((n) => String(n.id))""")
    for nid in ids:
        ui.wait(f"() => {{ const t = window.__seedreuse.badge('{nid}') || ''; "
                "return t !== '' && !t.startsWith('checking'); }", None, 30, f"{f.name}: badge of {nid}")
    starts = ui.js(f"() => {APP}.graph.nodes.filter((n) => n.type === 'SeedReuseSegmentLoopStart').map((n) => String(n.id))")
    for nid in starts:   # the timeline has its segments (the node's height with them)
        ui.wait("(id) => { const t = window.__seedreuse.timeline(id); return !!t && t.S > 0; }", nid, 30,
                f"{f.name}: the timeline of {nid}")
    ui.page.wait_for_timeout(600)
    boxes = ui.js(NODE_BOXES)
    if mode == "vue" and not all(b["dom"] for b in boxes):
        problems.append(f"{f.name} ({mode}): nodes without a Vue element: {[b['id'] for b in boxes if not b['dom']]}")
    problems += [f"{f.name} ({mode}): nodes overlap: {o}" for o in _overlapping(boxes)]
    if not readable:
        return problems
    lay = ui.js(LAYOUT)
    if lay["scale"] < MIN_SCALE:
        problems.append(f"{f.name}: opens at {lay['scale']:.0%} zoom (< {MIN_SCALE:.0%})")
    notes = [b for b in lay["nodes"] if b["type"] in ("MarkdownNote", "Note")]
    if not notes or not all(_inside(b, *VIEWPORT, whole=True) for b in notes):
        problems.append(f"{f.name}: the note is not in view: {notes}")
    shown = [b for b in lay["nodes"] if b["type"] not in ("MarkdownNote", "Note") and _inside(b, *VIEWPORT, False)]
    if len(shown) < 3:
        problems.append(f"{f.name}: only {len(shown)} nodes in view on {VIEWPORT}")
    for nid in starts:
        tl = ui.js("(id) => window.__seedreuse.timeline(id)", nid)
        label = ui.js("(id) => document.querySelector(`.seedreuse-timeline[data-seedreuse-node=\"${id}\"] "
                      ".seedreuse-timeline-label`)?.textContent || ''", nid)
        if not tl or not tl["S"] or len(tl["segments"]) != tl["S"] or "unavailable" in label:
            problems.append(f"{f.name}: no timeline before the first run: {tl} / {label!r}")
        box = ui.js(TIMELINE_BOX, nid)   # on the screen as the workflow opens, not under a panel
        if not (box and box["shown"] and _inside(box, *VIEWPORT, whole=True)
                and box["centre_is_timeline"] and box["segment_is_timeline"]):
            problems.append(f"{f.name}: the timeline of node {nid} is not in view on {VIEWPORT}: {box}")
    lost = [u for u in ui.missing if "/view" in u or "/api/view" in u]
    if lost:
        problems.append(f"{f.name}: input files answered 404: {lost}")
    return problems


def _pick_take(ui: Page) -> dict:
    """Clicks the first kept take of the segment example's timeline; how the Session shows from_take."""
    start = ui.js(f"() => String({APP}.graph.nodes.find((n) => n.type === 'SeedReuseSegmentLoopStart').id)")
    sess = ui.js(f"() => String({APP}.graph.nodes.find((n) => n.type === 'SeedReuseSession').id)")
    row = f'.seedreuse-timeline[data-seedreuse-node="{start}"] .seedreuse-take'
    ui.wait(f"() => document.querySelectorAll('{row}').length > 0", None, 30, "a kept take in the example's picker")
    take = ui.js(f"() => {{ const r = document.querySelector('{row}'); "
                 "return r.dataset.seedreuseLatest === 'true' ? 0 : +r.dataset.seedreuseTake; }")
    ui.page.locator(row).first.click()
    ui.wait(f"(id) => ({APP}.graph.getNodeById(+id).widgets || []).some((w) => w.name === 'from_take')", sess, 10,
            "the Session's from_take widget")
    ui.page.wait_for_timeout(400)
    return {**ui.js(FROM_TAKE_SHOWN, sess), "picked": take}


# The template browser's cards of one pack: test id, the title's text, the card's whole text and
# its thumbnail (loaded: naturalWidth).
CARDS = """() => [...document.querySelectorAll('[data-testid^="template-workflow-"]')].map((c) => {
  const img = c.querySelector('img');
  return { name: c.getAttribute('data-testid').slice('template-workflow-'.length),
    title: (c.querySelector('h3') || {}).textContent?.trim() || '', text: c.innerText,
    img: img ? img.naturalWidth : 0 };
})"""


def test_template_browser_lists_the_examples_by_title(frontend, browser, browser_artifacts, write_ui_settings):
    """The template browser as a user opens it (command Comfy.BrowseTemplates, the pack's entry
    under Extensions): one card per UI example, titled with its human title (the file name), never
    a snake_case id; on 1.32.9 the card's description is the same name with "-" and "_" read as
    spaces; every card's thumbnail <title>.jpg is fetched (200) and shown. Clicking the segment
    example's card opens it (the frontend fetches <title>.json) with its timeline in view at the
    saved >= 80 % view on both: 1.32.9 keeps a template's view, 1.49.6 and 1.58.1 fit it to the screen and
    the pack's view_restore.js puts the saved view back (only for the pack's own examples)."""
    name, version, worker = frontend
    write_ui_settings(worker, {"Comfy.VueNodes.Enabled": False})
    _copy_example_inputs(worker)
    titles = sorted(p.stem for p in EXAMPLES)
    ids = set(example_files.pairs())
    prefix = f"/api/workflow_templates/{host.PACK_LINK_NAME}/"
    ui = Page(browser, worker)
    thumbs: dict[str, int] = {}
    ui.page.on("response", lambda r: thumbs.__setitem__(unquote(r.url.split(prefix, 1)[1]), r.status)
               if prefix in r.url and r.url.endswith(".jpg") else None)
    ui.open()
    try:
        ui.js(f"() => {APP}.extensionManager.command.execute('Comfy.BrowseTemplates')")
        nav = ui.page.get_by_text(host.PACK_LINK_NAME, exact=True).first
        nav.wait_for(timeout=30_000)
        nav.click()
        ui.wait("(n) => document.querySelectorAll('[data-testid^=\"template-workflow-\"]').length === n",
                len(titles), 30, "one card per example")
        cards = ui.js(CARDS)
        assert sorted(c["name"] for c in cards) == titles, [c["name"] for c in cards]
        assert not ids & {c["name"] for c in cards}, "cards named by id"
        for c in cards:
            assert c["title"] == c["name"], c   # the card's title is the human title
            assert " " in c["title"] and "_" not in c["title"], c
            if traits(version)["description"]:   # 1.32.9 prints the description under the title
                want = c["name"].replace("-", " ").replace("_", " ")
                assert want in c["text"].split("\n"), (want, c["text"])
        for t in titles:   # thumbnails load as the cards scroll into view
            card = ui.page.locator(f'[data-testid="template-workflow-{t}"]')
            card.scroll_into_view_if_needed()
            ui.wait("(t) => { const i = document.querySelector(`[data-testid=\"template-workflow-${t}\"] img`); "
                    "return !!i && i.complete && i.naturalWidth > 0; }", t, 30, f"the thumbnail of {t!r}")
        assert {t: thumbs.get(f"{t}.jpg") for t in titles} == {t: 200 for t in titles}, thumbs
        ui.page.locator('[data-testid^="template-workflow-"]').first.scroll_into_view_if_needed()
        ui.wait("() => [...document.querySelectorAll('[data-testid^=\"template-workflow-\"]')].slice(0, 3)"
                ".every((c) => { const i = c.querySelector('img'); return !!i && i.complete && i.naturalWidth > 0; })",
                None, 30, "the first row's thumbnails shown again")
        ui.page.screenshot(path=str(browser_artifacts / f"templates-{name}-{version}.png"))

        # open the segment example from its card, as a user does
        seg = example_files.pairs()["wan21_i2v_segment_reuse"].stem
        ui.page.locator(f'[data-testid="template-workflow-{seg}"]').click()
        ui.wait(f"() => {APP}.graph.nodes.some((n) => n.type === 'SeedReuseSegmentLoopStart')", None, 30,
                "the segment example on the canvas")
        ui.wait("() => !document.querySelector('[data-testid^=\"template-workflow-\"]')", None, 30,
                "the template browser closed")
        nid = ui.js(f"() => String({APP}.graph.nodes.find((n) => n.type === 'SeedReuseSegmentLoopStart').id)")
        ui.wait("(id) => { const t = window.__seedreuse.timeline(id); return !!t && t.S > 0; }", nid, 30,
                "the timeline's segments")
        saved = json.loads((host.REPO_ROOT / "example_workflows" / f"{seg}.json").read_text())["extra"]["ds"]
        try:   # the load finishes after the nodes show; give the view time to settle (asserted below)
            ui.page.wait_for_function(f"(s) => Math.abs({APP}.canvas.ds.scale - s) < 1e-6", arg=saved["scale"],
                                      timeout=10_000)
        except Exception:
            pass
        ui.page.wait_for_timeout(400)
        box = ui.js(TIMELINE_BOX, nid)
        view = ui.js(f"() => ({{ scale: {APP}.canvas.ds.scale, offset: [...{APP}.canvas.ds.offset] }})")
        ui.page.screenshot(path=str(browser_artifacts / f"templates-{name}-{version}-opened-segment-example.png"))
        assert box and box["shown"] and _inside(box, *VIEWPORT, whole=True), box
        assert box["centre_is_timeline"] and box["segment_is_timeline"], box
        # both frontends show the saved, readable view: 1.32.9 restores a template's extra.ds itself;
        # 1.49.6 and 1.58.1 fit a template to the screen (loadGraphData with openSource "template" calls fitView)
        # and the pack's web/seedreuse/view_restore.js puts the saved view back for its own examples
        assert saved["scale"] >= MIN_SCALE and abs(view["scale"] - saved["scale"]) < 1e-6, (view, saved)
        assert all(abs(a - b) < 0.5 for a, b in zip(view["offset"], saved["offset"])), (view, saved)
        restores = ui.js("() => window.__seedreuse.work.viewRestores || 0")
        # 1.32.9 keeps the saved view itself: ours changed nothing
        assert (restores >= 1) if traits(version)["fits_templates"] else (restores == 0), restores
        assert ui.js("() => window.__seedreuse.errors") == []
        assert ui.our_console_errors() == [], ui.our_console_errors()
    finally:
        ui.ctx.close()
