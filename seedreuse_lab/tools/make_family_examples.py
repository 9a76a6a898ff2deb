"""Builds the support-matrix example workflows (UI format + API-format twin) from the tested graphs.

    python -m seedreuse_lab.tools.make_family_examples http://127.0.0.1:PORT   # a running ComfyUI with the pack
    python -m seedreuse_lab.tools.make_family_examples object_info.json

Each example is the test graph of tests/families (seedreuse_lab/family_graphs.py) turned into
the user's graph by ``family_graphs.to_stock`` (stock loaders and encoders, real model file
names, full-size settings), then laid out as the LiteGraph JSON the ComfyUI canvas saves
(nodes with inputs/outputs/widgets_values, links, version 0.4). Node specs come from the
host's /object_info; WanInfiniteTalkToVideo (missing on 0.3.75) uses the spec of newer ComfyUI in
NEWER_NODES (as in the official video_wan2_1_infinitetalk.json template), and so do
AudioEncoderLoader, AudioEncoderEncode and LoadAudio on a host without torchaudio (scripts/setup.sh
installs it, so the test host has their real specs). The few stock nodes whose widgets differ
between the tested hosts are laid out as portable_examples.py says, so every tested host builds
the same files.
Files (example_files.py): example_workflows/<TITLE>.json (the template browser shows a pack's
templates by file name), its thumbnail <TITLE>.jpg and the API twin api/<id>.json, named in the UI
file's extra.seedreuse_example. tests/families/test_family_examples.py rebuilds them from a live
worker and compares with the files.
"""
from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

from .. import family_graphs as fg
from .. import family_models as fm
from .. import tiny_models as tm

from . import example_files, example_layout, portable_examples, video_examples

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "example_workflows"
WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO", "COMFY_DYNAMICCOMBO_V3"}

# newer ComfyUI's specs (object_info format) of the nodes 0.3.75 lacks or, without torchaudio, cannot import
NEWER_NODES = {
    "WanInfiniteTalkToVideo": {   # mode is a DynamicCombo there (single_speaker: no extra inputs)
        "input": {"required": {
            "mode": ["COMFY_DYNAMICCOMBO_V3", {"options": ["single_speaker", "two_speakers"]}],
            "model": ["MODEL"], "model_patch": ["MODEL_PATCH"], "positive": ["CONDITIONING"],
            "negative": ["CONDITIONING"], "vae": ["VAE"],
            "width": ["INT", {"default": 832}], "height": ["INT", {"default": 480}],
            "length": ["INT", {"default": 81}],
            "audio_encoder_output_1": ["AUDIO_ENCODER_OUTPUT"],
            "motion_frame_count": ["INT", {"default": 9}], "audio_scale": ["FLOAT", {"default": 1.0}]},
            "optional": {"clip_vision_output": ["CLIP_VISION_OUTPUT"], "start_image": ["IMAGE"],
                         "previous_frames": ["IMAGE"]}},
        "input_order": {"required": ["mode", "model", "model_patch", "positive", "negative", "vae", "width",
                                     "height", "length", "audio_encoder_output_1", "motion_frame_count",
                                     "audio_scale"],
                        "optional": ["clip_vision_output", "start_image", "previous_frames"]},
        "output": ["MODEL", "CONDITIONING", "CONDITIONING", "LATENT", "INT"],
        "output_name": ["model", "positive", "negative", "latent", "trim_image"],
    },
    "AudioEncoderLoader": {
        "input": {"required": {"audio_encoder_name": ["COMBO", {"options": []}]}},
        "input_order": {"required": ["audio_encoder_name"]},
        "output": ["AUDIO_ENCODER"], "output_name": ["AUDIO_ENCODER"]},
    "AudioEncoderEncode": {
        "input": {"required": {"audio_encoder": ["AUDIO_ENCODER"], "audio": ["AUDIO"]}},
        "input_order": {"required": ["audio_encoder", "audio"]},
        "output": ["AUDIO_ENCODER_OUTPUT"], "output_name": ["AUDIO_ENCODER_OUTPUT"]},
    "LoadAudio": {   # widgets: audio file, audioUI, upload (the template saves [file, null, null])
        "input": {"required": {"audio": ["COMBO", {"options": [], "audio_upload": True}]}},
        "input_order": {"required": ["audio"]},
        "output": ["AUDIO"], "output_name": ["AUDIO"]},
}

