"""The canvas menu entry "SeedReuse: make this workflow reusable" in a real Chromium against a real
worker (the host's frontend 1.32.9): an official template with subgraphs is loaded, the entry is
taken from the canvas menu the frontend builds and clicked; the graph that comes back holds the
Session and the Encode-or-Reuse nodes (inside the subgraph too) on free canvas (over no node),
replaces the graph in the same workflow (its tab and name, marked modified; no new "Unsaved
Workflow (2)"), the frontend's own graphToPrompt links every wrapper to the Session, the report is
shown, and a second click changes nothing."""
from __future__ import annotations

import importlib.resources
import json

import pytest

from ._canvas import APP, open_canvas

LABEL = "SeedReuse: make this workflow reusable"
TEMPLATE = "video_wan2_2_14B_t2v"

CLICK = f"""async (label) => {{
  const app = {APP};
  const items = app.canvas.getCanvasMenuOptions();
  const item = items.find((i) => i && i.content === label);
  if (!item) return {{ found: false, items: items.filter(Boolean).map((i) => i.content) }};
  window.__seedreuse.lastInstrument = null;
  await item.callback();
  return {{ found: true }};
}}"""


@pytest.fixture
def page(browser, ui_worker):
    ctx, p = open_canvas(browser, ui_worker)
    yield p
    ctx.close()


def _click(page) -> dict:
    got = page.evaluate(CLICK, LABEL)
    assert got["found"], f"no '{LABEL}' in the canvas menu: {got.get('items')}"
    page.wait_for_function("() => window.__seedreuse.lastInstrument !== null", timeout=60_000)
    return page.evaluate("() => window.__seedreuse.lastInstrument")


# The active workflow of the frontend's workflow store: its name, whether it is modified, and
# how many workflows are open (tabs).
WORKFLOW = f"""() => {{
  const store = {APP}.extensionManager.workflow, w = store.activeWorkflow;
  const undo = (w.changeTracker && w.changeTracker.undoQueue) || [];
  const last = undo.length ? undo[undo.length - 1] : null;
  return {{ filename: w.filename, path: w.path, modified: !!w.isModified, open: store.openWorkflows.length,
           temporary: !!w.isTemporary, undo: undo.length,
           undo_types: last ? (last.nodes || []).map((n) => n.type) : null }};
}}"""


def _box(n: dict) -> tuple:
    return (n["pos"][0], n["pos"][1] - 30, n["size"][0], n["size"][1] + 30)   # with the title bar


def _overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def _covered(graph: dict) -> list:
    """(added node, node it covers) pairs of one serialized graph: the pack's nodes over others."""
    nodes = graph["nodes"]
    return [(a["id"], a["type"], b["id"], b["type"]) for a in nodes if a["type"].startswith("SeedReuse")
            for b in nodes if b is not a and _overlap(_box(a), _box(b))]


