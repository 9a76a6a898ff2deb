"""The video families' official templates (ComfyUI 0.33: LTX-2.3, MiniMax H3, HunyuanVideo 1.5),
made reusable by the pack's instrumenter and pointed at the tiny models and stand-ins.

``instrumented(name, object_info)`` loads the official template's UI file, runs the instrumenter
on it (with the worker's /object_info, as POST /seedreuse/instrument does) and converts it to API
format as the frontend does; ``for_test_host(api, seed=, prefix=, ...)`` then makes it run on a
CPU test worker: the stock loaders of what cannot be tiny become the stand-in loaders of
seedreuse_lab/stand_in_nodes/video_family_standins.py (every encode node stays stock), model names
point at seedreuse_lab/video_family_models.py, LoRAs are bypassed (placeholders cannot load),
sizes, lengths and steps shrink. ``wrappers(api)`` lists the Encode-or-Reuse nodes by slot.
"""
from __future__ import annotations

import json

from reuse_backend.workflow import instrument
from reuse_backend.workflow.ui_to_api import convert

from . import official_templates as ot
from . import video_family_models as vm

IMAGE = "video_ref.png"
LAST_IMAGE = "video_ref_last.png"      # a LoadImage titled "... Last Frame ..."
# how the LTX templates title their size primitives (lower case, prefix) -> the tiny value: 128 px
# (the upscale pass halves it first: a 2 x 2 latent at the LTX VAE's 32 px), 9 frames at 8 fps
LTX_PRIMITIVES = {"width": 128, "height": 128, "duration": 1, "frame rate": 8}


def instrumented(name: str, object_info: dict) -> tuple[dict, dict]:
    """(API prompt, instrumenter report) of the official template ``name``, made reusable."""
    ui = ot.load_template(name)
    new_ui, report = instrument(ui, name_hint=name, object_info=object_info)
    api, problems = convert(new_ui, object_info, overrides=ot.layouts(object_info))
    unknown = [p for p in problems if "not a class of this host" in p]
    if unknown:
        raise AssertionError(f"{name}: {unknown}")
    return api, report


def wrappers(api: dict) -> dict:
    """slot -> id of the Encode-or-Reuse node that carries it."""
    return {n["inputs"]["slot"]: k for k, n in api.items() if n["class_type"].startswith("SeedReuseEncode")}


def runs_on_a_hit(api: dict, output_classes: set) -> set:
    """The nodes a run that reuses every slot still executes: what the output nodes (of
    ``output_classes``) need, not walking into the wrappers' lazy ``value`` inputs."""
    run, stack = set(), [k for k, n in api.items() if n["class_type"] in output_classes]
    while stack:
        k = stack.pop()
        if k in run or k not in api:
            continue
        run.add(k)
        n = api[k]
        for name, v in n["inputs"].items():
            if _is_link(v) and not (n["class_type"].startswith("SeedReuseEncode") and name == "value"):
                stack.append(v[0])
    return run


def _is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int)


def _bypass(p: dict, nid: str, through: dict) -> None:
    """Remove node ``nid``; a consumer of its output i reads its input ``through[i]`` instead."""
    node = p.pop(nid)
    for n in p.values():
        for k, v in list(n["inputs"].items()):
            if _is_link(v) and v[0] == nid:
                n["inputs"][k] = node["inputs"][through[v[1]]]


