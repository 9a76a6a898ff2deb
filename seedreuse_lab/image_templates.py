"""The official ComfyUI 0.33.0 templates of the image and audio families, on the test host.

``for_test_host(api, name, seed=, prefix=)`` takes a template's API form (instrumented by the
pack, converted as the frontend does) and points it at the generated models of
_gen_image_family_models.py and the stand-in text encoders of
stand_in_nodes/image_family_standins.py, shrinks sizes, durations and steps and sets the
SAMPLER seed (KSampler, KSamplerAdvanced, RandomNoise; an encoder's own seed, as
TextEncodeAceStepAudio1.5's, is the ``encoder_seed`` argument). Replaced, per class:

    UNETLoader, VAELoader          the family's generated file
    CLIPLoader, DualCLIPLoader     SeedReuseTestCLIPLoader / SeedReuseTestDualCLIPLoader (same inputs,
                                   stand-in encoder files, the template's type)
    CheckpointLoaderSimple         the generated checkpoint (model + VAE, no text encoders); its CLIP
                                   output is taken from a SeedReuseTestCheckpointCLIPLoader added beside it
    TextEncodeQwenImageEditPlus    SeedReuseTestTextEncodeQwenImageEditPlus (its two fixed sizes small)
    FluxKontextImageScale          ImageScale to the test size (it scales to about 1 megapixel)
    LoraLoaderModelOnly            bypassed (no LoRA file here)
    LoadImage                      the test images IMAGES, in turn

``add_inspects(prompt)`` adds a SeedReuseTestInspect after every Encode-or-Reuse node (label: its
slot) and after every decoder; ``encoder_work`` says what of the encode side ran.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import _gen_image_family_models as gen
from . import family_models as fm
from .official_templates import IMAGE

IMAGES = (IMAGE, "template_ref_2.png")     # the templates' LoadImage nodes take these in turn

SAMPLERS = {"KSampler", "KSamplerAdvanced", "SamplerCustom", "SamplerCustomAdvanced"}
SAMPLER_SEEDS = {"KSampler": "seed", "KSamplerAdvanced": "noise_seed", "RandomNoise": "noise_seed"}
TEXT_LOADERS = ("SeedReuseTestCLIPLoader", "SeedReuseTestDualCLIPLoader", "SeedReuseTestCheckpointCLIPLoader")
DECODERS = ("VAEDecode", "VAEDecodeAudio")
QWEN3_4B, MISTRAL, CLIP_L, T5XXL, ACE_TE, ACE_LM = (
    "standin_qwen3_4b.safetensors", "standin_mistral3_24b.safetensors", "standin_clip_l.safetensors",
    "standin_t5xxl.safetensors", "standin_qwen3_06b_ace15.safetensors", "standin_qwen3_2b_ace15_lm.safetensors")


@dataclass(frozen=True)
class Family:
    unet: str | None = None
    vae: str | None = None
    text: tuple = ()                         # stand-in encoder files, in the loader's input order
    ckpt: dict = field(default_factory=dict)  # template checkpoint name -> generated checkpoint
    size: int = 32                           # image width and height
    seconds: float = 1.0                     # audio duration


TEMPLATES = {
    "image_z_image_turbo": Family(unet=gen.ZIMAGE, vae=gen.FLUX_AE, text=(QWEN3_4B,)),
    "image_flux2": Family(unet=gen.FLUX2_DEV, vae=gen.FLUX2_VAE, text=(MISTRAL,)),
    "image_flux2_klein_text_to_image": Family(unet=gen.FLUX2_KLEIN, vae=gen.FLUX2_VAE, text=(QWEN3_4B,)),
    "image_qwen_image_edit_2511": Family(unet=fm.QWEN_IMAGE, vae=fm.QWEN_IMAGE_VAE, text=(fm.QWEN_TEXT_ENCODER,)),
    "flux_dev_full_text_to_image": Family(unet=gen.FLUX1_DEV, vae=gen.FLUX_AE, text=(CLIP_L, T5XXL)),
    # the refiner's UNet downsamples 3 times: 64 px (an 8x8 latent)
    "sdxl_refiner_prompt_example": Family(ckpt={"sd_xl_base_1.0.safetensors": gen.SDXL_BASE,
                                                "sd_xl_refiner_1.0.safetensors": gen.SDXL_REFINER}, size=64),
    "sd3.5_simple_example": Family(ckpt={"sd3.5_large_fp8_scaled.safetensors": gen.SD35}),
    "audio_ace_step_1_5_split": Family(unet=gen.ACE15, vae=gen.ACE15_VAE, text=(ACE_TE, ACE_LM)),
}


def _is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)


def _bypass(p: dict, class_type: str, through: str) -> None:
    for nid in [k for k, n in p.items() if n["class_type"] == class_type]:
        src = p.pop(nid)["inputs"][through]
        for n in p.values():
            for k, v in n["inputs"].items():
                if _is_link(v) and v[0] == nid:
                    n["inputs"][k] = src


def for_test_host(api: dict, name: str, *, seed: int, prefix: str, encoder_seed: int | None = None,
                  qwen_vl_pixels: int = 56 * 56) -> dict:
    fam = TEMPLATES[name]
    p = json.loads(json.dumps(api))
    _bypass(p, "LoraLoaderModelOnly", "model")
    loads = sorted((k for k, n in p.items() if n["class_type"] == "LoadImage"), key=lambda k: [int(x) for x in k.split(":")])
    for i, k in enumerate(loads):
        p[k]["inputs"]["image"] = IMAGES[i % len(IMAGES)]
    for nid, n in list(p.items()):
        ct, ins = n["class_type"], n["inputs"]
        if ct == "UNETLoader":
            ins["unet_name"] = fam.unet
        elif ct == "VAELoader":
            ins["vae_name"] = fam.vae
        elif ct == "CLIPLoader":
            n.update(class_type="SeedReuseTestCLIPLoader",
                     inputs={"clip_name": fam.text[0], "type": ins["type"], "device": ins.get("device", "default")})
        elif ct == "DualCLIPLoader":
            n.update(class_type="SeedReuseTestDualCLIPLoader",
                     inputs={"clip_name1": fam.text[0], "clip_name2": fam.text[1], "type": ins["type"],
                             "device": ins.get("device", "default")})
        elif ct == "CheckpointLoaderSimple":
            ins["ckpt_name"] = fam.ckpt[ins["ckpt_name"]]
            clip_id = "clip_of_" + nid.replace(":", "_")
            p[clip_id] = {"class_type": "SeedReuseTestCheckpointCLIPLoader", "inputs": {"ckpt_name": ins["ckpt_name"]},
                          "_meta": {"title": "the checkpoint's text encoders (stand-in)"}}
            for other in p.values():
                for k, v in other["inputs"].items():
                    if v == [nid, 1]:
                        other["inputs"][k] = [clip_id, 0]
        elif ct == "TextEncodeQwenImageEditPlus":
            n.update(class_type="SeedReuseTestTextEncodeQwenImageEditPlus",
                     inputs={**ins, "vl_pixels": qwen_vl_pixels, "ref_pixels": fam.size * fam.size})
        elif ct == "FluxKontextImageScale":
            n.update(class_type="ImageScale", inputs={"image": ins["image"], "upscale_method": "area",
                                                      "width": fam.size, "height": fam.size, "crop": "disabled"})
        elif ct == "ImageScaleToTotalPixels":
            ins["megapixels"] = 0.01          # its minimum: about 100x100
        elif ct in ("SaveImage", "SaveAudioMP3", "SaveAudio", "SaveAudioAdvanced"):
            ins["filename_prefix"] = prefix
        elif ct == "EmptyAceStep1.5LatentAudio":
            ins["seconds"] = fam.seconds
        elif ct == "TextEncodeAceStepAudio1.5":
            ins["duration"] = fam.seconds
            if encoder_seed is not None:
                ins["seed"] = encoder_seed
        for k in ("width", "height"):
            if k in ins and not _is_link(ins[k]) and n["class_type"] != "ImageScale":
                ins[k] = fam.size
        if ct in SAMPLER_SEEDS:
            ins[SAMPLER_SEEDS[ct]] = seed
        if ct in ("KSampler", "KSamplerAdvanced", "Flux2Scheduler", "BasicScheduler") and not _is_link(ins.get("steps")):
            ins["steps"] = 2
        if ct == "KSamplerAdvanced":       # base [0, 1), refiner [1, 2)
            first = ins.get("add_noise") == "enable"
            ins.update(start_at_step=0 if first else 1, end_at_step=1 if first else 10000)
    for n in list(p.values()):             # sizes and steps given by primitives (through switches)
        for k, v in n["inputs"].items():
            if _is_link(v) and k in ("steps", "width", "height"):
                _set_source(p, v, 2 if k == "steps" else fam.size)
    return p


def _set_source(p: dict, link: list, value: int) -> None:
    """Set the PrimitiveInt a link comes from (through ComfySwitchNode branches) to value."""
    n = p.get(link[0])
    if n is None:
        return
    if n["class_type"] == "PrimitiveInt":
        n["inputs"]["value"] = value
    elif n["class_type"] == "ComfySwitchNode":
        for k in ("on_true", "on_false"):
            if _is_link(n["inputs"].get(k)):
                _set_source(p, n["inputs"][k], value)


def wrappers(prompt: dict) -> dict:
    """slot -> node id of every Encode-or-Reuse node."""
    return {n["inputs"]["slot"]: k for k, n in prompt.items() if n["class_type"].startswith("SeedReuseEncode")}


def add_inspects(prompt: dict) -> dict:
    """A SeedReuseTestInspect after every Encode-or-Reuse node (id ``inspect:<slot>``) and every
    decoder (``inspect:decoded:<node>``). Returns {label: inspect node id}."""
    out = {}
    for slot, nid in wrappers(prompt).items():
        out[slot] = f"inspect:{slot}"
    for nid in [k for k, n in prompt.items() if n["class_type"] in DECODERS]:
        out[f"decoded:{nid}"] = f"inspect:decoded:{nid}"
    src = {**{f"inspect:{s}": n for s, n in wrappers(prompt).items()},
           **{f"inspect:decoded:{k}": k for k, n in prompt.items() if n["class_type"] in DECODERS}}
    for iid, s in src.items():
        prompt[iid] = {"class_type": "SeedReuseTestInspect", "inputs": {"value": [s, 0], "label": iid}}
    return out


def encoder_nodes(prompt: dict) -> dict:
    """The encode side: the stand-in text loaders and every node that takes their CLIP."""
    loaders = {k for k, n in prompt.items() if n["class_type"] in TEXT_LOADERS}
    encoders = {k for k, n in prompt.items() if any(_is_link(v) and v[0] in loaders for v in n["inputs"].values())}
    return {"loaders": sorted(loaders), "encoders": sorted(encoders)}


def encoder_work(prompt: dict, res, counts: dict) -> dict:
    """What of the encode side ran in ``res``: every value empty when no text loader, no encode
    node and no stand-in network ran (``counts``: the worker's counters since before the run)."""
    ran = set(res.executed)
    side = encoder_nodes(prompt)
    return {"stand-in counters": {k: counts[k] for k in ("text_loader", "text_encode") if counts.get(k)},
            "loaders that ran": sorted(set(side["loaders"]) & ran),
            "encode nodes that ran": sorted(set(side["encoders"]) & ran),
            "samplers that did not run": sorted({k for k, n in prompt.items() if n["class_type"] in SAMPLERS} - ran)}