def test_menu_entry_makes_a_subgraph_template_reusable(page):
    import comfyui_workflow_templates_json as pkg       # requirements-test.txt
    ui = json.loads((importlib.resources.files(pkg) / "templates" / f"{TEMPLATE}.json").read_text(encoding="utf-8"))
    page.evaluate(f"async ([wf, n]) => {{ await {APP}.loadGraphData(wf, true, true, n); }}", [ui, TEMPLATE])
    opened = page.evaluate(WORKFLOW)
    assert opened["filename"] == TEMPLATE and not opened["modified"], opened
    report = _click(page)
    assert report["changed"] and [w["slot"] for w in report["wrapped"]] == ["negative", "positive"], report
    # the result is an edit of the same workflow: its tab and name, marked modified, no new tab
    after = page.evaluate(WORKFLOW)
    assert (after["filename"], after["path"], after["open"]) == (opened["filename"], opened["path"], opened["open"]), \
        (opened, after)
    assert after["modified"], after
    # an undo goes back to the graph as it was (no SeedReuse node in it)
    assert after["undo"] > opened["undo"] and after["undo_types"], (opened, after)
    assert not any(t.startswith("SeedReuse") for t in after["undo_types"]), after
    graph = page.evaluate(f"() => {APP}.graph.serialize()")
    # the new nodes cover none of the workflow's nodes (nor each other), root and subgraph alike
    for g in [graph] + graph["definitions"]["subgraphs"]:
        assert not _covered(g), _covered(g)
    assert [n["type"] for n in graph["nodes"]].count("SeedReuseSession") == 1
    sub = graph["definitions"]["subgraphs"][0]
    assert sorted(n["type"] for n in sub["nodes"] if n["type"].startswith("SeedReuse")) == \
        ["SeedReuseEncodeConditioning", "SeedReuseEncodeConditioning"]
    assert any(i["name"] == "seedreuse_session" for i in sub["inputs"])
    # the frontend's own API conversion: every wrapper reads the Session, the samplers read the wrappers
    prompt = page.evaluate(f"async () => (await {APP}.graphToPrompt()).output")
    session = [k for k, n in prompt.items() if n["class_type"] == "SeedReuseSession"]
    wrappers = {k: n for k, n in prompt.items() if n["class_type"] == "SeedReuseEncodeConditioning"}
    assert len(session) == 1 and len(wrappers) == 2, sorted((k, n["class_type"]) for k, n in prompt.items())
    assert all(n["inputs"]["session"] == [session[0], 0] for n in wrappers.values()), wrappers
    samplers = [n for n in prompt.values() if n["class_type"] == "KSamplerAdvanced"]
    assert samplers and all(n["inputs"]["positive"][0] in wrappers and n["inputs"]["negative"][0] in wrappers
                            for n in samplers), samplers
    toast = [t for t in page.evaluate("() => window.__seedreuse.toasts") if "made reusable" in t["summary"]]
    assert toast and "wrapped positive (CONDITIONING) after CLIPTextEncode 128:89" in toast[-1]["detail"], toast
    again = _click(page)
    assert not again["changed"] and again["already_wrapped"] == ["negative", "positive"]
    assert page.evaluate(f"() => {APP}.graph.serialize()")["nodes"] == graph["nodes"]


TEMPLATES = ["text_to_video_wan", "image_to_video_wan", "video_wan2_2_14B_t2v", "video_wan2_2_14B_i2v",
             "video_wan2_2_5B_ti2v", "image_qwen_image", "image_qwen_image_edit"]


def test_converter_agrees_with_the_frontend_on_instrumented_templates(page, ui_worker):
    """reuse_backend/workflow/ui_to_api.py (what tests/templates runs) against the frontend's own
    graphToPrompt: the same node ids, classes and links for every instrumented template, and the
    same literal values wherever the host's widget layout fits the template's values."""
    from reuse_backend.workflow import instrument
    from reuse_backend.workflow.ui_to_api import convert
    import comfyui_workflow_templates_json as pkg       # requirements-test.txt
    info = ui_worker.object_info()
    for name in TEMPLATES:
        ui = json.loads((importlib.resources.files(pkg) / "templates" / f"{name}.json").read_text(encoding="utf-8"))
        new, _ = instrument(ui, name_hint=name)
        ours, problems = convert(new, info)
        page.evaluate(f"async (wf) => {{ await {APP}.loadGraphData(wf, true, true); }}", new)
        theirs = page.evaluate(f"async () => (await {APP}.graphToPrompt()).output")
        assert sorted(ours) == sorted(theirs), (name, sorted(set(ours) ^ set(theirs)))
        misfit = {p.split(" ", 1)[0] for p in problems}
        for k, n in ours.items():
            t = theirs[k]
            assert n["class_type"] == t["class_type"], (name, k)
            links = {a: v for a, v in n["inputs"].items() if isinstance(v, list)}
            assert links == {a: v for a, v in t["inputs"].items() if isinstance(v, list)}, (name, k)
            if k not in misfit:
                lits = {a: v for a, v in n["inputs"].items() if not isinstance(v, list)}
                assert lits == {a: v for a, v in t["inputs"].items() if not isinstance(v, list) and a in lits}, \
                    (name, k, lits, t["inputs"])
