"""Stand-in loaders of the image and audio families' text encoders (tests/families), returning
``StandInCLIP`` (standin_clip.py: the host's tokenizer, the real encoder's output structure and
shapes) for the encoders the host fixes at full size.

Which encoder a file stands for is read from the placeholder (``{"standin": kind}``, as the real
loaders detect it from the weights) and the loader's ``type``; a checkpoint generated without
text-encoder weights names the encoders it leaves out (``{"standin_text": kind}``):
``SeedReuseTestCheckpointCLIPLoader`` returns them, so the stock CheckpointLoaderSimple still loads
its model and VAE and the encode side has a loader of its own that worker B can skip.
``SeedReuseTestTextEncodeQwenImageEditPlus`` is the stock TextEncodeQwenImageEditPlus with its two
fixed sizes (384x384 vision input, 1024x1024 reference latents) as inputs, so a test's reference
latents stay small for the one-block Qwen-Image. Loaders count ``text_loader``.
"""
from __future__ import annotations

import json
import math

import comfy.utils
import folder_paths
import node_helpers
from comfy_api.latest import io

from .standin_clip import ENCODERS, LOADER_KINDS, StandInCLIP
from .standins import _file_sha256, count

CLIP_TYPES = sorted({t for _, t in LOADER_KINDS})


def _file_meta(path: str) -> dict:
    from safetensors import safe_open

    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
    try:
        return json.loads(meta.get("seedreuse_test", "{}"))
    except ValueError:
        return {}


def _load(names: list[str], type_: str, node: str) -> StandInCLIP:
    count("text_loader")
    paths = [folder_paths.get_full_path_or_raise("text_encoders", n) for n in names]
    kinds = tuple(sorted(_file_meta(p).get("standin", "?") for p in paths))
    kind = LOADER_KINDS.get((kinds, type_))
    if kind is None:
        raise RuntimeError(f"{node}: no stand-in for the encoder files {names} (kinds {kinds}) with type {type_!r}")
    return StandInCLIP(kind, [_file_sha256(p) for p in paths])


_DEVICE = io.Combo.Input("device", options=["default", "cpu"], default="default", optional=True)


class SeedReuseTestCLIPLoader(io.ComfyNode):
    """CLIPLoader with a stand-in encoder (clip_name, type, device as the stock node)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestCLIPLoader", display_name="SeedReuse Test: Load CLIP (stand-in LLM text encoder)",
            category="SeedReuse/test",
            inputs=[io.Combo.Input("clip_name", options=folder_paths.get_filename_list("text_encoders")),
                    io.Combo.Input("type", options=CLIP_TYPES), _DEVICE],
            outputs=[io.Clip.Output()])

    @classmethod
    def execute(cls, clip_name, type, device="default"):
        return io.NodeOutput(_load([clip_name], type, "SeedReuseTestCLIPLoader"))


class SeedReuseTestDualCLIPLoader(io.ComfyNode):
    """DualCLIPLoader with stand-in encoders (clip_name1, clip_name2, type, device as the stock node)."""

    @classmethod
    def define_schema(cls):
        files = folder_paths.get_filename_list("text_encoders")
        return io.Schema(
            node_id="SeedReuseTestDualCLIPLoader", display_name="SeedReuse Test: DualCLIPLoader (stand-in encoders)",
            category="SeedReuse/test",
            inputs=[io.Combo.Input("clip_name1", options=files), io.Combo.Input("clip_name2", options=files),
                    io.Combo.Input("type", options=CLIP_TYPES), _DEVICE],
            outputs=[io.Clip.Output()])

    @classmethod
    def execute(cls, clip_name1, clip_name2, type, device="default"):
        return io.NodeOutput(_load([clip_name1, clip_name2], type, "SeedReuseTestDualCLIPLoader"))


class SeedReuseTestCheckpointCLIPLoader(io.ComfyNode):
    """The text encoders a generated checkpoint leaves out, as stand-ins (its CLIP output)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestCheckpointCLIPLoader",
            display_name="SeedReuse Test: the CLIP of a checkpoint (stand-in encoders)", category="SeedReuse/test",
            inputs=[io.Combo.Input("ckpt_name", options=folder_paths.get_filename_list("checkpoints"))],
            outputs=[io.Clip.Output()])

    @classmethod
    def execute(cls, ckpt_name):
        count("text_loader")
        path = folder_paths.get_full_path_or_raise("checkpoints", ckpt_name)
        kind = _file_meta(path).get("standin_text")
        if kind not in ENCODERS:
            raise RuntimeError(f"SeedReuseTestCheckpointCLIPLoader: {ckpt_name} names no stand-in text encoder")
        return io.NodeOutput(StandInCLIP(kind, [_file_sha256(path)]))


