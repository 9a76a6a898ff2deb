"""What the instrumenter knows about node classes without asking a host.

Where a class is sampled from a seed, patches the model, loads or encodes; which output types
an Encode-or-Reuse variant can carry; and the output types of common classes (an API-format
prompt names no types: a host's /object_info, when given, takes precedence over this table).
"""
from __future__ import annotations

PACK_PREFIX = "SeedReuse"
SESSION = "SeedReuseSession"
SESSION_TYPE = "SEEDREUSE_SESSION"
ENCODE_PREFIX = "SeedReuseEncode"

# value type -> Encode-or-Reuse variant (nodes/encode_nodes.py VARIANTS)
VARIANTS = {
    "CONDITIONING": "SeedReuseEncodeConditioning",
    "CLIP_VISION_OUTPUT": "SeedReuseEncodeClipVision",
    "LATENT": "SeedReuseEncodeLatent",
    "AUDIO_ENCODER_OUTPUT": "SeedReuseEncodeAudioFeatures",
    "IMAGE": "SeedReuseEncodeImage",
    "AUDIO": "SeedReuseEncodeAudio",
    "STRING": "SeedReuseEncodeText",
}

# Nodes that sample (their outputs depend on a seed or noise) or run the pack's segment loop:
# the wrap point is always before them.
SAMPLERS = frozenset({
    "KSampler", "KSamplerAdvanced", "SamplerCustom", "SamplerCustomAdvanced",
    "SeedReuseSegmentLoopStart", "SeedReuseSegmentLoopEnd", "SeedReuseBoundarySave", "SeedReusePrefixMerge",
})
# Nodes that patch the model together with their conditioning outputs: their outputs are tied to
# the model patch, so the wrap point is at their inputs (any class with a MODEL input and a MODEL
# output next to a value output is treated the same way).
MODEL_PATCHERS = frozenset({"WanInfiniteTalkToVideo"})

# a V3 match-type socket (ComfySwitchNode): the output has the type of what is linked to its
# match-type inputs (api_format resolves it from the host's /object_info, as the canvas does)
MATCH_TYPE = "COMFY_MATCHTYPE_V3"
KNOWN_MATCH_INPUTS = {"ComfySwitchNode": ("on_false", "on_true")}

SEED_INPUTS = frozenset({"seed", "noise_seed"})
NOISE_TYPES = frozenset({"NOISE"})
# A node that takes one of these runs an encoder (or a loader's model) on its inputs.
ENCODER_MODEL_TYPES = frozenset({"CLIP", "CLIP_VISION", "VAE", "AUDIO_ENCODER"})
# Outputs the instrumenter never wraps and never walks back through (models, their loaders'
# products, primitives, sampler parts): no reuse is lost by leaving them as they are. A STRING is
# wrapped only where an encoder made it (a prompt enhancer's text: TextGenerate,
# TextGenerateLTX2Prompt), like every variant's type: the wrap needs an encoder upstream.
SILENT_TYPES = frozenset({
    "MODEL", "CLIP", "VAE", "CLIP_VISION", "AUDIO_ENCODER", "CONTROL_NET", "UPSCALE_MODEL", "MODEL_PATCH",
    "STYLE_MODEL", "GLIGEN", "LORA_MODEL", "LATENT_UPSCALE_MODEL", "INT", "FLOAT", "BOOLEAN", "COMBO", "SIGMAS",
    "SAMPLER", "NOISE", "MASK", "VIDEO", "*", SESSION_TYPE,
})
# Output nodes (the host's /object_info says "output_node"; without it, these): they run on every
# request, so a language model's text they read directly (a PreviewAny of a prompt enhancer's
# text) is wrapped before them, as before a sampler.
OUTPUT_NODES = frozenset({
    "SaveImage", "PreviewImage", "SaveVideo", "SaveWEBM", "SaveAnimatedWEBP", "SaveAnimatedPNG", "PreviewAny",
    "SaveAudio", "SaveAudioMP3", "SaveAudioOpus", "PreviewAudio", "SaveLatent", "SaveText",
})

