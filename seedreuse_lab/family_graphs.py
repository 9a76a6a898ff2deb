"""API-format graphs of the support matrix (tests/families), with the SeedReuse nodes in place.

Each builder returns the TEST graph: real host nodes for everything the host can run tiny (the
diffusion models, VAEs, samplers, latents), the stock CLIP vision (ViT-H) and audio-encoder
(wav2vec2 base) nodes with the full-size random-weight files of encoder_models.py in the
InfiniteTalk graphs, and the stand-ins of seedreuse_lab/stand_in_nodes for the text encoders
(umT5-XXL, Qwen2.5-VL: too big for this machine). WanInfiniteTalkToVideo: ``talk="stock"`` on a host
that has it (0.33: stock ModelPatchLoader + node with the tiny patch and I2V of infinitetalk_models.py,
SeedReuseTestInfiniteTalkProbe reporting what it did), ``talk="standin"`` where it is missing (0.3.75).
``to_stock(prompt, names)`` turns a test graph into the user's graph: every stand-in becomes the
stock node it stands for (CLIPLoader type wan / qwen_image, CLIPTextEncode, TextEncodeQwenImageEdit,
CLIPVisionLoader/Encode, AudioEncoderLoader/Encode, LoadAudio, ModelPatchLoader,
WanInfiniteTalkToVideo), taps, probes and inspects are removed, and the tiny model files are renamed
to the real ones. The example workflows in example_workflows/ are built that way
(seedreuse_lab/tools/make_family_examples.py): the tested graph and the shipped one have one
structure. Node ids are fixed strings (namespaces below) so tests can address nodes.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

from . import family_models as fm
from . import graphs
from . import infinitetalk_models as im
from . import tiny_models as tm

SESSION = "100"


def link(node_id: str, index: int = 0) -> list:
    return [str(node_id), index]


def _n(class_type: str, inputs: dict, title: str | None = None) -> dict:
    node = {"class_type": class_type, "inputs": inputs}
    if title:
        node["_meta"] = {"title": title}
    return node


def _session(p: dict, cache_name: str, reuse: str, prefix_segments: int = 0) -> None:
    p[SESSION] = _n("SeedReuseSession", {"cache_name": cache_name, "reuse": reuse,
                                         "reuse_prefix_segments": prefix_segments}, "SeedReuse Session")


def _reuse(p: dict, nid: str, variant: str, slot: str, value: list) -> list:
    p[nid] = _n(f"SeedReuseEncode{variant}", {"session": link(SESSION), "slot": slot, "value": value},
                f"Encode or Reuse ({slot})")
    return link(nid)


# ------------------------------------------------------------------ Wan 2.2 A14B: two experts

W22 = SimpleNamespace(HIGH="1", LOW="2", SHIFT_HIGH="3", SHIFT_LOW="4", VAE="5", TEXT_LOADER="6", POS="7", NEG="8",
                      LATENT="9", SAMPLER_HIGH="10", SAMPLER_LOW="11", DECODE="12", VIDEO="13", SAVE="14",
                      R_POS="101", R_NEG="102")


def wan22_two_expert(seed: int, prompt_text: str = "a tiny two expert video", *, cache_name="wan22_experts",
                     reuse="auto", negative_text: str = "blurry, static", width=64, height=64, length=9,
                     steps=4, switch_step=2, cfg=1.0, shift=8.0, sampler_name="euler", scheduler="simple",
                     fps=16.0, high=fm.WAN22_HIGH, low=fm.WAN22_LOW, vae=tm.VAE, text_encoder=tm.TEXT_ENCODER,
                     filename_prefix="seedreuse/wan22_experts") -> dict:
    """Wan 2.2 A14B T2V: the high-noise expert samples steps [0, switch_step) and hands its
    leftover noise to the low-noise expert for [switch_step, steps). Both KSamplerAdvanced read
    ONE pair of reused text conditionings."""
    p: dict = {}
    _session(p, cache_name, reuse)
    p[W22.HIGH] = _n("UNETLoader", {"unet_name": high, "weight_dtype": "default"}, "High-noise expert")
    p[W22.LOW] = _n("UNETLoader", {"unet_name": low, "weight_dtype": "default"}, "Low-noise expert")
    p[W22.SHIFT_HIGH] = _n("ModelSamplingSD3", {"model": link(W22.HIGH), "shift": shift})
    p[W22.SHIFT_LOW] = _n("ModelSamplingSD3", {"model": link(W22.LOW), "shift": shift})
    p[W22.VAE] = _n("VAELoader", {"vae_name": vae})
    p[W22.TEXT_LOADER] = _n("SeedReuseTestTextEncoderLoader", {"clip_name": text_encoder, "work_ms": 0})
    p[W22.POS] = _n("SeedReuseTestTextEncode", {"clip": link(W22.TEXT_LOADER), "text": prompt_text, "work_ms": 0},
                    "Positive")
    p[W22.NEG] = _n("SeedReuseTestTextEncode", {"clip": link(W22.TEXT_LOADER), "text": negative_text, "work_ms": 0},
                    "Negative")
    pos = _reuse(p, W22.R_POS, "Conditioning", "positive", link(W22.POS))
    neg = _reuse(p, W22.R_NEG, "Conditioning", "negative", link(W22.NEG))
    p[W22.LATENT] = _n("EmptyHunyuanLatentVideo", {"width": width, "height": height, "length": length, "batch_size": 1})
    common = {"steps": steps, "cfg": cfg, "sampler_name": sampler_name, "scheduler": scheduler,
              "positive": pos, "negative": neg}
    p[W22.SAMPLER_HIGH] = _n("KSamplerAdvanced", {
        "model": link(W22.SHIFT_HIGH), "add_noise": "enable", "noise_seed": int(seed), **common,
        "latent_image": link(W22.LATENT), "start_at_step": 0, "end_at_step": switch_step,
        "return_with_leftover_noise": "enable"}, "KSampler (high noise)")
    p[W22.SAMPLER_LOW] = _n("KSamplerAdvanced", {
        "model": link(W22.SHIFT_LOW), "add_noise": "disable", "noise_seed": 0, **common,
        "latent_image": link(W22.SAMPLER_HIGH), "start_at_step": switch_step, "end_at_step": 10000,
        "return_with_leftover_noise": "disable"}, "KSampler (low noise)")
    p[W22.DECODE] = _n("VAEDecode", {"samples": link(W22.SAMPLER_LOW), "vae": link(W22.VAE)})
    p[W22.VIDEO] = _n("CreateVideo", {"images": link(W22.DECODE), "fps": float(fps)})
    p[W22.SAVE] = _n("SaveVideo", {"video": link(W22.VIDEO), "filename_prefix": filename_prefix,
                                   "format": "auto", "codec": "auto"})
    return p


# ------------------------------------------------------------------ Wan 2.2 TI2V 5B

TI2V = SimpleNamespace(UNET="1", SHIFT="2", VAE="3", TEXT_LOADER="4", POS="5", NEG="6", IMAGE="7", LATENT="8",
                       SAMPLER="9", DECODE="10", VIDEO="11", SAVE="12", R_POS="101", R_NEG="102", R_LATENT="103")


def wan22_ti2v(image_name: str, seed: int, prompt_text: str = "a tiny ti2v video", *, cache_name="wan22_ti2v",
               reuse="auto", negative_text: str = "blurry, static", width=32, height=32, length=5, steps=2,
               cfg=1.0, shift=8.0, sampler_name="euler", scheduler="simple", fps=24.0, unet=fm.WAN22_TI2V,
               vae=fm.WAN22_VAE, text_encoder=tm.TEXT_ENCODER, filename_prefix="seedreuse/wan22_ti2v") -> dict:
    """Wan 2.2 TI2V 5B: Wan22ImageToVideoLatent VAE-encodes the start image (Wan 2.2 VAE, 48
    channels) into the first latent frame with a noise mask. Reused: both text conditionings
    and that latent (so the Wan 2.2 VAE encode and LoadImage do not run on a hit)."""
    p: dict = {}
    _session(p, cache_name, reuse)
    p[TI2V.UNET] = _n("UNETLoader", {"unet_name": unet, "weight_dtype": "default"})
    p[TI2V.SHIFT] = _n("ModelSamplingSD3", {"model": link(TI2V.UNET), "shift": shift})
    p[TI2V.VAE] = _n("VAELoader", {"vae_name": vae})
    p[TI2V.TEXT_LOADER] = _n("SeedReuseTestTextEncoderLoader", {"clip_name": text_encoder, "work_ms": 0})
    p[TI2V.POS] = _n("SeedReuseTestTextEncode", {"clip": link(TI2V.TEXT_LOADER), "text": prompt_text, "work_ms": 0},
                     "Positive")
    p[TI2V.NEG] = _n("SeedReuseTestTextEncode", {"clip": link(TI2V.TEXT_LOADER), "text": negative_text,
                                                 "work_ms": 0}, "Negative")
    pos = _reuse(p, TI2V.R_POS, "Conditioning", "positive", link(TI2V.POS))
    neg = _reuse(p, TI2V.R_NEG, "Conditioning", "negative", link(TI2V.NEG))
    p[TI2V.IMAGE] = _n("LoadImage", {"image": image_name})
    p[TI2V.LATENT] = _n("Wan22ImageToVideoLatent", {"vae": link(TI2V.VAE), "width": width, "height": height,
                                                     "length": length, "batch_size": 1,
                                                     "start_image": link(TI2V.IMAGE)})
    lat = _reuse(p, TI2V.R_LATENT, "Latent", "ti2v_latent", link(TI2V.LATENT))
    p[TI2V.SAMPLER] = _n("KSampler", {"model": link(TI2V.SHIFT), "seed": int(seed), "steps": steps, "cfg": cfg,
                                      "sampler_name": sampler_name, "scheduler": scheduler, "positive": pos,
                                      "negative": neg, "latent_image": lat, "denoise": 1.0})
    p[TI2V.DECODE] = _n("VAEDecode", {"samples": link(TI2V.SAMPLER), "vae": link(TI2V.VAE)})
    p[TI2V.VIDEO] = _n("CreateVideo", {"images": link(TI2V.DECODE), "fps": float(fps)})
    p[TI2V.SAVE] = _n("SaveVideo", {"video": link(TI2V.VIDEO), "filename_prefix": filename_prefix,
                                    "format": "auto", "codec": "auto"})
    return p


# ------------------------------------------------------------------ Qwen-Image T2I

QT2I = SimpleNamespace(UNET="1", SHIFT="2", VAE="3", TEXT_LOADER="4", POS="5", NEG="6", LATENT="7", SAMPLER="8",
                       DECODE="9", SAVE="10", R_POS="101", R_NEG="102")


def qwen_t2i(seed: int, prompt_text: str = "a tiny qwen image", *, cache_name="qwen_t2i", reuse="auto",
             negative_text: str = "", width=32, height=32, steps=2, cfg=1.0, shift=3.1, sampler_name="euler",
             scheduler="simple", unet=fm.QWEN_IMAGE, vae=fm.QWEN_IMAGE_VAE, text_encoder=fm.QWEN_TEXT_ENCODER,
             filename_prefix="seedreuse/qwen_t2i") -> dict:
    p: dict = {}
    _session(p, cache_name, reuse)
    p[QT2I.UNET] = _n("UNETLoader", {"unet_name": unet, "weight_dtype": "default"})
    p[QT2I.SHIFT] = _n("ModelSamplingAuraFlow", {"model": link(QT2I.UNET), "shift": shift})
    p[QT2I.VAE] = _n("VAELoader", {"vae_name": vae})
    p[QT2I.TEXT_LOADER] = _n("SeedReuseTestQwenTextEncoderLoader", {"clip_name": text_encoder, "work_ms": 0})
    p[QT2I.POS] = _n("SeedReuseTestQwenTextEncode", {"clip": link(QT2I.TEXT_LOADER), "text": prompt_text,
                                                     "work_ms": 0}, "Positive")
    p[QT2I.NEG] = _n("SeedReuseTestQwenTextEncode", {"clip": link(QT2I.TEXT_LOADER), "text": negative_text,
                                                     "work_ms": 0}, "Negative")
    pos = _reuse(p, QT2I.R_POS, "Conditioning", "positive", link(QT2I.POS))
    neg = _reuse(p, QT2I.R_NEG, "Conditioning", "negative", link(QT2I.NEG))
    p[QT2I.LATENT] = _n("EmptySD3LatentImage", {"width": width, "height": height, "batch_size": 1})
    p[QT2I.SAMPLER] = _n("KSampler", {"model": link(QT2I.SHIFT), "seed": int(seed), "steps": steps, "cfg": cfg,
                                      "sampler_name": sampler_name, "scheduler": scheduler, "positive": pos,
                                      "negative": neg, "latent_image": link(QT2I.LATENT), "denoise": 1.0})
    p[QT2I.DECODE] = _n("VAEDecode", {"samples": link(QT2I.SAMPLER), "vae": link(QT2I.VAE)})
    p[QT2I.SAVE] = _n("SaveImage", {"images": link(QT2I.DECODE), "filename_prefix": filename_prefix})
    return p


# ------------------------------------------------------------------ Qwen-Image Edit (I2I)

QEDIT = SimpleNamespace(UNET="1", SHIFT="2", CFGNORM="3", VAE="4", TEXT_LOADER="5", IMAGE="6", SCALE="7", POS="8",
                        NEG="9", ENCODE="10", SAMPLER="11", DECODE="12", SAVE="13",
                        R_POS="101", R_NEG="102", R_LATENT="103")


def qwen_edit(image_name: str, seed: int, prompt_text: str = "make it blue", *, cache_name="qwen_edit",
              reuse="auto", negative_text: str = "", megapixels=0.01, edit_total_pixels=32 * 32, steps=2,
              cfg=1.0, shift=3.0, sampler_name="euler", scheduler="simple", denoise=1.0, unet=fm.QWEN_IMAGE,
              vae=fm.QWEN_IMAGE_VAE, text_encoder=fm.QWEN_TEXT_ENCODER, filename_prefix="seedreuse/qwen_edit") -> dict:
    """Qwen-Image-Edit as in the official template: LoadImage -> ImageScaleToTotalPixels ->
    TextEncodeQwenImageEdit (positive, negative; each carries the image's reference_latents)
    and VAEEncode (the sampler's start latent). Reused: both multimodal conditionings (with their
    reference latents) and the VAE latent of the input image."""
    p: dict = {}
    _session(p, cache_name, reuse)
    p[QEDIT.UNET] = _n("UNETLoader", {"unet_name": unet, "weight_dtype": "default"})
    p[QEDIT.SHIFT] = _n("ModelSamplingAuraFlow", {"model": link(QEDIT.UNET), "shift": shift})
    p[QEDIT.CFGNORM] = _n("CFGNorm", {"model": link(QEDIT.SHIFT), "strength": 1.0})
    p[QEDIT.VAE] = _n("VAELoader", {"vae_name": vae})
    p[QEDIT.TEXT_LOADER] = _n("SeedReuseTestQwenTextEncoderLoader", {"clip_name": text_encoder, "work_ms": 0})
    p[QEDIT.IMAGE] = _n("LoadImage", {"image": image_name})
    # resolution_steps: a required input since ComfyUI 0.33 (1 = its old behaviour); an input the
    # host does not define is ignored, so the prompt is valid on 0.3.75 too
    p[QEDIT.SCALE] = _n("ImageScaleToTotalPixels", {"image": link(QEDIT.IMAGE), "upscale_method": "lanczos",
                                                    "megapixels": megapixels, "resolution_steps": 1})
    for nid, text, title in ((QEDIT.POS, prompt_text, "Positive"), (QEDIT.NEG, negative_text, "Negative")):
        p[nid] = _n("SeedReuseTestTextEncodeQwenImageEdit", {
            "clip": link(QEDIT.TEXT_LOADER), "prompt": text, "vae": link(QEDIT.VAE), "image": link(QEDIT.SCALE),
            "total_pixels": edit_total_pixels, "work_ms": 0}, title)
    pos = _reuse(p, QEDIT.R_POS, "Conditioning", "edit_positive", link(QEDIT.POS))
    neg = _reuse(p, QEDIT.R_NEG, "Conditioning", "edit_negative", link(QEDIT.NEG))
    p[QEDIT.ENCODE] = _n("VAEEncode", {"pixels": link(QEDIT.SCALE), "vae": link(QEDIT.VAE)})
    lat = _reuse(p, QEDIT.R_LATENT, "Latent", "image_latent", link(QEDIT.ENCODE))
    p[QEDIT.SAMPLER] = _n("KSampler", {"model": link(QEDIT.CFGNORM), "seed": int(seed), "steps": steps, "cfg": cfg,
                                       "sampler_name": sampler_name, "scheduler": scheduler, "positive": pos,
                                       "negative": neg, "latent_image": lat, "denoise": denoise})
    p[QEDIT.DECODE] = _n("VAEDecode", {"samples": link(QEDIT.SAMPLER), "vae": link(QEDIT.VAE)})
    p[QEDIT.SAVE] = _n("SaveImage", {"images": link(QEDIT.DECODE), "filename_prefix": filename_prefix})
    return p


# ------------------------------------------------------------------ Z-Image Turbo

ZIMG = SimpleNamespace(UNET="1", SHIFT="2", VAE="3", TEXT_LOADER="4", POS="5", NEG="6", LATENT="7", SAMPLER="8",
                       DECODE="9", SAVE="10", R_POS="101")


def zimage_turbo(seed: int, prompt_text: str = "a tiny z-image", *, cache_name="zimage_turbo", reuse="auto",
                 width=32, height=32, steps=2, cfg=1.0, shift=3.0, sampler_name="res_multistep",
                 scheduler="simple", unet=None, vae=None, text_encoder=None,
                 filename_prefix="seedreuse/zimage_turbo") -> dict:
    """Z-Image Turbo as the official template (image_z_image_turbo) runs it: the prompt through the
    STOCK CLIPTextEncode (its CLIP from SeedReuseTestCLIPLoader, type lumina2: the stand-in Qwen3
    4B behind the host's Z-Image tokenizer), reused; the negative is ConditioningZeroOut of the
    reused positive (nothing to encode). Defaults: the generated models of
    _gen_image_family_models.py (on a host that has Z-Image)."""
    from . import _gen_image_family_models as gen
    p: dict = {}
    _session(p, cache_name, reuse)
    p[ZIMG.UNET] = _n("UNETLoader", {"unet_name": unet or gen.ZIMAGE, "weight_dtype": "default"})
    p[ZIMG.SHIFT] = _n("ModelSamplingAuraFlow", {"model": link(ZIMG.UNET), "shift": shift})
    p[ZIMG.VAE] = _n("VAELoader", {"vae_name": vae or gen.FLUX_AE})
    p[ZIMG.TEXT_LOADER] = _n("SeedReuseTestCLIPLoader", {"clip_name": text_encoder or "standin_qwen3_4b.safetensors",
                                                         "type": "lumina2", "device": "default"})
    p[ZIMG.POS] = _n("CLIPTextEncode", {"clip": link(ZIMG.TEXT_LOADER), "text": prompt_text}, "Positive")
    pos = _reuse(p, ZIMG.R_POS, "Conditioning", "positive", link(ZIMG.POS))
    p[ZIMG.NEG] = _n("ConditioningZeroOut", {"conditioning": pos}, "Negative")
    p[ZIMG.LATENT] = _n("EmptySD3LatentImage", {"width": width, "height": height, "batch_size": 1})
    p[ZIMG.SAMPLER] = _n("KSampler", {"model": link(ZIMG.SHIFT), "seed": int(seed), "steps": steps, "cfg": cfg,
                                      "sampler_name": sampler_name, "scheduler": scheduler, "positive": pos,
                                      "negative": link(ZIMG.NEG), "latent_image": link(ZIMG.LATENT), "denoise": 1.0})
    p[ZIMG.DECODE] = _n("VAEDecode", {"samples": link(ZIMG.SAMPLER), "vae": link(ZIMG.VAE)})
    p[ZIMG.SAVE] = _n("SaveImage", {"images": link(ZIMG.DECODE), "filename_prefix": filename_prefix})
    return p


# ------------------------------------------------------------------ InfiniteTalk (Wan 2.1 I2V + patch)

IT = SimpleNamespace(UNET="1", VAE="2", TEXT_LOADER="3", POS="4", NEG="5", CV_LOADER="6", IMAGE="7", CV_ENCODE="8",
                     AUDIO="9", AUDIO_LOADER="10", AUDIO_ENCODE="11", PATCH="12", TALK="13", SAMPLER="14",
                     DECODE="15", VIDEO="16", SAVE="17", R_POS="101", R_CV="105", R_AUDIO="106",
                     START="200", TAP_FEATURES="201", TAP_MOTION="203", SEG_TALK="204",
                     SEG_SAMPLER="205", SEG_DECODE="206", TAP_IMAGES="207", BOUNDARY="208", END="209", MERGE="210",
                     TAP_TRACK="211", PROBE="18", SEG_PROBE="212")
TALK_MODELS = {"standin": (tm.I2V, fm.INFINITETALK_PATCH), "stock": (im.I2V_TALK, im.PATCH)}  # unet, patch


def _infinitetalk_common(p, image_name, prompt_text, *, seconds, sample_rate, frequency, unet, vae, text_encoder,
                         clip_vision, audio_encoder, model_patch, crop, encoders, audio_file,
                         audio_encode_title=None, talk="standin") -> None:
    p[IT.UNET] = _n("UNETLoader", {"unet_name": unet or TALK_MODELS[talk][0], "weight_dtype": "default"})
    p[IT.VAE] = _n("VAELoader", {"vae_name": vae})
    p[IT.TEXT_LOADER] = _n("SeedReuseTestTextEncoderLoader", {"clip_name": text_encoder, "work_ms": 0})
    p[IT.POS] = _n("SeedReuseTestTextEncode", {"clip": link(IT.TEXT_LOADER), "text": prompt_text, "work_ms": 0},
                   "Positive")
    pos = _reuse(p, IT.R_POS, "Conditioning", "positive", link(IT.POS))
    p[IT.NEG] = _n("ConditioningZeroOut", {"conditioning": pos}, "Negative")
    p[IT.IMAGE] = _n("LoadImage", {"image": image_name})
    cv = graphs.clip_vision_nodes(p, IT.CV_LOADER, IT.CV_ENCODE, link(IT.IMAGE), encoders=encoders,
                                  clip_vision=clip_vision, crop=crop)
    _reuse(p, IT.R_CV, "ClipVision", "clip_vision", cv)
    audio = graphs.audio_source(p, IT.AUDIO, seconds=seconds, sample_rate=sample_rate, frequency=frequency,
                                audio_file=audio_file, title="Speech")
    graphs.audio_encoder_nodes(p, IT.AUDIO_LOADER, IT.AUDIO_ENCODE, audio, encoders=encoders,
                               audio_encoder=audio_encoder, title=audio_encode_title)
    p[IT.PATCH] = _n("ModelPatchLoader" if talk == "stock" else "SeedReuseTestModelPatchLoader",
                     {"name": model_patch or TALK_MODELS[talk][1]})


def _talk(p: dict, nid: str, probe_id: str, talk: str, inputs: dict) -> list:
    """WanInfiniteTalkToVideo at nid: the stand-in, or the stock node followed by the probe that
    reports what it did. Returns the link of the MODEL the sampler reads."""
    p[nid] = _n("WanInfiniteTalkToVideo" if talk == "stock" else "SeedReuseTestInfiniteTalkToVideo", inputs)
    if talk == "standin":
        return link(nid, 0)
    keep = ("model_patch", "audio_encoder_output_1", "length", "motion_frame_count", "previous_frames")
    p[probe_id] = _n("SeedReuseTestInfiniteTalkProbe", {"value": link(nid, 0), "trim_image": link(nid, 4),
                                                        **{k: inputs[k] for k in keep if k in inputs}})
    return link(probe_id)


def _talk_inputs(*, positive, negative, width, height, length, audio, motion_frame_count, previous_frames=None):
    d = {"mode": "single_speaker", "model": link(IT.UNET), "model_patch": link(IT.PATCH), "positive": positive,
         "negative": negative, "vae": link(IT.VAE), "width": width, "height": height, "length": length,
         "clip_vision_output": link(IT.R_CV), "start_image": link(IT.IMAGE), "audio_encoder_output_1": audio,
         "motion_frame_count": motion_frame_count, "audio_scale": 1.0}
    return d if previous_frames is None else {**d, "previous_frames": previous_frames}


def infinitetalk_clip(image_name: str, seed: int, prompt_text: str = "a person talking", *,
                      cache_name="infinitetalk_clip", reuse="auto", width=64, height=64, length=9,
                      motion_frame_count=9, fps=25.0, steps=2, cfg=1.0, sample_rate=16000, frequency=220.0,
                      seconds: float | None = None, sampler_name="euler", scheduler="simple", unet=None,
                      vae=tm.VAE, text_encoder=tm.TEXT_ENCODER, clip_vision=None, audio_encoder=None,
                      model_patch=None, crop="center", encoders="stock", audio_file=None, talk="standin",
                      filename_prefix="seedreuse/infinitetalk_clip") -> dict:
    """One InfiniteTalk clip (the template's "InfiniteTalk (Base Generation)"): the whole audio
    track is encoded once and reused with the text and CLIP vision outputs; the node takes the
    window [0, length) of the features (no previous frames). ``encoders`` (graphs.py): "stock" =
    ComfyUI's CLIP vision ViT-H and wav2vec2 base nodes with the full-size random-weight files."""
    p: dict = {}
    _session(p, cache_name, reuse)
    _infinitetalk_common(p, image_name, prompt_text, seconds=seconds or length / fps, sample_rate=sample_rate,
                         frequency=frequency, unet=unet, vae=vae, text_encoder=text_encoder, clip_vision=clip_vision,
                         audio_encoder=audio_encoder, model_patch=model_patch, crop=crop, encoders=encoders,
                         audio_file=audio_file, talk=talk)
    audio = _reuse(p, IT.R_AUDIO, "AudioFeatures", "audio_features", link(IT.AUDIO_ENCODE))
    model = _talk(p, IT.TALK, IT.PROBE, talk, _talk_inputs(
        positive=link(IT.R_POS), negative=link(IT.NEG), width=width, height=height, length=length, audio=audio,
        motion_frame_count=motion_frame_count))
    p[IT.SAMPLER] = _n("KSampler", {"model": model, "seed": int(seed), "steps": steps, "cfg": cfg,
                                    "sampler_name": sampler_name, "scheduler": scheduler,
                                    "positive": link(IT.TALK, 1), "negative": link(IT.TALK, 2),
                                    "latent_image": link(IT.TALK, 3), "denoise": 1.0})
    p[IT.DECODE] = _n("VAEDecode", {"samples": link(IT.SAMPLER), "vae": link(IT.VAE)})
    p[IT.VIDEO] = _n("CreateVideo", {"images": link(IT.DECODE), "fps": float(fps), "audio": link(IT.AUDIO)})
    p[IT.SAVE] = _n("SaveVideo", {"video": link(IT.VIDEO), "filename_prefix": filename_prefix,
                                  "format": "auto", "codec": "auto"})
    return p


def infinitetalk_segments(image_name: str, seed: int, prompt_text: str = "a person talking", *,
                          cache_name="infinitetalk_segments", reuse="auto", prefix_segments=0, F=9, M=5,
                          total_frames=17, fps=25.0, width=64, height=64, steps=2, cfg=1.0, sample_rate=16000,
                          frequency=220.0, sampler_name="euler", scheduler="simple", unet=None, vae=tm.VAE,
                          text_encoder=tm.TEXT_ENCODER, clip_vision=None, audio_encoder=None,
                          model_patch=None, crop="center", taps=True, encoders="stock", talk="standin",
                          audio_file=None, filename_prefix="seedreuse/infinitetalk") -> dict:
    """A long InfiniteTalk video as a SeedReuse Segment Loop. Outside the loop, once: the text,
    CLIP vision and the WHOLE audio track's encoder output, each through Encode or Reuse (slots
    positive, clip_vision, audio_features). The whole-track features go into Segment Loop Start's
    audio_features, which cuts them per segment (segment_audio_features: the features under frames
    [start(i), start(i)+F), start(i) = i*(F-M)); the body's WanInfiniteTalkToVideo takes that cut
    as audio_encoder_output_1 and continues from the loop's motion frames (previous_frames: none
    for segment 0, the previous segment's last M frames after; motion_frame_count = M). The node
    starts its audio window at previous_frames.shape[0] - motion_frame_count, which is 0 exactly
    when previous_frames is the loop's M motion frames: the window is [0, F) of the pre-cut
    features. The audio encoder never runs inside the loop, so a resume does not run it at all.
    The Start node still takes the waveform (audio): it sets the duration (total_frames = 0) and
    Prefix Merge muxes it."""
    p: dict = {}
    _session(p, cache_name, reuse, prefix_segments)
    _infinitetalk_common(p, image_name, prompt_text, seconds=total_frames / fps, sample_rate=sample_rate,
                         frequency=frequency, unet=unet, vae=vae, text_encoder=text_encoder, clip_vision=clip_vision,
                         audio_encoder=audio_encoder, model_patch=model_patch, crop=crop, encoders=encoders,
                         audio_file=audio_file, audio_encode_title="Encode the whole track", talk=talk)
    track = _reuse(p, IT.R_AUDIO, "AudioFeatures", "audio_features", link(IT.AUDIO_ENCODE))
    if taps:
        p[IT.TAP_TRACK] = _n("SeedReuseTestTap", {"value": track, "label": "track_features"})
        track = link(IT.TAP_TRACK)
    p[IT.START] = _n("SeedReuseSegmentLoopStart", {
        "session": link(SESSION), "segment_frames": F, "motion_frames": M, "total_frames": total_frames,
        "fps": float(fps), "seed": int(seed), "audio": link(IT.AUDIO), "audio_features": track},
        "Segment Loop Start")
    seg_features, motion, images = link(IT.START, 8), link(IT.START, 4), link(IT.SEG_DECODE)
    if taps:
        p[IT.TAP_FEATURES] = _n("SeedReuseTestTap", {"value": seg_features, "label": "segment_audio_features"})
        p[IT.TAP_MOTION] = _n("SeedReuseTestTap", {"value": motion, "label": "previous_frames"})
        p[IT.TAP_IMAGES] = _n("SeedReuseTestTap", {"value": images, "label": "images"})
        seg_features, motion, images = link(IT.TAP_FEATURES), link(IT.TAP_MOTION), link(IT.TAP_IMAGES)
    model = _talk(p, IT.SEG_TALK, IT.SEG_PROBE, talk, _talk_inputs(
        positive=link(IT.R_POS), negative=link(IT.NEG), width=width, height=height, length=link(IT.START, 3),
        audio=seg_features, motion_frame_count=M, previous_frames=motion))
    p[IT.SEG_SAMPLER] = _n("KSampler", {"model": model, "seed": link(IT.START, 6), "steps": steps,
                                        "cfg": cfg, "sampler_name": sampler_name, "scheduler": scheduler,
                                        "positive": link(IT.SEG_TALK, 1), "negative": link(IT.SEG_TALK, 2),
                                        "latent_image": link(IT.SEG_TALK, 3), "denoise": 1.0})
    p[IT.SEG_DECODE] = _n("VAEDecode", {"samples": link(IT.SEG_SAMPLER), "vae": link(IT.VAE)})
    p[IT.BOUNDARY] = _n("SeedReuseBoundarySave", {"loop": link(IT.START), "images": images})
    p[IT.END] = _n("SeedReuseSegmentLoopEnd", {"loop": link(IT.START), "segment": link(IT.BOUNDARY)})
    p[IT.MERGE] = _n("SeedReusePrefixMerge", {"segments": link(IT.END), "filename_prefix": filename_prefix})
    return p


# ------------------------------------------------------------------ test graph -> user graph

STOCK = {
    # stand-in class -> (stock class, {stand-in input: stock input or None to drop}, extra literal inputs)
    "SeedReuseTestTextEncoderLoader": ("CLIPLoader", {"work_ms": None}, {"type": "wan", "device": "default"}),
    "SeedReuseTestQwenTextEncoderLoader": ("CLIPLoader", {"work_ms": None}, {"type": "qwen_image", "device": "default"}),
    "SeedReuseTestTextEncode": ("CLIPTextEncode", {"work_ms": None}, {}),
    "SeedReuseTestQwenTextEncode": ("CLIPTextEncode", {"work_ms": None}, {}),
    "SeedReuseTestTextEncodeQwenImageEdit": ("TextEncodeQwenImageEdit", {"work_ms": None, "total_pixels": None}, {}),
    "SeedReuseTestClipVisionLoader": ("CLIPVisionLoader", {"work_ms": None}, {}),
    "SeedReuseTestClipVisionEncode": ("CLIPVisionEncode", {"work_ms": None}, {}),
    "SeedReuseTestAudioEncoderLoader": ("AudioEncoderLoader", {"work_ms": None}, {}),
    "SeedReuseTestAudioEncode": ("AudioEncoderEncode", {"work_ms": None}, {}),
    "SeedReuseTestSineAudio": ("LoadAudio", {"seconds": None, "sample_rate": None, "frequency": None}, {}),
    "SeedReuseTestModelPatchLoader": ("ModelPatchLoader", {}, {}),
    "SeedReuseTestInfiniteTalkToVideo": ("WanInfiniteTalkToVideo", {"audio_encoder_output_2": None,
                                                                    "mask_1": None, "mask_2": None}, {}),
    "SeedReuseTestCLIPLoader": ("CLIPLoader", {}, {}),      # the stock loader's inputs already
}
PASS_THROUGH = ("SeedReuseTestTap", "SeedReuseTestInfiniteTalkProbe")
DROP = ("SeedReuseTestInspect",)


def to_stock(prompt: dict, file_names: dict[str, str], audio_file: str = "speech.wav") -> dict:
    """The user's graph: stand-ins -> stock nodes, taps/inspects/probes removed, tiny model files
    renamed (``file_names``: tiny file name -> real file name)."""
    p = json.loads(json.dumps(prompt))
    for nid in [k for k, v in p.items() if v["class_type"] in DROP]:
        p.pop(nid)
    for nid in [k for k, v in p.items() if v["class_type"] in PASS_THROUGH]:
        src = p.pop(nid)["inputs"]["value"]
        for node in p.values():
            for k, v in node["inputs"].items():
                if v == link(nid):
                    node["inputs"][k] = src
    for node in p.values():
        ct = node["class_type"]
        if ct in STOCK:
            stock, renames, extra = STOCK[ct]
            ins = {renames.get(k, k): v for k, v in node["inputs"].items() if renames.get(k, k) is not None}
            ins.update(extra)
            if ct == "SeedReuseTestSineAudio":
                ins = {"audio": audio_file}
            node["class_type"], node["inputs"] = stock, ins
        for k, v in node["inputs"].items():
            if isinstance(v, str) and v in file_names:
                node["inputs"][k] = file_names[v]
    return p
