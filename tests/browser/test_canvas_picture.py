"""The README's picture of the canvas (docs/images/canvas.png), made by this test each time it runs
on ComfyUI 0.33.0 (its frontend 1.49.6; the default CI run tests that host last). On another host
the test checks the same and saves its screenshot to test-artifacts/browser/ instead, so the
committed picture always shows one frontend.

A real Chromium shows one of the pack's shipped templates, the UI file
``example_workflows/Wan 2.1 text to video, reuse the text encoding.json`` exactly as the template
browser opens it, on a real worker. The page queues it twice as a user does (the template
randomizes the seed after each run): the badges say "encoded" after the first run and
"reused · saved ..." after the second, and the worker's counters prove it (the text encoder ran
twice in the first run, for the positive and the negative prompt, and never in the second).

The test worker has no full-size models: its models folder holds the tiny Wan 2.1 models under
the template's file names (so the canvas finds every model it names), and what leaves the page
for the worker is rewritten on the way (a Playwright route, not the page): ``POST /prompt`` and
the dry run's ``POST /seedreuse/check`` get the stand-in text encoder at 1.5 s per encode (the
benchmarks' cost; umT5-XXL has no tiny form), a small latent (32x32, 5 frames, 2 steps) and the
Session a cache of this run. The canvas keeps the template's own models, sizes and cache name; the
numbers in the badges are this test's (tiny models, stand-in encoder), not a real model's.
"""
from __future__ import annotations

import json
import os
import uuid

import pytest

from seedreuse_lab import host
from seedreuse_lab import tiny_models as tm
from ._canvas import APP, open_canvas

# where several hosts run, the picture's host only: on another host it would repeat what
# test_frontends.py's badge test checks on that host's frontend (encoded, then reused)
pytestmark = [pytest.mark.comfy, pytest.mark.browser, pytest.mark.one_host("0.33.0")]

TEMPLATE = host.REPO_ROOT / "example_workflows" / "Wan 2.1 text to video, reuse the text encoding.json"
PICTURE = host.REPO_ROOT / "docs" / "images" / "canvas.png"
PICTURE_HOST = "0.33.0"               # the host whose frontend the committed picture shows
VIEWPORT = (1400, 900)
ENCODERS = ("5", "6")                 # the template's Encode-or-Reuse nodes (positive, negative)
ENCODE_MS = 1500
# the template's model files -> the tiny model served under that name
TEMPLATE_MODELS = {("diffusion_models", "wan2.1_t2v_1.3B_fp16.safetensors"): tm.T2V,
                   ("text_encoders", "umt5_xxl_fp8_e4m3fn_scaled.safetensors"): tm.TEXT_ENCODER,
                   ("vae", "wan_2.1_vae.safetensors"): tm.VAE}
# The part of the graph the picture shows: from the note and the text encoders on the left to the
# sampler on the right (graph x -40..2000, y -600..640), below the frontend's bars, at a scale where
# node text and badges still read.
VIEW = {"scale": 0.64, "offset": [180.0, 735.0]}


def for_test_worker(prompt: dict, cache: str) -> dict:
    """The API prompt the page sends, pointed at what the test worker has (see the module doc)."""
    out = json.loads(json.dumps(prompt))
    for node in out.values():
        ct, ins = node.get("class_type"), node.get("inputs", {})
        if ct == "CLIPLoader":
            node.update(class_type="SeedReuseTestTextEncoderLoader",
                        inputs={"clip_name": tm.TEXT_ENCODER, "work_ms": 0})
        elif ct == "CLIPTextEncode":
            node.update(class_type="SeedReuseTestTextEncode",
                        inputs={"clip": ins["clip"], "text": ins["text"], "work_ms": ENCODE_MS})
        elif ct == "EmptyHunyuanLatentVideo":
            ins.update(width=32, height=32, length=5)
        elif ct == "KSampler":
            ins["steps"] = 2
        elif ct == "SeedReuseSession":
            ins["cache_name"] = cache
    return out


def _rewrite(cache: str):
    def handle(route):
        req = route.request
        body = json.loads(req.post_data or "null") if req.method == "POST" else None
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), dict):
            return route.continue_()
        body["prompt"] = for_test_worker(body["prompt"], cache)
        return route.continue_(post_data=json.dumps(body))
    return handle