QWEN_EDIT_TEMPLATE = (
    "<|im_start|>system\nDescribe the key features of the input image (color, shape, size, texture, objects, "
    "background), then explain how the user's text instruction should alter or modify the image. Generate a new "
    "image that meets the user's requirements while maintaining consistency with the original input where "
    "appropriate.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n")


class SeedReuseTestTextEncodeQwenImageEditPlus(io.ComfyNode):
    """comfy_extras/nodes_qwen.py TextEncodeQwenImageEditPlus line for line, its two fixed sizes
    as inputs (vl_pixels: the vision input, 384x384 in the stock node; ref_pixels: the reference
    latents, 1024x1024)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestTextEncodeQwenImageEditPlus",
            display_name="SeedReuse Test: TextEncodeQwenImageEditPlus (sizes as inputs)", category="SeedReuse/test",
            inputs=[io.Clip.Input("clip"), io.String.Input("prompt", multiline=True, dynamic_prompts=True),
                    io.Vae.Input("vae", optional=True), io.Image.Input("image1", optional=True),
                    io.Image.Input("image2", optional=True), io.Image.Input("image3", optional=True),
                    io.Int.Input("vl_pixels", default=384 * 384, min=64, max=4096 * 4096),
                    io.Int.Input("ref_pixels", default=1024 * 1024, min=64, max=4096 * 4096)],
            outputs=[io.Conditioning.Output()])

    @classmethod
    def execute(cls, clip, prompt, vae=None, image1=None, image2=None, image3=None, vl_pixels=384 * 384,
                ref_pixels=1024 * 1024):
        ref_latents, images_vl, image_prompt = [], [], ""
        for i, image in enumerate([image1, image2, image3]):
            if image is None:
                continue
            samples = image.movedim(-1, 1)
            scale_by = math.sqrt(vl_pixels / (samples.shape[3] * samples.shape[2]))
            s = comfy.utils.common_upscale(samples, round(samples.shape[3] * scale_by),
                                           round(samples.shape[2] * scale_by), "area", "disabled")
            images_vl.append(s.movedim(1, -1))
            if vae is not None:
                scale_by = math.sqrt(ref_pixels / (samples.shape[3] * samples.shape[2]))
                width = round(samples.shape[3] * scale_by / 8.0) * 8
                height = round(samples.shape[2] * scale_by / 8.0) * 8
                s = comfy.utils.common_upscale(samples, width, height, "area", "disabled")
                ref_latents.append(vae.encode(s.movedim(1, -1)[:, :, :, :3]))
            image_prompt += "Picture {}: <|vision_start|><|image_pad|><|vision_end|>".format(i + 1)
        tokens = clip.tokenize(image_prompt + prompt, images=images_vl, llama_template=QWEN_EDIT_TEMPLATE)
        conditioning = clip.encode_from_tokens_scheduled(tokens)
        if ref_latents:
            conditioning = node_helpers.conditioning_set_values(conditioning, {"reference_latents": ref_latents},
                                                                append=True)
        return io.NodeOutput(conditioning)


IMAGE_FAMILY_NODES = [
    SeedReuseTestCLIPLoader,
    SeedReuseTestDualCLIPLoader,
    SeedReuseTestCheckpointCLIPLoader,
    SeedReuseTestTextEncodeQwenImageEditPlus,
]