WAN_FILES = {tm.TEXT_ENCODER: "umt5_xxl_fp8_e4m3fn_scaled.safetensors", tm.VAE: "wan_2.1_vae.safetensors",
             tm.CLIP_VISION: "clip_vision_h.safetensors"}


def example_graphs() -> dict[str, tuple[dict, str]]:
    """name -> (API-format graph, note text)."""
    ex = {}
    p = fg.wan22_two_expert(seed=42, prompt_text="A red fox trots through fresh snow at dawn, cinematic, soft light",
                            negative_text="blurry, static, low quality, watermark", cache_name="wan22_experts",
                            width=640, height=640, length=81, steps=20, switch_step=10, cfg=3.5, shift=8.0,
                            filename_prefix="video/wan22_experts")
    ex["wan22_two_expert_reuse"] = (fg.to_stock(p, {
        **WAN_FILES, fm.WAN22_HIGH: "wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors",
        fm.WAN22_LOW: "wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors"}),
        "## Wan 2.2 A14B (two experts) with Encoder Reuse\n\n"
        "Pick your files in the loaders: `wan2.2_t2v_high_noise_14B_*` and `wan2.2_t2v_low_noise_14B_*` "
        "(diffusion_models), `umt5_xxl_*` (text_encoders, type wan), `wan_2.1_vae` (vae).\n\n"
        "Both KSamplerAdvanced read the same **Encode or Reuse** outputs: the text encoder runs once per prompt "
        "text on any worker that shares the cache root; changing the seed (or the step split) re-samples "
        "without loading umT5 again.")
    p = fg.wan22_ti2v("example.png", seed=42, prompt_text="The camera slowly moves right along a rainy neon street",
                      negative_text="blurry, static, low quality", cache_name="wan22_ti2v", width=1280, height=704,
                      length=121, steps=20, cfg=5.0, shift=8.0, sampler_name="uni_pc",
                      filename_prefix="video/wan22_ti2v")
    ex["wan22_ti2v_5b_reuse"] = (fg.to_stock(p, {
        **WAN_FILES, fm.WAN22_TI2V: "wan2.2_ti2v_5B_fp16.safetensors", fm.WAN22_VAE: "wan2.2_vae.safetensors"}),
        "## Wan 2.2 TI2V 5B with Encoder Reuse\n\n"
        "Pick `wan2.2_ti2v_5B_fp16` (diffusion_models), `wan2.2_vae` (vae), `umt5_xxl_*` (text_encoders, type "
        "wan) and a start image.\n\nReused across seeds: both text encodings and the start latent from "
        "Wan22ImageToVideoLatent (the Wan 2.2 VAE encode of the start image). For text-to-video, delete the "
        "LoadImage link.")
    qwen = {fm.QWEN_TEXT_ENCODER: "qwen_2.5_vl_7b_fp8_scaled.safetensors", fm.QWEN_IMAGE_VAE: "qwen_image_vae.safetensors"}
    p = fg.qwen_t2i(seed=42, prompt_text="A cozy bookshop window at night with a hand-painted sign that says 'Open'",
                    negative_text="", cache_name="qwen_t2i", width=1328, height=1328, steps=20, cfg=2.5, shift=3.1,
                    filename_prefix="qwen_image/t2i")
    ex["qwen_image_t2i_reuse"] = (fg.to_stock(p, {**qwen, fm.QWEN_IMAGE: "qwen_image_fp8_e4m3fn.safetensors"}),
                                  "## Qwen-Image text-to-image with Encoder Reuse\n\n"
                                  "Pick `qwen_image_*` (diffusion_models), `qwen_2.5_vl_7b_*` (text_encoders, type "
                                  "qwen_image) and `qwen_image_vae` (vae).\n\nThe Qwen2.5-VL 7B encoder runs once per "
                                  "prompt; new seeds reuse its output from the shared cache.")
    p = fg.qwen_edit("example.png", seed=42, prompt_text="Replace the sky with a starry night; keep everything else",
                     negative_text="", cache_name="qwen_edit", megapixels=1.0, steps=20, cfg=2.5, shift=3.0,
                     filename_prefix="qwen_image/edit")
    ex["qwen_image_edit_reuse"] = (fg.to_stock(p, {**qwen, fm.QWEN_IMAGE: "qwen_image_edit_fp8_e4m3fn.safetensors"}),
                                   "## Qwen-Image-Edit with Encoder Reuse\n\n"
                                   "Pick `qwen_image_edit_*` (diffusion_models), `qwen_2.5_vl_7b_*` (text_encoders, "
                                   "type qwen_image), `qwen_image_vae` (vae) and the image to edit.\n\nReused: both "
                                   "TextEncodeQwenImageEdit outputs (the multimodal encoding of prompt + image, with "
                                   "the image's reference latent) and the VAE latent of the input image.")
    p = fg.infinitetalk_segments("example.png", seed=42, prompt_text="A woman is talking to the camera, natural "
                                 "head movement", cache_name="infinitetalk", F=81, M=9, total_frames=0, fps=25.0,
                                 width=832, height=480, steps=20, cfg=1.0, taps=False,
                                 filename_prefix="video/infinitetalk")
    ex["infinitetalk_segment_reuse"] = (fg.to_stock(p, {
        **WAN_FILES, tm.I2V: "Wan2_1-I2V-14B-480p_fp8_e4m3fn_scaled_KJ.safetensors",
        tm.AUDIO_ENCODER: "wav2vec2-chinese-base_fp16.safetensors",
        fm.INFINITETALK_PATCH: "wan2.1_infiniteTalk_single_fp16.safetensors"}, audio_file="speech.wav"),
        "## InfiniteTalk long video with Segment Reuse\n\n"
        "Needs a ComfyUI with WanInfiniteTalkToVideo and ModelPatchLoader (InfiniteTalk support). Pick the Wan 2.1 "
        "I2V 14B model, `wan2.1_infiniteTalk_single_*` (model_patches), `wav2vec2-*` (audio_encoders), `umt5_xxl_*`, "
        "`clip_vision_h`, the Wan 2.1 VAE, a reference image and the speech (`speech.wav` is a 10 s test track "
        "in the pack's `example_workflows/inputs/`: copy it to ComfyUI's `input/` folder, or load your own).\n\n"
        "The audio encoder runs **once, outside the loop**, on the whole track; its output goes through "
        "**Encode or Reuse** (slot `audio_features`) into Segment Loop Start's `audio_features`. The loop makes "
        "segments of 81 frames joined by 9 motion frames until the audio ends; each segment's "
        "WanInfiniteTalkToVideo takes the loop's `segment_audio_features` (the features cut to that segment's "
        "frames) and continues from the loop's `motion_frames` (previous_frames, motion_frame_count = 9).\n\n"
        "Keep that wiring: the node starts its audio window at previous_frames length minus motion_frame_count, "
        "which is 0 only when previous_frames is the loop's motion_frames and motion_frame_count equals the "
        "loop's motion_frames (9). Connecting the whole-track features to the node instead would give every "
        "segment the audio of the first one.\n\n"
        "**Change the seed and try again, keeping the start:** set `reuse_prefix_segments` on the Session to N "
        "(or click segment N on the timeline of Segment Loop Start, right of this note): "
        "the first N segments of the previous video are kept bit-exactly and generation resumes at segment N. "
        "Text, CLIP vision and the audio features are reused from the cache on any worker (no audio encoder "
        "run).\n\n"
        "Keep the KSampler's cfg at 1 (the official template's): ComfyUI 0.33's WanInfiniteTalkToVideo does not "
        "batch its audio embeddings, so cfg above 1 fails at the first step. For the lightx2v distill LoRA of "
        "the official template, put LoraLoaderModelOnly after UNETLoader and use 6 steps.")
    from .. import _gen_image_family_models as gen
    p = fg.zimage_turbo(seed=42, prompt_text="A lighthouse on a rocky coast at golden hour, waves breaking, "
                        "warm cinematic light", cache_name="zimage_turbo", width=1024, height=1024, steps=8,
                        filename_prefix="z-image-turbo")
    ex["zimage_turbo_reuse"] = (fg.to_stock(p, {
        gen.ZIMAGE: "z_image_turbo_bf16.safetensors", gen.FLUX_AE: "ae.safetensors",
        "standin_qwen3_4b.safetensors": "qwen_3_4b.safetensors"}),
        "## Z-Image Turbo with Encoder Reuse\n\n"
        "Pick `z_image_turbo_bf16` (diffusion_models), `qwen_3_4b` (text_encoders, type lumina2) and `ae` (vae), "
        "as in ComfyUI's Z-Image Turbo template.\n\nThe Qwen3 4B text encoder (about 8 GB in 16-bit) runs once "
        "per prompt on any worker that shares the cache root; changing the seed samples again without loading "
        "it. The negative is the positive zeroed out, as in the official template (its cfg is 1).")
    return ex