def for_test_host(api: dict, *, seed: int, prefix: str, enhancer_seed: int | None = None,
                  enhance: bool | None = None, prompt: str | None = None) -> dict:
    """The instrumented template on the CPU test worker (see the module docstring); ``seed`` for
    every RandomNoise, ``enhancer_seed`` for TextGenerateLTX2Prompt's own seed, ``enhance`` for
    the template's "Enable Prompt Enhance" switch, ``prompt`` for the positive prompt (of
    MiniMaxH3ImageToVideo, or of a CLIPTextEncode titled "... Positive ...")."""
    p = json.loads(json.dumps(api))
    for nid in [k for k, n in p.items() if n["class_type"] == "LoraLoaderModelOnly"]:
        _bypass(p, nid, {0: "model"})
    for nid in [k for k, n in p.items() if n["class_type"] == "LoraLoader"]:
        _bypass(p, nid, {0: "model", 1: "clip"})
    for k, n in p.items():
        ct, ins, title = n["class_type"], n["inputs"], n.get("_meta", {}).get("title", "")
        if ct == "CheckpointLoaderSimple":
            ins["ckpt_name"] = vm.LTX2
        elif ct == "LTXVAudioVAELoader":
            ins["ckpt_name"] = vm.LTX2
        elif ct == "LTXAVTextEncoderLoader":
            n.update(class_type="SeedReuseTestLTXAVTextEncoderLoader",
                     inputs={"text_encoder": vm.GEMMA, "ckpt_name": vm.LTX2, "device": "default"})
        elif ct == "LatentUpscaleModelLoader":
            ins["model_name"] = vm.LTX2_UPSCALER
        elif ct == "CLIPLoader":
            n.update(class_type="SeedReuseTestVideoCLIPLoader",
                     inputs={"clip_name": vm.QWEN3VL, "type": ins.get("type", "minimax"), "device": "default"})
        elif ct == "DualCLIPLoader":
            n.update(class_type="SeedReuseTestVideoDualCLIPLoader",
                     inputs={"clip_name1": vm.QWEN25_HV15, "clip_name2": vm.BYT5, "type": ins["type"], "device": "default"})
        elif ct == "CLIPVisionLoader":
            n.update(class_type="SeedReuseTestSigLIPLoader", inputs={"clip_name": vm.SIGLIP})
        elif ct == "UNETLoader":
            ins["unet_name"] = vm.MINIMAX if "minimax" in str(ins.get("unet_name")).lower() else vm.HV15
        elif ct == "VAELoader":
            name = str(ins.get("vae_name")).lower()
            if "audio" in name:
                ins["vae_name"] = vm.MINIMAX_AUDIO_VAE
            else:
                n.update(class_type="SeedReuseTestTinyVAELoader",
                         inputs={"vae_name": vm.MINIMAX_VIDEO_VAE if "minimax" in name else vm.HV15_VAE})
        elif ct == "PrimitiveInt" and any(title.lower().startswith(t) for t in LTX_PRIMITIVES):
            ins["value"] = next(v for t, v in LTX_PRIMITIVES.items() if title.lower().startswith(t))
        elif ct == "PrimitiveFloat" and "duration" in title.lower():
            ins["value"] = 0.2                      # MiniMax H3: 5 frames at 24 fps
        elif ct == "PrimitiveBoolean" and "prompt enhance" in title.lower() and enhance is not None:
            ins["value"] = enhance
        elif ct == "ResizeImagesByLongerEdge":
            ins["longer_edge"] = 128
        elif ct == "ImageScale":                      # the shipped LTX-2.3 example's start image
            ins.update(width=64, height=64)
        elif ct == "EmptyLTXVLatentVideo":            # literal sizes (the shipped example): 9 frames of 64 px
            ins.update({k: v for k, v in (("width", 64), ("height", 64), ("length", 9)) if not _is_link(ins.get(k))})
        elif ct == "LTXVEmptyLatentAudio" and not _is_link(ins.get("frames_number")):
            ins["frames_number"] = 9
        elif ct == "EmptyImage":
            ins.update(width=64, height=64)
        elif ct == "LoadImage":
            ins["image"] = LAST_IMAGE if "last" in title.lower() else IMAGE
        elif ct == "TextGenerateLTX2Prompt":
            ins["max_length"] = 16
            if enhancer_seed is not None:
                ins["sampling_mode.seed"] = enhancer_seed
        elif ct in ("MiniMaxH3ImageToVideo", "HunyuanVideo15ImageToVideo"):
            ins.update(width=64 if ct.startswith("MiniMax") else 32, height=64 if ct.startswith("MiniMax") else 32)
            if ct.startswith("Hunyuan") or not _is_link(ins.get("length")):
                ins["length"] = 5
            if prompt is not None and ct.startswith("MiniMax"):
                ins["prompt"] = prompt
        elif ct == "BasicScheduler":
            ins["steps"] = 2
        elif ct == "SaveVideo":
            ins["filename_prefix"] = prefix
        if ct == "RandomNoise":
            ins["noise_seed"] = seed
        if ct == "CLIPTextEncode" and prompt is not None and "positive" in title.lower():
            ins["text"] = prompt
    return p