_C, _L = "CONDITIONING", "LATENT"
KNOWN_OUTPUTS: dict[str, list[str]] = {
    "CLIPTextEncode": [_C], "CLIPVisionEncode": ["CLIP_VISION_OUTPUT"], "VAEEncode": [_L],
    "VAEEncodeForInpaint": [_L], "VAEEncodeTiled": [_L], "WanImageToVideo": [_C, _C, _L],
    "WanFirstLastFrameToVideo": [_C, _C, _L], "WanVaceToVideo": [_C, _C, _L, "INT"],
    "Wan22ImageToVideoLatent": [_L], "TextEncodeQwenImageEdit": [_C], "TextEncodeQwenImageEditPlus": [_C],
    "AudioEncoderEncode": ["AUDIO_ENCODER_OUTPUT"], "ConditioningZeroOut": [_C], "ConditioningCombine": [_C],
    "ConditioningConcat": [_C], "ConditioningSetTimestepRange": [_C], "FluxGuidance": [_C],
    "ReferenceLatent": [_C], "CLIPLoader": ["CLIP"], "DualCLIPLoader": ["CLIP"], "CLIPSetLastLayer": ["CLIP"],
    "CLIPVisionLoader": ["CLIP_VISION"], "VAELoader": ["VAE"], "UNETLoader": ["MODEL"],
    "CheckpointLoaderSimple": ["MODEL", "CLIP", "VAE"], "AudioEncoderLoader": ["AUDIO_ENCODER"],
    "LoadImage": ["IMAGE", "MASK"], "LoadAudio": ["AUDIO"], "ImageScale": ["IMAGE"],
    "ImageScaleToTotalPixels": ["IMAGE"], "WanInfiniteTalkToVideo": ["MODEL", _C, _C, _L, "INT"],
    "KSampler": [_L], "KSamplerAdvanced": [_L], "SamplerCustom": [_L, _L], "SamplerCustomAdvanced": [_L, _L],
    "RandomNoise": ["NOISE"], "CFGGuider": ["GUIDER"], "BasicGuider": ["GUIDER"], "KSamplerSelect": ["SAMPLER"],
    "BasicScheduler": ["SIGMAS"], "EmptyHunyuanLatentVideo": [_L], "EmptyLatentImage": [_L],
    "EmptySD3LatentImage": [_L], "ModelSamplingSD3": ["MODEL"], "ModelSamplingAuraFlow": ["MODEL"],
    "LoraLoaderModelOnly": ["MODEL"], "LoraLoader": ["MODEL", "CLIP"], "CFGNorm": ["MODEL"],
    "VAEDecode": ["IMAGE"], "CreateVideo": ["VIDEO"], "SaveVideo": [], "SaveImage": [], "PreviewImage": [],
    "SeedReuseSession": [SESSION_TYPE],
    # ComfyUI 0.33's video families and prompt enhancers (LTX-2, MiniMax H3, HunyuanVideo 1.5)
    "TextGenerate": ["STRING"], "TextGenerateLTX2Prompt": ["STRING"], "PreviewAny": ["STRING"],
    "ComfySwitchNode": [MATCH_TYPE], "LTXVConditioning": [_C, _C], "LTXVImgToVideoInplace": [_L],
    "LTXVConcatAVLatent": [_L], "LTXVSeparateAVLatent": [_L, _L], "LTXVAddGuide": [_C, _C, _L],
    "LTXVCropGuides": [_C, _C, _L], "LTXVPreprocess": ["IMAGE"], "LTXVEmptyLatentAudio": [_L],
    "EmptyLTXVLatentVideo": [_L], "LTXAVTextEncoderLoader": ["CLIP"], "LTXVAudioVAELoader": ["VAE"],
    "LTXVAudioVAEDecode": ["AUDIO"], "LTXVLatentUpsampler": [_L], "LatentUpscaleModelLoader": ["LATENT_UPSCALE_MODEL"],
    "MiniMaxH3ImageToVideo": [_C, _L], "MiniMaxH3ReferenceToVideo": [_C, _L], "MiniMaxH3AddGuide": [_C],
    "HunyuanVideo15ImageToVideo": [_C, _C, _L], "HunyuanVideo15SuperResolution": [_C, _C, _L],
    "EmptyHunyuanVideo15Latent": [_L],
    **{variant: [t, "STRING"] for t, variant in VARIANTS.items()},
}


# The pack's own node classes (nodes/__init__.py NODES; tests/test_auto_mode.py compares them with
# a worker's). Exact names, not the prefix: another pack's "SeedReuse..." classes (the test
# stand-ins, SeedReuseTest*) are ordinary nodes to the instrumenter.
PACK_NODES = frozenset({SESSION, *VARIANTS.values(), "SeedReuseSegmentLoopStart", "SeedReuseSegmentLoopEnd",
                        "SeedReuseSegmentPrompt", "SeedReuseBoundarySave", "SeedReusePrefixMerge"})


def is_pack(class_type: str) -> bool:
    return isinstance(class_type, str) and class_type in PACK_NODES


def is_wrapper(class_type: str) -> bool:
    return isinstance(class_type, str) and class_type in PACK_NODES and class_type.startswith(ENCODE_PREFIX)


def is_boundary(class_type: str, in_types, out_types) -> bool:
    """Sampling or model patching: nothing at or after this node is seed-independent."""
    if class_type in SAMPLERS or class_type in MODEL_PATCHERS:
        return True
    outs = [t for t in (out_types or []) if t]
    return "MODEL" in set(in_types or ()) and "MODEL" in outs and any(t in VARIANTS for t in outs)


def is_output_node(info: dict | None, class_type: str) -> bool:
    """An output node: from a host's /object_info (``output_node``), else the table."""
    schema = (info or {}).get(class_type)
    if isinstance(schema, dict) and "output_node" in schema:
        return schema.get("output_node") is True
    return class_type in OUTPUT_NODES


def output_types_from_info(info: dict | None, class_type: str) -> list[str] | None:
    """Output types of a class from a host's /object_info (``output`` list), else the table."""
    schema = (info or {}).get(class_type)
    if isinstance(schema, dict) and isinstance(schema.get("output"), list):
        return ["COMBO" if isinstance(t, list) else str(t) for t in schema["output"]]
    known = KNOWN_OUTPUTS.get(class_type)
    return list(known) if known is not None else None


def output_names_from_info(info: dict | None, class_type: str) -> list[str] | None:
    schema = (info or {}).get(class_type)
    if isinstance(schema, dict) and isinstance(schema.get("output_name"), list):
        return [str(n) for n in schema["output_name"]]
    return None