FRONTEND_VERSION = "1.32.9"
COMFY_VERSION = "0.3.75"
PACK_CNR_ID = example_files.PACK_CNR_ID
PACK_VERSION = "0.1.0"
_HF = "https://huggingface.co"
_W21 = f"{_HF}/Comfy-Org/Wan_2.1_ComfyUI_repackaged/resolve/main/split_files"
_W22 = f"{_HF}/Comfy-Org/Wan_2.2_ComfyUI_Repackaged/resolve/main/split_files"
_QI = f"{_HF}/Comfy-Org/Qwen-Image_ComfyUI/resolve/main/split_files"
_ZI = f"{_HF}/Comfy-Org/z_image_turbo/resolve/main/split_files"
MODEL_URLS = {   # file -> (folder, url), as the official templates list them
    "umt5_xxl_fp8_e4m3fn_scaled.safetensors": ("text_encoders", f"{_W21}/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors"),
    "wan_2.1_vae.safetensors": ("vae", f"{_W21}/vae/wan_2.1_vae.safetensors"),
    "clip_vision_h.safetensors": ("clip_vision", f"{_W21}/clip_vision/clip_vision_h.safetensors"),
    "wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors":
        ("diffusion_models", f"{_W22}/diffusion_models/wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors"),
    "wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors":
        ("diffusion_models", f"{_W22}/diffusion_models/wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors"),
    "wan2.2_ti2v_5B_fp16.safetensors": ("diffusion_models", f"{_W22}/diffusion_models/wan2.2_ti2v_5B_fp16.safetensors"),
    "wan2.2_vae.safetensors": ("vae", f"{_W22}/vae/wan2.2_vae.safetensors"),
    "qwen_image_fp8_e4m3fn.safetensors": ("diffusion_models", f"{_QI}/diffusion_models/qwen_image_fp8_e4m3fn.safetensors"),
    "qwen_image_edit_fp8_e4m3fn.safetensors":
        ("diffusion_models", f"{_HF}/Comfy-Org/Qwen-Image-Edit_ComfyUI/resolve/main/split_files/diffusion_models/"
                             "qwen_image_edit_fp8_e4m3fn.safetensors"),
    "qwen_2.5_vl_7b_fp8_scaled.safetensors": ("text_encoders", f"{_QI}/text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors"),
    "qwen_image_vae.safetensors": ("vae", f"{_QI}/vae/qwen_image_vae.safetensors"),
    "Wan2_1-I2V-14B-480p_fp8_e4m3fn_scaled_KJ.safetensors":
        ("diffusion_models", f"{_HF}/Kijai/WanVideo_comfy_fp8_scaled/resolve/main/I2V/"
                             "Wan2_1-I2V-14B-480p_fp8_e4m3fn_scaled_KJ.safetensors"),
    "wan2.1_infiniteTalk_single_fp16.safetensors":
        ("model_patches", f"{_W21}/model_patches/wan2.1_infiniteTalk_single_fp16.safetensors"),
    "z_image_turbo_bf16.safetensors": ("diffusion_models", f"{_ZI}/diffusion_models/z_image_turbo_bf16.safetensors"),
    "qwen_3_4b.safetensors": ("text_encoders", f"{_ZI}/text_encoders/qwen_3_4b.safetensors"),
    "ae.safetensors": ("vae", f"{_ZI}/vae/ae.safetensors"),
    "wav2vec2-chinese-base_fp16.safetensors":
        ("audio_encoders", f"{_HF}/Kijai/wav2vec2_safetensors/resolve/main/wav2vec2-chinese-base_fp16.safetensors"),
}
# The view a workflow opens with (extra.ds): readable (LiteGraph draws titles and widget text from
# 0.6 on), the note's corner near the screen's top-left, the note and the first nodes in view on a
# 1280x800 window.
VIEW_SCALE, VIEW_AT = 0.8, (80.0, 150.0)
NOTE_WIDTH, NOTE_GAP = 1160.0, 80.0   # the note sits above the first nodes, as tall as its text
# A segment example's Segment Loop Start (its timeline shows the segments before the first run)
# sits beside a narrower note, above the graph, so the timeline is in view too; BAND_DROP lower
# than the note's top, so its badges (drawn above its title) clear the canvas' Run toolbar. Node
# heights are those the taller canvas mode draws (example_layout.py), and no two nodes meet.
BAND_NOTE_WIDTH, BAND_GAP, BAND_DROP = 800.0, 40.0, 40.0
BANDED = ("SeedReuseSegmentLoopStart",)


