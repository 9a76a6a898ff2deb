"""ComfyUI's official templates (PyPI comfyui-workflow-templates-json) on the test hosts: what
the template tests, the automatic-mode tests and the benchmarks share.

``load_template(name)`` reads a template's UI file; ``for_test_host(api, TEMPLATES[name], seed=,
prefix=, stock_talk=)`` points its API form at the tiny generated models and the stand-in
encoders, shrinks sizes and steps and sets the seed; ``templates_models_dir`` lays out the models
folder they need; ``layouts(object_info)`` the widget layouts the converter needs beyond the host's.
The InfiniteTalk template runs its stock nodes where the host has them (``stock_talk``: ComfyUI
0.33), else the family stand-ins.
"""
from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
from pathlib import Path

from . import encoder_models as em
from . import family_models as fm
from . import host
from . import infinitetalk_models as im
from . import tiny_models as tm

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
ENCODER_LOADERS = ("TextEncoderLoader", "ClipVisionLoader", "AudioEncoderLoader")   # class name endings


def load_template(name: str) -> dict:
    ref = importlib.resources.files("comfyui_workflow_templates_json") / "templates" / f"{name}.json"
    return json.loads(ref.read_text(encoding="utf-8"))


def _pin(d: Path) -> None:
    """Each model symlink becomes a hard link of its file (same filesystem; else it stays a
    link): a run on another host version cleaning up its generator's older outputs in the
    shared model cache then cannot take a model away from workers that are running."""
    for link in d.rglob("*"):
        if not link.is_symlink() or not link.is_file():
            continue
        target = link.resolve()
        tmp = link.with_name(link.name + ".pin")
        try:
            os.link(target, tmp)
        except OSError:
            continue
        os.replace(tmp, link)


def templates_models_dir(tiny_models, dest: Path) -> Path:
    """The tiny models plus the family models (and, where the host has the stock InfiniteTalk
    nodes, the tiny patch with its I2V and the real wav2vec2 base), and the LoRA placeholder,
    under ``dest``."""
    d = fm.models_dir_with_families(tiny_models, fm.ensure_family_models(), dest)
    if host.has_stock_infinitetalk():
        im.link_if_host_has_them(d)
        em.link_encoders(em.ensure_encoder_models(), d)
    _pin(d)
    (d / "loras").mkdir(exist_ok=True)
    (d / "loras" / PLACEHOLDER).write_bytes(b"\0" * 16)   # validated (switched-off LoRA branches), never loaded
    return d


def stock_talk_on(object_info: dict) -> bool:
    """True when the worker registers WanInfiniteTalkToVideo (the InfiniteTalk template then runs
    its stock nodes); a host whose source has it must register it (its tiny patch was made for it)."""
    registered = "WanInfiniteTalkToVideo" in object_info
    if registered != host.has_stock_infinitetalk():
        raise AssertionError(f"the worker registers WanInfiniteTalkToVideo: {registered}; the host's source "
                             f"has it: {host.has_stock_infinitetalk()}")
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


def encoder_work(prompt: dict, res, counts: dict, wrapped: dict) -> dict:
    """What of the encoder side ran in ``res`` (a run of ``prompt`` that should have reused every
    wrapped output; ``counts``: the worker's stand-in counters since before it; ``wrapped``: slot
    -> producer node id): every value is empty/False when no wrapped encoder, no encoder loader
    and no stand-in encoder ran, and every sampler did (the prompt has loaders and samplers)."""
    ran = set(res.executed)
    loaders = {k for k, n in prompt.items() if n["class_type"].endswith(ENCODER_LOADERS)}
    samplers = {k for k, n in prompt.items() if n["class_type"] in SAMPLERS}
    return {"stand-in counters": {k: counts[k] for k in ENCODER_COUNTERS if counts.get(k)},
            "wrapped producers that ran": sorted(set(wrapped.values()) & ran),
            "encoder loaders that ran": sorted(loaders & ran), "samplers that did not run": sorted(samplers - ran),
            "prompt has no encoder loader": not loaders, "prompt has no sampler": not samplers}


def output_files(res, prompt: dict) -> list:
    """The files the prompt's SaveVideo / SaveImage nodes wrote (not preview images: 0.33's
    Painter previews its blank canvas, the same on every seed)."""
    saves = sorted(k for k, n in prompt.items() if n["class_type"] in ("SaveVideo", "SaveImage"))
    files = [f for k in saves for f in res.output_files(k)]
    assert files, f"no output files: {res.outputs}"
    return files


def decoded_outputs(worker, res, prompt: dict) -> list:
    """The decoded pixels (numpy arrays) of every file the prompt's SaveVideo / SaveImage nodes
    wrote (output_files), in order."""
    out = []
    for f in output_files(res, prompt):
        path = worker.output_path(f)
        if path.suffix == ".png":
            from PIL import Image
            import numpy as np
            out.append(np.asarray(Image.open(path)))
        else:
            from reuse_backend.media import video
            out.append(video.decode_frames(str(path)))
    return out


def output_digest(worker, res, prompt: dict) -> str:
    """sha256 of decoded_outputs."""
    h = hashlib.sha256()
    for a in decoded_outputs(worker, res, prompt):
        h.update(a.tobytes())
    return h.hexdigest()
