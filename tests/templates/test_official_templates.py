"""The official ComfyUI templates (PyPI comfyui-workflow-templates-json), made reusable by the
instrumenter and run on two real workers.

Per template: instrument the UI file (subgraphs included), convert it to API format as the
frontend does (reuse_backend/workflow/ui_to_api.py with the worker's /object_info), point the
model names at the tiny generated models and the encoders that cannot be tiny at the stand-ins,
shrink sizes and steps; then worker A runs it (every slot encoded) and worker B, a fresh process
sharing the cache root, runs it with a new seed: no encoder and no encoder loader executes there,
the samplers do, and the output differs. Nodes newer than the 0.3.75 host (ComfySwitchNode,
ComfyMathExpression) come from seedreuse_lab/stand_in_nodes/newer_nodes.py.

The InfiniteTalk template (two speakers, two chained subgraphs) runs its STOCK
WanInfiniteTalkToVideo, ModelPatchLoader (the tiny MultiTalk patch of infinitetalk_models.py),
AudioEncoderLoader / AudioEncoderEncode (full-size random-weight wav2vec2 base) and AudioConcat
where the worker registers the node (ComfyUI 0.33); elsewhere (0.3.75) the family stand-ins.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from reuse_backend.workflow import instrument
from reuse_backend.workflow.ui_to_api import convert
from seedreuse_lab import graphs
from seedreuse_lab.official_templates import (TEMPLATES, IMAGE, encoder_work, for_test_host, layouts,
                                              load_template, output_digest, stock_talk_on, templates_models_dir)

pytestmark = pytest.mark.comfy


@pytest.fixture(scope="module")
def templates_models(tiny_models, tmp_path_factory) -> Path:
    return templates_models_dir(tiny_models, tmp_path_factory.mktemp("tpl-models"))


@pytest.fixture(scope="module")
def pair(module_workers, templates_models):
    a, b = module_workers(2, models_dir=templates_models)
    for w in (a, b):
        graphs.write_test_image(w.input_dir / IMAGE, 64, 64, seed=7)
    return a, b, module_workers.cache_root


@pytest.fixture(scope="module")
def object_info(pair) -> dict:
    return pair[0].object_info()


@pytest.fixture(scope="module")
def stock_talk(object_info) -> bool:
    return stock_talk_on(object_info)


def slot_events(res) -> dict:
    return {e["data"]["slot"]: e["data"] for e in res.events_of("seedreuse.slot")}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_made_reusable_runs_on_two_workers(name, pair, object_info, stock_talk):
    a, b, root = pair
    ui = load_template(name)
    new_ui, report = instrument(ui, name_hint=name)
    assert report["changed"] and report["wrapped"], report
    again, report2 = instrument(new_ui, name_hint=name)
    assert again == new_ui and not report2["changed"]
    api, problems = convert(new_ui, object_info, overrides=layouts(object_info))
    assert not [x for x in problems if "not a class of this host" in x], problems
    spec = TEMPLATES[name]
    wrapped = {w["slot"]: w["producer"]["node"] for w in report["wrapped"]}
    for w in (a, b):
        w.reset_counts()
    pa = for_test_host(api, spec, seed=1, prefix=f"tpl_{name}_a", stock_talk=stock_talk)
    ra = a.run(pa, timeout=600).raise_for_status()
    ev = slot_events(ra)
    assert set(ev) == set(wrapped) and all(e["action"] == "encoded" for e in ev.values()), ev
    assert a.counts()["text_encode"] >= 1
    manifest = json.loads((root / report["cache_name"] / "manifest.json").read_text())
    assert set(manifest["slots"]) == set(wrapped)

    if spec.get("talk"):     # both chained subgraphs' WanInfiniteTalkToVideo (stock or stand-in) ran on A
        talks = {k for k, n in pa.items() if n["class_type"].endswith("InfiniteTalkToVideo")}
        assert len(talks) == 2 and talks <= set(ra.executed), (talks, ra.executed)
        assert {pa[k]["class_type"] for k in talks} == {
            "WanInfiniteTalkToVideo" if stock_talk else "SeedReuseTestInfiniteTalkToVideo"}
    pb = for_test_host(api, spec, seed=2, prefix=f"tpl_{name}_b", stock_talk=stock_talk)
    rb = b.run(pb, timeout=600).raise_for_status()
    ev = slot_events(rb)
    assert all(e["action"] == "reused" for e in ev.values()) and set(ev) == set(wrapped), ev
    work = encoder_work(pb, rb, b.counts(), wrapped)
    assert not any(work.values()), f"the second worker did encoder work, or did not sample: {work}"
    assert output_digest(a, ra, pa) != output_digest(b, rb, pb)
    for w in (a, b):
        w.free()


def _post(worker, body: bytes, path: str = "/seedreuse/instrument"):
    import urllib.error
    import urllib.request
    req = urllib.request.Request(worker.url + path, data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_route_instruments_like_the_library_and_refuses_as_data(pair):
    a = pair[0]
    ui = load_template("image_qwen_image_edit")
    status, body = _post(a, json.dumps({"workflow": ui, "name": "image_qwen_image_edit.json"}).encode())
    assert status == 200, body
    lib, lib_report = instrument(ui, name_hint="image_qwen_image_edit.json")
    assert body["workflow"] == lib and body["report"]["wrapped"] == lib_report["wrapped"]
    assert body["report"]["cache_name"] == "image_qwen_image_edit"
    status, again = _post(a, json.dumps({"workflow": body["workflow"]}).encode())
    assert status == 200 and not again["report"]["changed"] and again["workflow"] == body["workflow"]
    # API format, with the host's node classes for the types
    api = {"1": {"class_type": "CLIPLoader", "inputs": {"clip_name": "x", "type": "wan"}},
           "2": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["1", 0], "text": "a"}},
           "3": {"class_type": "KSampler", "inputs": {"positive": ["2", 0], "negative": ["4", 0], "seed": 1}},
           "4": {"class_type": "ConditioningAverage",    # not in the built-in table: typed by the host
                 "inputs": {"conditioning_to": ["2", 0], "conditioning_from": ["2", 0], "conditioning_to_strength": 1}}}
    status, body = _post(a, json.dumps({"workflow": api}).encode())
    assert status == 200 and [w["slot"] for w in body["report"]["wrapped"]] == ["positive", "negative"], body
    assert body["report"]["wrapped"][1]["producer"]["class_type"] == "ConditioningAverage"
    for raw, code in ((b"{", 400), (b'{"workflow": 3}', 400), (b'{"nothing": 1}', 400),
                      (b"[" * 5000 + b"]" * 5000, 413), (b" " * ((16 << 20) + 1), 413)):
        status, body = _post(a, raw)
        assert status == code, (raw[:20], status, body)
        err = body["error"]
        assert err["message"] and err["fix"] and "expected" in err and "actual" in err