def note_box(note: str, width: float = NOTE_WIDTH, band: float = 0.0) -> tuple[tuple[float, float], tuple[float, float]]:
    """(pos, size) of the note: its height estimated from the text (about 190 characters a line
    at the full width), its bottom NOTE_GAP above the graph (the first nodes' bodies start at 0),
    or the band's bottom (`band`: the height of the nodes beside the note, from its top) if that is
    lower."""
    per_line = max(40, int(190 * width / NOTE_WIDTH))
    paragraphs = [p for p in note.split("\n\n") if p.strip()]
    lines = sum(-(-len(p) // per_line) for p in paragraphs)
    h = float(min(520, 70 + 17 * lines + 12 * len(paragraphs)))
    return (0.0, -(max(h, band) + NOTE_GAP)), (width, h)
# palette of the ComfyUI canvas: (color, bgcolor)
GREEN, RED, CYAN, YELLOW = ("#232", "#353"), ("#322", "#533"), ("#233", "#355"), ("#432", "#653")


def _spec(object_info: dict, class_type: str) -> dict:
    if class_type in object_info:
        return object_info[class_type]
    if class_type in NEWER_NODES:
        return NEWER_NODES[class_type]
    raise KeyError(f"no node spec for {class_type}")


def _input_specs(spec: dict, values: dict | None = None, prefix: str = ""):
    """[(name, type, options, optional, choices)] in the host's input order (hidden left out). A
    dynamic combo (0.33's io.DynamicCombo) is followed by the inputs of the option ``values``
    selects, named ``<combo>.<input>`` as the API sends them; a multi-type input ("FLOAT,INT")
    has its widget's type."""
    out = []
    for section in ("required", "optional"):
        specs = spec.get("input", {}).get(section) or {}
        for name in (spec.get("input_order") or {}).get(section, list(specs)):
            s = specs[name]
            opts = dict(s[1]) if len(s) > 1 and isinstance(s[1], dict) else {}
            choices = s[0] if isinstance(s[0], list) else opts.get("options")
            t = "COMBO" if isinstance(s[0], list) else s[0]
            if isinstance(t, str) and "," in t and opts.get("widgetType"):
                opts["slot_type"], t = t, opts["widgetType"]     # the canvas keeps "FLOAT,INT" on the slot
            out.append((prefix + name, t, opts, section == "optional", choices))
            if t == "COMFY_DYNAMICCOMBO_V3":
                chosen = (values or {}).get(prefix + name, opts.get("default"))
                option = next((o for o in choices or [] if isinstance(o, dict) and o.get("key") == chosen), None)
                if option is not None:
                    out += _input_specs({"input": option.get("inputs") or {}}, values, f"{prefix}{name}.")
    return out


def _is_widget(t: str, opts: dict) -> bool:
    return t in WIDGET_TYPES and not opts.get("forceInput")


def _depths(prompt: dict) -> dict:
    memo: dict = {}

    def depth(nid):
        if nid not in memo:
            memo[nid] = 0
            ups = [v[0] for v in prompt[nid]["inputs"].values() if _is_link(v) and v[0] in prompt]
            memo[nid] = 1 + max((depth(u) for u in ups), default=-1)
        return memo[nid]

    for nid in prompt:
        depth(nid)
    return memo


def _is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int)


def _color(class_type: str, title: str | None):
    if class_type.startswith("SeedReuseEncode") or class_type == "SeedReuseSession":
        return CYAN
    if class_type.startswith("SeedReuseSegmentLoop") or class_type in ("SeedReuseBoundarySave", "SeedReusePrefixMerge"):
        return CYAN
    if class_type in ("CLIPTextEncode", "TextEncodeQwenImageEdit"):
        return RED if (title or "").lower().startswith("negative") else GREEN
    return None


def to_ui(name: str, prompt: dict, note: str, object_info: dict) -> dict:
    """The LiteGraph workflow (what the canvas of frontend 1.32 saves) of an API-format prompt:
    sockets first, then one input slot per widget (linked widgets carry the link), widgets_values
    in the host's order with the frontend-only values (control_after_generate, upload)."""
    ids = sorted(prompt, key=int)
    nodes, links = {}, []
    for nid in ids:
        spec = _spec(object_info, prompt[nid]["class_type"])
        nodes[nid] = {"outputs": [{"localized_name": n, "name": n, "type": t, "links": []}
                                  for t, n in zip(spec["output"], spec["output_name"])]}
    for nid in ids:
        node, ui = prompt[nid], nodes[nid]
        ct = node["class_type"]
        spec = _spec(object_info, ct)
        specs = _input_specs(spec, node["inputs"])
        unknown = set(node["inputs"]) - {s[0] for s in specs}
        if unknown:
            raise KeyError(f"{name}: {ct} has no inputs {sorted(unknown)}")
        slots, values, multiline = [], [], False
        for iname, t, opts, optional, _ in specs:       # sockets
            if _is_widget(t, opts):
                continue
            slot = {"localized_name": iname, "name": iname, "type": t, "link": None}
            if optional:
                slot["shape"] = 7
            slots.append((slot, node["inputs"].get(iname)))
            if node["inputs"].get(iname) is None and not optional:
                raise ValueError(f"{name}: node {nid} {ct} has no {iname}")
        for iname, t, opts, optional, choices in specs:  # widgets
            if not _is_widget(t, opts):
                continue
            value = node["inputs"].get(iname)
            linked = _is_link(value)
            shown = opts.get("default") if linked or value is None else value
            if shown is None and t in ("COMBO", "COMFY_DYNAMICCOMBO_V3"):
                shown = (choices or [None])[0]
                shown = shown.get("key") if isinstance(shown, dict) else shown
            if shown is None and t == "STRING":
                shown = ""                 # a linked text widget without a default: the canvas saves ""
            slot = {"localized_name": iname, "name": iname, "type": opts.get("slot_type", t), "widget": {"name": iname},
                    "link": None}
            if optional:
                slot["shape"] = 7
            slots.append((slot, value if linked else None))
            values.append(shown)
            multiline |= bool(opts.get("multiline"))
            if opts.get("image_upload"):
                slots.append(({"localized_name": "choose file to upload", "name": "upload", "type": "IMAGEUPLOAD",
                               "widget": {"name": "upload"}, "link": None}, None))
            if opts.get("audio_upload"):
                slots.append(({"localized_name": "audioUI", "name": "audioUI", "type": "AUDIO_UI",
                               "widget": {"name": "audioUI"}, "link": None}, None))
                slots.append(({"localized_name": "choose file to upload", "name": "upload", "type": "AUDIOUPLOAD",
                               "widget": {"name": "upload"}, "link": None}, None))
            if t in ("INT", "COMBO") and opts.get("control_after_generate",
                                                  t == "INT" and iname in ("seed", "noise_seed")):   # not "x.seed"
                fixed = linked or (iname == "noise_seed" and node["inputs"].get("add_noise") == "disable")
                values.append("fixed" if fixed else "randomize")
            if opts.get("image_upload"):
                values.append("image")
            if opts.get("audio_upload"):
                values += [None, None]
        inputs = []
        for i, (slot, src) in enumerate(slots):
            if src is not None:
                lid = len(links) + 1
                out = nodes[src[0]]["outputs"][src[1]]
                out["links"].append(lid)
                slot["link"] = lid
                links.append([lid, int(src[0]), src[1], int(nid), i, out["type"]])
            inputs.append(slot)
        title = (node.get("_meta") or {}).get("title")
        if ct.startswith("SeedReuse") and not ct.startswith("SeedReuseEncode"):
            title = None   # the node's own display name, as in every other example
        core = not ct.startswith("SeedReuse")
        props = {"cnr_id": "comfy-core" if core else PACK_CNR_ID, "ver": COMFY_VERSION if core else PACK_VERSION,
                 "Node name for S&R": ct}
        models = [v for v in node["inputs"].values() if isinstance(v, str) and v in MODEL_URLS]
        if models:
            props["models"] = [{"name": m, "url": MODEL_URLS[m][1], "directory": MODEL_URLS[m][0]} for m in models]
        sockets = sum(1 for s in inputs if "widget" not in s)
        h = 30 + 22 * max(sockets, len(ui["outputs"])) + 26 * len(values) + (120 if multiline else 0) + \
            (250 if ct == "LoadImage" else 0)
        ui.update({"id": int(nid), "type": ct, "pos": [0.0, 0.0], "size": [420.0 if multiline else 340.0, float(h)],
                   "flags": {}, "order": 0, "mode": 0, "inputs": inputs, "outputs": ui["outputs"]})
        if title:
            ui["title"] = title
        ui["properties"] = props
        ui["widgets_values"] = values
        color = _color(ct, title)
        if color:
            ui["color"], ui["bgcolor"] = color
    for ui in nodes.values():
        for o in ui["outputs"]:
            o["links"] = o["links"] or None
    # layout: one column per depth, stacked in id order, each node example_layout.GAP below the
    # one above as drawn; order = a topological order. The banded nodes (Segment Loop Start) go
    # above the graph, right of the note.
    depths = _depths(prompt)
    col_y: dict = {}
    banded = [nid for nid in ids if prompt[nid]["class_type"] in BANDED]
    for order, nid in enumerate(sorted(ids, key=lambda n: (depths[n], int(n)))):
        nodes[nid]["order"] = order
        if nid in banded:
            continue
        d = depths[nid]
        y = col_y.get(d, 0.0)
        nodes[nid]["pos"] = [float(d * 460), y]
        col_y[d] = y + example_layout.body_height(nodes[nid]) + example_layout.GAP + example_layout.TITLE_H
    next_id = max(int(n) for n in ids) + 1
    band_h = BAND_DROP + max((example_layout.body_height(nodes[n]) for n in banded), default=0.0)
    note_pos, note_size = note_box(note, BAND_NOTE_WIDTH, band_h) if banded else note_box(note)
    x = note_size[0] + BAND_GAP
    for nid in banded:
        nodes[nid]["pos"] = [x, note_pos[1] + BAND_DROP]
        x += nodes[nid]["size"][0] + BAND_GAP
    note_node = {"id": next_id, "type": "MarkdownNote", "pos": list(note_pos), "size": list(note_size), "flags": {},
                 "order": len(ids), "mode": 0, "inputs": [], "outputs": [], "title": "How to use",
                 "properties": {}, "widgets_values": [note], "color": YELLOW[0], "bgcolor": YELLOW[1]}
    out_nodes = [nodes[n] for n in ids] + [note_node]
    out_nodes.sort(key=lambda d: d["id"])
    met = example_layout.overlaps(out_nodes, example_layout.GAP)
    if met:
        raise ValueError(f"{name}: nodes meet (example_layout.py): {met}")
    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"seedreuse/example_workflows/{name}")),
        "revision": 0, "last_node_id": next_id, "last_link_id": len(links),
        "nodes": out_nodes, "links": links, "groups": [], "config": {},
        "extra": {"ds": {"scale": VIEW_SCALE, "offset": [round(VIEW_AT[0] / VIEW_SCALE - note_pos[0], 1),
                                                         round(VIEW_AT[1] / VIEW_SCALE - note_pos[1], 1)]},
                  "frontendVersion": FRONTEND_VERSION, example_files.PAIRING_KEY: example_files.pairing(name)},
        "version": 0.4,
    }


