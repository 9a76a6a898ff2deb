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

import hashlib
import importlib.resources
import json
from pathlib import Path

import pytest

from reuse_backend.workflow import instrument
from reuse_backend.workflow.ui_to_api import convert
from seedreuse_lab import encoder_models as em
from seedreuse_lab import family_models as fm
from seedreuse_lab import graphs, host
from seedreuse_lab import infinitetalk_models as im
from seedreuse_lab import tiny_models as tm

pytestmark = pytest.mark.comfy

IMAGE = "template_ref.png"
PLACEHOLDER = "placeholder.safetensors"
SAMPLERS = {"KSampler", "KSamplerAdvanced", "SamplerCustom", "SamplerCustomAdvanced"}


def _wan22_unet(name: str) -> str:
    return fm.WAN22_LOW if "low" in name.lower() else fm.WAN22_HIGH


# template -> how it meets the test host: unet(name) -> tiny file, vae, text encoder family
TEMPLATES = {
    "text_to_video_wan": dict(unet=lambda n: tm.T2V, vae=tm.VAE, text="wan"),
    "image_to_video_wan": dict(unet=lambda n: tm.I2V, vae=tm.VAE, text="wan"),
    "video_wan2_2_14B_t2v": dict(unet=_wan22_unet, vae=tm.VAE, text="wan"),
    # the A14B I2V experts are the Wan 2.1 I2V architecture (in_dim 36): the tiny Wan 2.1 I2V model for both
    "video_wan2_2_14B_i2v": dict(unet=lambda n: tm.I2V, vae=tm.VAE, text="wan"),
    "video_wan2_2_5B_ti2v": dict(unet=lambda n: fm.WAN22_TI2V, vae=fm.WAN22_VAE, text="wan"),
    "image_qwen_image": dict(unet=lambda n: fm.QWEN_IMAGE, vae=fm.QWEN_IMAGE_VAE, text="qwen"),
    "image_qwen_image_edit": dict(unet=lambda n: fm.QWEN_IMAGE, vae=fm.QWEN_IMAGE_VAE, text="qwen"),
    # two chained InfiniteTalk subgraphs (the second continues from the first's frames); the stock
    # node needs the I2V whose width its tiny patch was made for
    "video_wan2_1_infinitetalk": dict(unet=lambda n: tm.I2V, vae=tm.VAE, text="wan", talk=True,
                                      stock_unet=im.I2V_TALK),
}
# Widget layouts of the newer host's classes the converter meets before the stand-ins replace them
NEWER_LAYOUTS = {"WanInfiniteTalkToVideo": ["mode", "width", "height", "length", "motion_frame_count", "audio_scale"],
                 "ModelPatchLoader": ["name"], "AudioEncoderLoader": ["audio_encoder_name"],
                 "AudioEncoderEncode": [], "LoadAudio": ["audio", None, None], "AudioConcat": ["direction"]}
# The InfiniteTalk template's Painter values are the 5-widget layout mask, width, height, bg_color,
# brush_color (the 0.3.75 stand-in's schema). 0.33's stock Painter has no brush_color and marks
# width/height hidden (no widget in the host's layout): the values map by that older layout there.
STOCK_PAINTER_LAYOUT = ["mask", "width", "height", "bg_color", None]
ENCODER_COUNTERS = ("text_loader", "text_encode", "clip_vision_loader", "clip_vision_encode", "audio_loader",
                    "audio_encode")


