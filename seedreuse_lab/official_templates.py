"""ComfyUI's official templates (PyPI comfyui-workflow-templates-json) on the test hosts: what
the template tests, the automatic-mode tests and the benchmarks share.

``load_template(name)`` reads a template's UI file; ``for_test_host(api, TEMPLATES[name], seed=,
prefix=)`` points its API form at the tiny generated models and the stand-in encoders, shrinks
sizes and steps and sets the seed; ``templates_models_dir`` lays out the models folder they need.
"""
from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
from pathlib import Path

from . import family_models as fm
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
    # two chained InfiniteTalk subgraphs (the second continues from the first's frames)
    "video_wan2_1_infinitetalk": dict(unet=lambda n: tm.I2V, vae=tm.VAE, text="wan", talk=True),
}
# Widget layouts of the newer host's classes the converter meets before the stand-ins replace them
NEWER_LAYOUTS = {"WanInfiniteTalkToVideo": ["mode", "width", "height", "length", "motion_frame_count", "audio_scale"],
                 "ModelPatchLoader": ["name"], "AudioEncoderLoader": ["audio_encoder_name"],
                 "AudioEncoderEncode": [], "LoadAudio": ["audio", None, None], "AudioConcat": ["direction"]}
ENCODER_COUNTERS = ("text_loader", "text_encode", "clip_vision_loader", "clip_vision_encode", "audio_loader",
                    "audio_encode")


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
    """The tiny models plus the family models, and the LoRA placeholder, under ``dest``."""
    d = fm.models_dir_with_families(tiny_models, fm.ensure_family_models(), dest)
    _pin(d)
    (d / "loras").mkdir(exist_ok=True)
    (d / "loras" / PLACEHOLDER).write_bytes(b"\0" * 16)   # validated (switched-off LoRA branches), never loaded
    return d


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


def _for_infinitetalk(p: dict) -> None:
    """The InfiniteTalk template on the 0.3.75 host: stand-ins for the newer and the full-size
    nodes, no LoRA (a placeholder cannot load), the output video without its audio track."""
    _bypass(p, "LoraLoaderModelOnly", "model")
    _bypass(p, "AudioConcat", "nothing")
    for n in p.values():
        ct, ins = n["class_type"], n["inputs"]
        if ct == "WanInfiniteTalkToVideo":
            n["class_type"] = "SeedReuseTestInfiniteTalkToVideo"
            for k in [k for k in ins if k.startswith("mode.")]:
                ins[k.split(".", 1)[1]] = ins.pop(k)
            ins["motion_frame_count"] = 1
        elif ct == "ModelPatchLoader":
            n.update(class_type="SeedReuseTestModelPatchLoader", inputs={"name": fm.INFINITETALK_PATCH})
        elif ct == "AudioEncoderLoader":
            n.update(class_type="SeedReuseTestAudioEncoderLoader",
                     inputs={"audio_encoder_name": tm.AUDIO_ENCODER, "work_ms": 0})
        elif ct == "AudioEncoderEncode":
            n.update(class_type="SeedReuseTestAudioEncode", inputs={**ins, "work_ms": 0})
        elif ct == "LoadAudio":
            n.update(class_type="SeedReuseTestSineAudio",
                     inputs={"seconds": 1.0, "sample_rate": 16000, "frequency": 220.0 if "woman" in str(ins["audio"]) else 330.0})
        elif ct == "BasicScheduler":
            ins["steps"] = 2


def for_test_host(api: dict, spec: dict, *, seed: int, prefix: str) -> dict:
    """Tiny models, stand-in encoders, tiny sizes and steps, the given seed everywhere."""
    p = json.loads(json.dumps(api))
    if spec.get("talk"):
        _for_infinitetalk(p)
    qwen = spec["text"] == "qwen"
    for n in p.values():
        ct, ins = n["class_type"], n["inputs"]
        if ct == "UNETLoader":
            ins["unet_name"] = spec["unet"](ins["unet_name"])
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
        for k, v in (("width", 32), ("height", 32), ("length", 5)):
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


def output_digest(worker, res) -> str:
    files = res.output_files()
    assert files, f"no output files: {res.outputs}"
    path = worker.output_path(files[0])
    if path.suffix == ".png":
        from PIL import Image
        import numpy as np
        data = np.asarray(Image.open(path)).tobytes()
    else:
        from reuse_backend.media import video
        data = video.decode_frames(str(path)).tobytes()
    return hashlib.sha256(data).hexdigest()