# id (the API twin's name) -> title: the UI file's name, so the template browser's card title and
# description, and the thumbnail's caption
TITLES = {"wan22_two_expert_reuse": "Wan 2.2 two experts, reuse the text encoding",
          "wan22_ti2v_5b_reuse": "Wan 2.2 TI2V 5B, reuse text and start image",
          "qwen_image_t2i_reuse": "Qwen-Image text to image, reuse the text encoding",
          "qwen_image_edit_reuse": "Qwen-Image-Edit, reuse prompt and image encodings",
          "infinitetalk_segment_reuse": "InfiniteTalk long video, keep the first N segments",
          "zimage_turbo_reuse": "Z-Image Turbo, reuse the text encoding",
          **video_examples.TITLES}
FILES = example_files.file_names(TITLES)   # id -> (UI file, thumbnail, API twin)


def render_thumbnail(ui: dict, title: str, path: Path, size=(512, 512)) -> None:
    """A small JPEG of the graph (boxes and links) with the title: the template browser's preview."""
    from PIL import Image, ImageDraw

    W, H = size
    img = Image.new("RGB", size, (24, 24, 27))
    d = ImageDraw.Draw(img)
    graph = [n for n in ui["nodes"] if n["type"] != "MarkdownNote"]
    x0 = min(n["pos"][0] for n in graph)
    y0 = min(n["pos"][1] for n in graph)
    x1 = max(n["pos"][0] + n["size"][0] for n in graph)
    y1 = max(n["pos"][1] + n["size"][1] for n in graph)
    top, margin = example_files.draw_caption(img, title), 14
    s = min((W - 2 * margin) / (x1 - x0), (H - top - margin) / (y1 - y0))
    ox = margin + ((W - 2 * margin) - (x1 - x0) * s) / 2
    oy = top + ((H - top - margin) - (y1 - y0) * s) / 2

    def P(x, y):
        return ox + (x - x0) * s, oy + (y - y0) * s

    def rgb(c):
        c = c.lstrip("#")
        c = "".join(ch * 2 for ch in c) if len(c) == 3 else c
        return tuple(int(c[i:i + 2], 16) for i in (0, 2, 4))

    byid = {n["id"]: n for n in graph}
    for _, a, ao, b, bi, t in ui["links"]:
        na, nb = byid[a], byid[b]
        sx, sy = P(na["pos"][0] + na["size"][0], na["pos"][1] + 30 + 20 * ao)
        ex, ey = P(nb["pos"][0], nb["pos"][1] + 30 + 20 * bi)
        d.line([(sx, sy), (ex, ey)], fill=(80, 220, 200) if t.startswith("SEEDREUSE") else (150, 150, 160), width=1)
    for n in graph:
        (ax, ay), (bx, by) = P(*n["pos"]), P(n["pos"][0] + n["size"][0], n["pos"][1] + n["size"][1])
        d.rectangle([ax, ay, bx, by], fill=rgb(n.get("bgcolor", "#353535")), outline=(12, 12, 12))
        d.rectangle([ax, ay, bx, min(by, ay + max(3, 30 * s))], fill=rgb(n.get("color", "#222222")))
        if n["type"].startswith("SeedReuse"):
            d.rectangle([ax - 1, ay - 1, bx + 1, by + 1], outline=(80, 220, 200), width=2)
    img.save(path, "JPEG", quality=88, optimize=True)