def load_template(name: str) -> dict:
    ref = importlib.resources.files("comfyui_workflow_templates_json") / "templates" / f"{name}.json"
    return json.loads(ref.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def templates_models(tiny_models, tmp_path_factory) -> Path:
    d = fm.models_dir_with_families(tiny_models, fm.ensure_family_models(), tmp_path_factory.mktemp("tpl-models"))
    if host.has_stock_infinitetalk():      # the stock InfiniteTalk nodes: tiny patch + I2V, real wav2vec2 base
        im.link_if_host_has_them(d)
        em.link_encoders(em.ensure_encoder_models(), d)
    (d / "loras").mkdir(exist_ok=True)
    (d / "loras" / PLACEHOLDER).write_bytes(b"\0" * 16)   # validated (switched-off LoRA branches), never loaded
    return d


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
    """The worker registers WanInfiniteTalkToVideo (then the template runs it); a host whose source
    has it must register it (its tiny patch was generated for it)."""
    registered = "WanInfiniteTalkToVideo" in object_info
    assert registered == host.has_stock_infinitetalk(), (registered, host.has_stock_infinitetalk())
    return registered


def layouts(object_info: dict) -> dict:
    """NEWER_LAYOUTS, plus the template's Painter layout where the host's Painter lacks brush_color."""
    painter = (object_info.get("Painter") or {}).get("input") or {}
    names = {**(painter.get("required") or {}), **(painter.get("optional") or {})}
    return {**NEWER_LAYOUTS, **({} if "brush_color" in names else {"Painter": STOCK_PAINTER_LAYOUT})}


def _is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)


def _bypass(p: dict, class_type: str, through: str) -> None:
    """Remove every ``class_type`` node, its consumers reading its ``through`` input instead."""
    for nid in [k for k, n in p.items() if n["class_type"] == class_type]:
        src = p.pop(nid)["inputs"].get(through)
        for n in p.values():
            for k, v in list(n["inputs"].items()):
                if _is_link(v) and v[0] == nid:
                    if src is None:
                        del n["inputs"][k]
                    else:
                        n["inputs"][k] = src


def _for_infinitetalk(p: dict, stock: bool) -> None:
    """The InfiniteTalk template on the test host: no LoRA (a placeholder cannot load), sine
    speech. With ``stock`` (the host has WanInfiniteTalkToVideo) the stock node, ModelPatchLoader
    (tiny patch), audio encoder (wav2vec2 base) and AudioConcat run; else the stand-ins for the
    newer and the full-size nodes, and the output video has no audio track (no AudioConcat)."""
    _bypass(p, "LoraLoaderModelOnly", "model")
    if not stock:
        _bypass(p, "AudioConcat", "nothing")
    for n in p.values():
        ct, ins = n["class_type"], n["inputs"]
        if ct == "WanInfiniteTalkToVideo":
            ins["motion_frame_count"] = 1
            if not stock:
                n["class_type"] = "SeedReuseTestInfiniteTalkToVideo"
                for k in [k for k in ins if k.startswith("mode.")]:
                    ins[k.split(".", 1)[1]] = ins.pop(k)
        elif ct == "ModelPatchLoader":
            n.update(inputs={"name": im.PATCH}) if stock else \
                n.update(class_type="SeedReuseTestModelPatchLoader", inputs={"name": fm.INFINITETALK_PATCH})
        elif ct == "AudioEncoderLoader":
            n.update(inputs={"audio_encoder_name": em.WAV2VEC2_BASE}) if stock else \
                n.update(class_type="SeedReuseTestAudioEncoderLoader",
                         inputs={"audio_encoder_name": tm.AUDIO_ENCODER, "work_ms": 0})
        elif ct == "AudioEncoderEncode" and not stock:
            n.update(class_type="SeedReuseTestAudioEncode", inputs={**ins, "work_ms": 0})
        elif ct == "LoadAudio":
            n.update(class_type="SeedReuseTestSineAudio",
                     inputs={"seconds": 1.0, "sample_rate": 16000, "frequency": 220.0 if "woman" in str(ins["audio"]) else 330.0})
        elif ct == "BasicScheduler":
            ins["steps"] = 2