def _wait(page, worker, fn: str, arg, what: str, timeout_s: float = 180):
    try:
        page.wait_for_function(fn, arg=arg, timeout=timeout_s * 1000)
    except Exception as e:
        state = page.evaluate("() => ({badges: window.__seedreuse.badgeDetails, errors: window.__seedreuse.errors, "
                              "lastError: window.__seedreuse.lastExecutionError})")
        raise AssertionError(f"waited {timeout_s:.0f} s for {what}: {json.dumps(state)[:3000]}\n"
                             f"{worker.log_tail(40)}") from e


def _badges_say(page, worker, prefix: str, what: str) -> None:
    """Every Encode-or-Reuse node's badge starts with ``prefix`` and its next run is predicted."""
    _wait(page, worker, """([ids, prefix]) => ids.every((id) => {
            const t = window.__seedreuse.badge(id) || '', d = window.__seedreuse.badgeDetails[id] || {};
            return t.startsWith(prefix) && d.next === 'will reuse';
        }) || !!window.__seedreuse.lastExecutionError""", [list(ENCODERS), prefix], what)
    assert page.evaluate("() => window.__seedreuse.lastExecutionError") is None, worker.log_tail(40)


def _save_picture(page, dest) -> int:
    """The viewport as the PNG ``dest`` (a temp name in the same folder, then renamed)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        data = page.screenshot(type="png")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return len(data)


@pytest.fixture(scope="module")
def picture_worker(module_workers, tiny_models, tmp_path_factory, write_ui_settings):
    models = tiny_models.link_models_dir(tmp_path_factory.mktemp("picture-models"))
    for (folder, name), tiny in TEMPLATE_MODELS.items():
        (models / folder / name).symlink_to(tiny_models.path(folder, tiny))
    w = module_workers.one(api_nodes=True, models_dir=models, name_prefix="picture")
    write_ui_settings(w, {"Comfy.Graph.CanvasInfo": False})     # no FPS / node-count overlay
    return w


def test_template_on_the_canvas_encodes_then_reuses(browser, picture_worker, browser_artifacts):
    ui_worker = picture_worker
    template = json.loads(TEMPLATE.read_text())
    ctx, page = open_canvas(browser, ui_worker, viewport=VIEWPORT)
    try:
        rewrite = _rewrite(f"picture-{uuid.uuid4().hex[:8]}")    # one cache for the runs and the dry run
        page.route("**/prompt", rewrite)
        page.route("**/seedreuse/check", rewrite)
        page.evaluate(f"async ([wf, name]) => {{ await {APP}.loadGraphData(wf, true, true, name); }}",
                      [template, TEMPLATE.stem])
        ui_worker.reset_counts()
        page.evaluate(f"() => {APP}.queuePrompt(0, 1)")
        _badges_say(page, ui_worker, "encoded", "the first run's badges (encoded, next: will reuse)")
        assert ui_worker.counts()["text_encode"] == 2, ui_worker.counts()

        seed = page.evaluate(f"() => {APP}.graph.getNodeById(10).widgets.find((w) => w.name === 'seed').value")
        sampler = next(n for n in template["nodes"] if n["id"] == 10)
        assert seed != sampler["widgets_values"][0], "the template randomizes the seed after a run"
        page.evaluate(f"() => {APP}.queuePrompt(0, 1)")
        _badges_say(page, ui_worker, "reused", "the second run's badges (reused, next: will reuse)")
        assert ui_worker.counts()["text_encode"] == 2, "the text encoder ran although the badges say reused"
        assert all("saved" in page.evaluate("(id) => window.__seedreuse.badge(id)", nid) for nid in ENCODERS)

        page.evaluate(f"""(v) => {{ const c = {APP}.canvas;
            c.ds.scale = v.scale; c.ds.offset[0] = v.offset[0]; c.ds.offset[1] = v.offset[1];
            c.setDirty(true, true); }}""", VIEW)
        try:      # the host's "job completed" toasts fade on their own (a picture without them)
            page.wait_for_function("() => !document.querySelector('.p-toast-message')", timeout=15_000)
        except Exception:
            pass
        page.wait_for_timeout(500)
        dest = PICTURE if host.comfyui_version() == PICTURE_HOST else browser_artifacts / "canvas.png"
        size = _save_picture(page, dest)
        assert size < 400_000, f"{dest} is {size} bytes: keep the README's picture small"
    finally:
        ctx.close()
