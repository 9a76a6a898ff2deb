"""Automatic mode on the canvas, in a real Chromium against a real worker started with
SEEDREUSE_AUTO=1 (the host's own frontend): a plain workflow (no SeedReuse node) is loaded and
queued from the page as a user would; the server makes it reusable on arrival, and when it has
finished the canvas shows what happened as a toast through the frontend's toast service
(``app.extensionManager.toast``): first every wrapped encoder output encoded, then, with a new
seed, every one reused with the time saved. The canvas graph is never changed."""
from __future__ import annotations

import uuid

import pytest

from reuse_backend.workflow.node_types import PACK_NODES
from seedreuse_lab import graphs
from seedreuse_lab.graphs import T2V
from ._canvas import APP, WIDGET_VALUE, open_canvas

pytestmark = [pytest.mark.comfy, pytest.mark.browser]

SUMMARY = "SeedReuse (automatic)"


@pytest.fixture(scope="module")
def auto_worker(module_workers, write_ui_settings):
    w = module_workers.one(api_nodes=True, env={"SEEDREUSE_AUTO": "1"}, name_prefix="autoui")
    write_ui_settings(w)
    return w


@pytest.fixture
def page(browser, auto_worker):
    ctx, p = open_canvas(browser, auto_worker)
    yield p
    ctx.close()


def _types(page) -> list:
    return sorted(n["type"] for n in page.evaluate(f"() => {APP}.graph.serialize()")["nodes"])


def _queue_and_wait_for_toast(page, worker) -> tuple[dict, dict]:
    """Queue the canvas graph as the Queue button does; (the toast, the report it shows) once the
    frontend's own toast (PrimeVue's .p-toast-message) shows it. Polled in the page itself, so a
    stalled page cannot miss a toast that is up (its life timer runs on the same thread)."""
    n = page.evaluate("() => window.__seedreuse.toasts.length")
    page.evaluate(f"() => {APP}.queuePrompt(0, 1)")
    shown = f"""(n) => !!window.__seedreuse.lastExecutionError
        || window.__seedreuse.toasts.slice(n).some((t) => t.summary.startsWith('{SUMMARY}')
           && [...document.querySelectorAll('.p-toast-message')].some((e) => e.textContent.includes(t.summary)))"""
    try:
        page.wait_for_function(shown, arg=n, timeout=300_000)
    except Exception as e:
        state = page.evaluate("() => ({toasts: window.__seedreuse.toasts, reports: window.__seedreuse.autoReports, "
                              "errors: window.__seedreuse.errors, lastError: window.__seedreuse.lastExecutionError})")
        raise AssertionError(f"no automatic-mode toast on the page: {state}\n{worker.log_tail(40)}") from e
    assert page.evaluate("() => window.__seedreuse.lastExecutionError") is None, worker.log_tail(40)
    toast = [t for t in page.evaluate("() => window.__seedreuse.toasts")[n:] if t["summary"].startswith(SUMMARY)]
    assert len(toast) == 1, toast
    report = page.evaluate("() => window.__seedreuse.autoReports[window.__seedreuse.autoReports.length - 1]")
    return toast[0], report


def test_a_plain_workflow_queued_from_the_canvas_reports_its_reuse_as_a_toast(page, auto_worker):
    text = f"a toast for automatic mode {uuid.uuid4().hex[:8]}"
    prompt = graphs.wan_t2v_graph(seed=5, prompt_text=text, filename_prefix="seedreuse_auto_toast/t2v")
    page.evaluate(f"async ([p, n]) => {{ await {APP}.loadApiJson(p, n); }}", [prompt, "auto_toast"])
    types = _types(page)
    assert types and not set(types) & PACK_NODES, types      # the stand-in encoders are not the pack's

    toast, report = _queue_and_wait_for_toast(page, auto_worker)
    assert report["applied"] and report["cache"].startswith("auto-") and report["outputs"], report
    assert all(o["action"] == "encoded" for o in report["outputs"]), report
    slots = [o["slot"] for o in report["outputs"]]
    assert toast["severity"] == "info" and f"encoded {len(slots)} of {len(slots)} encoder output" in toast["summary"]
    first = report["outputs"][0]
    assert f"{first['slot']} ({first['producer']} {first['node']}): encoded" in toast["detail"], toast
    assert f"cache {report['cache']}" in toast["detail"], toast
    assert _types(page) == types, "the canvas graph is never changed"

    # a new seed: the same encoder inputs, reused
    page.evaluate(f"""([id, v]) => {{
        const w = {APP}.graph.getNodeById(id).widgets.find((w) => w.name === "seed");
        w.value = v;
    }}""", [int(T2V.SAMPLER), 6])
    assert page.evaluate(WIDGET_VALUE, [int(T2V.SAMPLER), "seed"]) == 6
    toast2, report2 = _queue_and_wait_for_toast(page, auto_worker)
    assert report2["prompt_id"] != report["prompt_id"] and report2["cache"] == report["cache"], (report, report2)
    assert [o["slot"] for o in report2["outputs"]] == slots and all(
        o["action"] == "reused" for o in report2["outputs"]), report2
    assert toast2["severity"] == "success", toast2
    assert f"reused {len(slots)} of {len(slots)} encoder output" in toast2["summary"] and "saved" in toast2["summary"]
    assert f"{first['slot']} ({first['producer']} {first['node']}): reused · saved" in toast2["detail"], toast2
    assert _types(page) == types
    assert page.evaluate("() => window.__seedreuse.errors") == []