def build_examples(object_info: dict) -> dict[str, tuple[dict, dict]]:
    """name -> (UI workflow, API-format prompt); the video families' examples only on a host that
    has their nodes (video_examples.py)."""
    info = portable_examples.saved_object_info(object_info)
    video = video_examples.graphs(object_info)
    if video:
        MODEL_URLS.update({k: v for k, v in video_examples.model_urls().items() if k not in MODEL_URLS})
    out = {}
    for name, (api, note) in {**example_graphs(), **video}.items():
        api = portable_examples.without_newer_inputs(api)
        out[name] = (to_ui(name, api, note, info), portable_examples.with_newer_inputs(api))
    return out


def dumps(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def write_examples(object_info: dict, out_dir: Path = OUT, thumbnails: bool = True) -> list[Path]:
    written = []
    (out_dir / "api").mkdir(parents=True, exist_ok=True)
    for name, (ui, api) in build_examples(object_info).items():
        ui_file, thumb, api_file = FILES[name]
        for path, obj in ((out_dir / ui_file, ui), (out_dir / api_file, api)):
            path.write_text(dumps(obj))
            written.append(path)
        if thumbnails:
            render_thumbnail(ui, TITLES[name], out_dir / thumb)
            written.append(out_dir / thumb)
    return written


def main(argv: list[str]) -> int:
    src = argv[1]
    if src.startswith("http"):
        import urllib.request
        with urllib.request.urlopen(src.rstrip("/") + "/object_info", timeout=60) as r:
            object_info = json.loads(r.read())
    else:
        object_info = json.loads(Path(src).read_text())
    for p in write_examples(object_info):
        print(p.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