def for_test_host(api: dict, spec: dict, *, seed: int, prefix: str, stock_talk: bool = False) -> dict:
    """Tiny models, stand-in encoders, tiny sizes and steps, the given seed everywhere;
    ``stock_talk``: the InfiniteTalk nodes stay stock (the host has them)."""
    p = json.loads(json.dumps(api))
    stock_talk = stock_talk and bool(spec.get("talk"))
    if spec.get("talk"):
        _for_infinitetalk(p, stock_talk)
    qwen = spec["text"] == "qwen"
    for n in p.values():
        ct, ins = n["class_type"], n["inputs"]
        if ct == "UNETLoader":
            ins["unet_name"] = spec["stock_unet"] if stock_talk else spec["unet"](ins["unet_name"])
        elif ct == "VAELoader":
            ins["vae_name"] = spec["vae"]
        elif ct == "CLIPLoader":
            n.update(class_type="SeedReuseTestQwenTextEncoderLoader" if qwen else "SeedReuseTestTextEncoderLoader",
                     inputs={"clip_name": fm.QWEN_TEXT_ENCODER if qwen else tm.TEXT_ENCODER, "work_ms": 0})
        elif ct == "CLIPTextEncode":
            n.update(class_type="SeedReuseTestQwenTextEncode" if qwen else "SeedReuseTestTextEncode",
                     inputs={"clip": ins["clip"], "text": ins["text"], "work_ms": 0})
        elif ct == "TextEncodeQwenImageEdit":
            n.update(class_type="SeedReuseTestTextEncodeQwenImageEdit",
                     inputs={**{k: ins[k] for k in ("clip", "prompt", "vae", "image") if k in ins},
                             "total_pixels": 32 * 32, "work_ms": 0})
        elif ct == "CLIPVisionLoader":
            n.update(class_type="SeedReuseTestClipVisionLoader", inputs={"clip_name": tm.CLIP_VISION, "work_ms": 0})
        elif ct == "CLIPVisionEncode":
            n.update(class_type="SeedReuseTestClipVisionEncode",
                     inputs={"clip_vision": ins["clip_vision"], "image": ins["image"],
                             "crop": ins.get("crop", "none"), "work_ms": 0})
        elif ct == "LoadImage":
            ins["image"] = IMAGE
        elif ct == "LoraLoaderModelOnly":
            ins["lora_name"] = PLACEHOLDER
        elif ct == "ImageScaleToTotalPixels":
            ins["megapixels"] = 0.01
        elif ct in ("SaveVideo", "SaveImage"):
            ins["filename_prefix"] = prefix
        ins = n["inputs"]
        small = 64 if n["class_type"] == "Painter" else 32      # 0.33's Painter: at least 64
        for k, v in (("width", small), ("height", small), ("length", 5)):
            if k in ins:
                ins[k] = v
        for k in ("seed", "noise_seed"):
            if k in ins:
                ins[k] = seed
        if n["class_type"] in ("KSampler", "KSamplerAdvanced"):
            ins["steps"] = 2
        if n["class_type"] == "KSamplerAdvanced":     # two experts: high noise [0, 1), low noise [1, 2)
            high = ins.get("add_noise") == "enable"
            ins.update(start_at_step=0 if high else 1, end_at_step=1 if high else 10000)
    return p


def output_digest(worker, res, prompt: dict) -> str:
    """sha256 of the decoded pixels of every file the prompt's SaveVideo / SaveImage nodes wrote
    (not of preview images: 0.33's Painter previews its blank canvas, the same on every seed)."""
    saves = sorted(k for k, n in prompt.items() if n["class_type"] in ("SaveVideo", "SaveImage"))
    files = [f for k in saves for f in res.output_files(k)]
    assert files, f"no output files: {res.outputs}"
    h = hashlib.sha256()
    for f in files:
        path = worker.output_path(f)
        if path.suffix == ".png":
            from PIL import Image
            import numpy as np
            h.update(np.asarray(Image.open(path)).tobytes())
        else:
            from reuse_backend.media import video
            h.update(video.decode_frames(str(path)).tobytes())
    return h.hexdigest()


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
    c = b.counts()
    ran = {k: c.get(k, 0) for k in ENCODER_COUNTERS}
    assert not any(ran.values()), f"an encoder or loader ran on the second worker: {ran}"
    assert not set(wrapped.values()) & set(rb.executed), (wrapped, rb.executed)
    loaders = {k for k, n in pb.items()
               if n["class_type"].endswith(("TextEncoderLoader", "ClipVisionLoader", "AudioEncoderLoader"))}
    assert loaders and not loaders & set(rb.executed)
    samplers = {k for k, n in pb.items() if n["class_type"] in SAMPLERS}
    assert samplers and samplers <= set(rb.executed)
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
