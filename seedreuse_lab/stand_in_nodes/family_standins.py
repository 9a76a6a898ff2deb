"""Stand-ins for the support matrix (tests/families): what cannot be tiny or is missing on 0.3.75.

* Qwen2.5-VL 7B (Qwen-Image's text encoder) has a fixed full-size config: stand-in loader and
  encoders with the exact output type and shape of CLIPTextEncode / TextEncodeQwenImageEdit
  (CONDITIONING ``[[tensor(1, L, 3584), {"pooled_output": None, ...}]]``; the edit encoder also
  VAE-encodes the image with the REAL VAE it is given and appends it as ``reference_latents``).
* ComfyUI 0.3.75 has no WanInfiniteTalkToVideo (and no InfiniteTalk model patch): a stand-in
  with the same inputs and outputs as the newer host's node and the same audio-window and
  motion-frame logic, which records the window it used (ui "infinitetalk"); the audio
  projection and the InfiniteTalk attention patch (weights of the patch model) are not run.
* SeedReuseTestTap: a pass-through that records describe(value) (ui "inspect"); unlike
  SeedReuseTestInspect it has an output, so it can sit inside a Segment Loop body and is
  copied with the body for every segment.

All counters go to standins.count (GET /seedreuse_test/counts): the text encoders count as
text_loader / text_encode like the Wan stand-ins.
"""
from __future__ import annotations

import hashlib
import math

import torch

import comfy.model_management
import comfy.utils
import folder_paths
import node_helpers
from comfy_api.latest import io

from .standins import StandInModel, _generator, _tensor_bytes, burn_cpu, count, describe, stand_in_loader

QWEN_DIM = 3584          # Qwen2.5-VL 7B hidden size (Qwen-Image joint_attention_dim)
QWEN_TEMPLATE_TAIL = 5   # tokens after the user text that survive the template crop (<|im_end|>\n...)
QWEN_VL_PATCH = 28       # 14 px patches merged 2x2: one vision token per 28x28 pixels
EDIT_TOTAL_PIXELS = 1024 * 1024   # TextEncodeQwenImageEdit scales the image to 1 MP

_MODEL_PATCH = getattr(io, "ModelPatch", None) or getattr(io, "MODEL_PATCH")


def _qwen_text_tokens(text: str) -> int:
    return len(text.split()) + QWEN_TEMPLATE_TAIL


def _qwen_cond(clip: StandInModel, text: str, image=None) -> torch.Tensor:
    n = _qwen_text_tokens(text)
    parts = ["qwen25_vl", clip.sha256, text]
    if image is not None:
        n += max(1, math.ceil(image.shape[1] / QWEN_VL_PATCH)) * max(1, math.ceil(image.shape[2] / QWEN_VL_PATCH))
        parts.append(_tensor_bytes(image))
    g = _generator(*parts)
    return torch.randn((1, n, QWEN_DIM), generator=g, dtype=torch.float32)


def _need(model, kind: str, node: str) -> None:
    if not isinstance(model, StandInModel) or model.kind != kind:
        raise RuntimeError(f"{node} needs the output of the matching SeedReuse stand-in loader ({kind})")


SeedReuseTestQwenTextEncoderLoader = stand_in_loader(
    "SeedReuseTestQwenTextEncoderLoader",
    "SeedReuse Test: Text Encoder Loader (stand-in Qwen2.5-VL, CLIPLoader type qwen_image)",
    "text_encoders", "clip_name", "qwen25_vl", "text_loader", io.Clip)


class SeedReuseTestQwenTextEncode(io.ComfyNode):
    """CLIPTextEncode with a qwen_image CLIP: [[tensor(1, tokens + 5, 3584), {"pooled_output": None}]]."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestQwenTextEncode",
            display_name="SeedReuse Test: Text Encode (stand-in CLIPTextEncode, Qwen-Image)",
            category="SeedReuse/test",
            inputs=[
                io.Clip.Input("clip"),
                io.String.Input("text", multiline=True, dynamic_prompts=True),
                io.Int.Input("work_ms", default=0, min=0, max=600000),
            ],
            outputs=[io.Conditioning.Output()],
        )

    @classmethod
    def execute(cls, clip, text, work_ms=0):
        count("text_encode")
        _need(clip, "qwen25_vl", "SeedReuseTestQwenTextEncode")
        burn_cpu(work_ms)
        return io.NodeOutput([[_qwen_cond(clip, text), {"pooled_output": None}]])


class SeedReuseTestTextEncodeQwenImageEdit(io.ComfyNode):
    """TextEncodeQwenImageEdit with the stand-in VL encoder: same inputs, same output structure.

    As the real node: the image is scaled to ``total_pixels`` (the real node's fixed 1 MP is the
    default; tests lower it to stay tiny), the VL encoder sees it (vision tokens in L), and with a
    VAE the scaled image is VAE-encoded (real VAE) and appended as ``reference_latents``."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestTextEncodeQwenImageEdit",
            display_name="SeedReuse Test: TextEncodeQwenImageEdit (stand-in Qwen2.5-VL)",
            category="SeedReuse/test",
            inputs=[
                io.Clip.Input("clip"),
                io.String.Input("prompt", multiline=True, dynamic_prompts=True),
                io.Vae.Input("vae", optional=True),
                io.Image.Input("image", optional=True),
                io.Int.Input("total_pixels", default=EDIT_TOTAL_PIXELS, min=64, max=16 * 1024 * 1024),
                io.Int.Input("work_ms", default=0, min=0, max=600000),
            ],
            outputs=[io.Conditioning.Output()],
        )

    @classmethod
    def execute(cls, clip, prompt, vae=None, image=None, total_pixels=EDIT_TOTAL_PIXELS, work_ms=0):
        count("text_encode")
        _need(clip, "qwen25_vl", "SeedReuseTestTextEncodeQwenImageEdit")
        burn_cpu(work_ms)
        ref_latent = None
        if image is not None:
            samples = image.movedim(-1, 1)
            scale_by = math.sqrt(total_pixels / (samples.shape[3] * samples.shape[2]))
            width = round(samples.shape[3] * scale_by)
            height = round(samples.shape[2] * scale_by)
            image = comfy.utils.common_upscale(samples, width, height, "area", "disabled").movedim(1, -1)[:, :, :, :3]
            if vae is not None:
                ref_latent = vae.encode(image)
        cond = [[_qwen_cond(clip, prompt, image), {"pooled_output": None}]]
        if ref_latent is not None:
            cond = node_helpers.conditioning_set_values(cond, {"reference_latents": [ref_latent]}, append=True)
        return io.NodeOutput(cond)


# --------------------------------------------------------------------------- InfiniteTalk

SeedReuseTestModelPatchLoader = stand_in_loader(
    "SeedReuseTestModelPatchLoader", "SeedReuse Test: ModelPatchLoader (stand-in InfiniteTalk patch)",
    "model_patches", "name", "infinitetalk", "model_patch_loader", _MODEL_PATCH, work_input=False)


def linear_interpolation(features: torch.Tensor, input_fps: float, output_fps: float) -> torch.Tensor:
    """[layers, T, C] at input_fps -> [layers, T', C] at output_fps (the newer host's helper)."""
    features = features.transpose(1, 2)
    seq_len = features.shape[2] / float(input_fps)
    output_len = int(seq_len * output_fps)
    out = torch.nn.functional.interpolate(features, size=output_len, align_corners=True, mode="linear")
    return out.transpose(1, 2)


def interpolated_features(out: dict) -> torch.Tensor:
    """An audio-encoder output as WanInfiniteTalkToVideo reads it: all layers but the first,
    50 Hz -> 25 fps, [T, layers, C]."""
    layers = torch.stack(out["encoded_audio_all_layers"], dim=0).squeeze(1)[1:]   # [layers, T, C]
    return linear_interpolation(layers, 50, 25).movedim(0, 1)


def feature_window(encoded: list, start: int, end: int) -> list:
    """comfy/ldm/wan/model_multitalk.get_audio_embeds' window [start, end) (without its +-2 frame
    context): features shorter than end are padded with their FIRST frame repeated ("most likely
    silence"); the node does not fail."""
    frames = int(encoded[0].shape[0])
    if end > frames:
        encoded = [torch.cat([e, e[:1].repeat(end - frames, *([1] * (e.dim() - 1)))], dim=0) for e in encoded]
    return [e[start:end] for e in encoded]


def _sha(t: torch.Tensor) -> str:
    t = t.detach().to("cpu")
    return hashlib.sha256(_tensor_bytes(t) + str(t.dtype).encode()).hexdigest()


class SeedReuseTestInfiniteTalkToVideo(io.ComfyNode):
    """WanInfiniteTalkToVideo of newer ComfyUI, for 0.3.75 tests.

    Same inputs (the newer node's ``mode`` DynamicCombo is a Combo here, its two_speakers inputs
    plain optional inputs) and outputs, and the same logic for the conditioning (start image ->
    concat_latent_image/concat_mask, clip_vision_output), the latent, the motion frames
    (``previous_frames[-motion_frame_count:]``, VAE-encoded) and the audio window
    (``previous_frames.shape[0] - motion_frame_count`` .. ``+ length`` in 25 fps frames of the
    wav2vec2 features interpolated from 50 Hz; 0 .. length without previous frames; features
    shorter than the window's end padded with their first frame, as the host's get_audio_embeds
    does). The window goes into the patched model's transformer_options["audio_embeds"]
    unprojected (the projection, its +-2 frame context and the attention patch need the
    InfiniteTalk patch weights) and is recorded in the node's ui output "infinitetalk"
    (feature_frames: interpolated frames before padding, padded_frames, window_sha256).

    In a Segment Loop the features are the loop's segment_audio_features (already cut to the
    segment) and previous_frames the loop's M motion frames with motion_frame_count = M, so the
    window starts at 0, as in the newer host's node."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestInfiniteTalkToVideo",
            display_name="SeedReuse Test: WanInfiniteTalkToVideo (stand-in)",
            category="SeedReuse/test",
            inputs=[
                io.Combo.Input("mode", options=["single_speaker", "two_speakers"], default="single_speaker"),
                io.Model.Input("model"),
                _MODEL_PATCH.Input("model_patch"),
                io.Conditioning.Input("positive"),
                io.Conditioning.Input("negative"),
                io.Vae.Input("vae"),
                io.Int.Input("width", default=832, min=16, max=16384, step=16),
                io.Int.Input("height", default=480, min=16, max=16384, step=16),
                io.Int.Input("length", default=81, min=1, max=16384, step=4),
                io.ClipVisionOutput.Input("clip_vision_output", optional=True),
                io.Image.Input("start_image", optional=True),
                io.AudioEncoderOutput.Input("audio_encoder_output_1"),
                io.Int.Input("motion_frame_count", default=9, min=1, max=33, step=1),
                io.Float.Input("audio_scale", default=1.0, min=-10.0, max=10.0, step=0.01),
                io.Image.Input("previous_frames", optional=True),
                io.AudioEncoderOutput.Input("audio_encoder_output_2", optional=True),
                io.Mask.Input("mask_1", optional=True),
                io.Mask.Input("mask_2", optional=True),
            ],
            outputs=[
                io.Model.Output(display_name="model"),
                io.Conditioning.Output(display_name="positive"),
                io.Conditioning.Output(display_name="negative"),
                io.Latent.Output(display_name="latent"),
                io.Int.Output(display_name="trim_image"),
            ],
        )

    @classmethod
    def execute(cls, mode, model, model_patch, positive, negative, vae, width, height, length,
                audio_encoder_output_1, motion_frame_count, audio_scale=1.0, start_image=None,
                previous_frames=None, clip_vision_output=None, audio_encoder_output_2=None,
                mask_1=None, mask_2=None):
        count("infinitetalk")
        _need(model_patch, "infinitetalk", "SeedReuseTestInfiniteTalkToVideo")
        if previous_frames is not None and previous_frames.shape[0] < motion_frame_count:
            raise ValueError("Not enough previous frames provided.")
        if mode != "two_speakers":
            audio_encoder_output_2 = mask_1 = mask_2 = None
        if audio_encoder_output_2 is not None and (mask_1 is None or mask_2 is None):
            raise ValueError("Masks must be provided if two audio encoder outputs are used.")

        latent = torch.zeros([1, 16, ((length - 1) // 4) + 1, height // 8, width // 8],
                             device=comfy.model_management.intermediate_device())
        concat_latent_image = None
        if start_image is not None:
            start_image = comfy.utils.common_upscale(start_image[:length].movedim(-1, 1), width, height,
                                                     "bilinear", "center").movedim(1, -1)
            image = torch.ones((length, height, width, start_image.shape[-1]), device=start_image.device,
                               dtype=start_image.dtype) * 0.5
            image[:start_image.shape[0]] = start_image
            concat_latent_image = vae.encode(image[:, :, :, :3])
            concat_mask = torch.ones((1, 1, latent.shape[2], concat_latent_image.shape[-2],
                                      concat_latent_image.shape[-1]), device=start_image.device, dtype=start_image.dtype)
            concat_mask[:, :, :((start_image.shape[0] - 1) // 4) + 1] = 0.0
            values = {"concat_latent_image": concat_latent_image, "concat_mask": concat_mask}
            positive = node_helpers.conditioning_set_values(positive, values)
            negative = node_helpers.conditioning_set_values(negative, values)
        if clip_vision_output is not None:
            positive = node_helpers.conditioning_set_values(positive, {"clip_vision_output": clip_vision_output})
            negative = node_helpers.conditioning_set_values(negative, {"clip_vision_output": clip_vision_output})

        model_patched = model.clone()
        encoded = []
        for out in (audio_encoder_output_1, audio_encoder_output_2):
            if out is None:
                continue
            encoded.append(interpolated_features(out))                                      # [T, layers, C]
        if len(encoded) > 1:   # "add": the speakers one after the other
            total = sum(e.shape[0] for e in encoded)
            full, off = [], 0
            for e in encoded:
                z = torch.zeros((total, *e.shape[1:]), dtype=e.dtype)
                z[off:off + e.shape[0]] = e
                full.append(z)
                off += e.shape[0]
            encoded = full

        if previous_frames is not None:
            motion = comfy.utils.common_upscale(previous_frames[-motion_frame_count:].movedim(-1, 1), width, height,
                                                "bilinear", "center").movedim(1, -1)
            audio_start = previous_frames.shape[0] - motion_frame_count
            audio_end = audio_start + length
            motion_latent = vae.encode(motion[:, :, :, :3])
            trim_image = motion_frame_count
        else:
            if concat_latent_image is None:
                raise ValueError("WanInfiniteTalkToVideo needs start_image when no previous_frames are given")
            audio_start = trim_image = 0
            audio_end = length
            motion_latent = concat_latent_image[:, :, :1]

        feature_frames = int(encoded[0].shape[0])
        window = feature_window(encoded, audio_start, audio_end)
        topts = model_patched.model_options.setdefault("transformer_options", {})
        topts["audio_embeds"] = window[0]
        topts["seedreuse_test_motion_latent"] = motion_latent
        record = {
            "audio_start": audio_start, "audio_end": audio_end, "length": length,
            "feature_frames": feature_frames, "window_frames": int(window[0].shape[0]),
            "padded_frames": max(0, audio_end - feature_frames),
            "window_sha256": _sha(window[0]),
            "audio_samples_16k": int(audio_encoder_output_1.get("audio_samples", -1)),
            "previous_frames": None if previous_frames is None else int(previous_frames.shape[0]),
            "previous_frames_sha256": None if previous_frames is None else _sha(previous_frames),
            "motion_frame_count": motion_frame_count, "trim_image": trim_image,
            "is_extend": previous_frames is not None, "speakers": len(encoded),
        }
        out_latent = {"samples": latent}
        return io.NodeOutput(model_patched, positive, negative, out_latent, trim_image,
                             ui={"infinitetalk": [record]})


class SeedReuseTestTap(io.ComfyNode):
    """Pass-through that records describe(value) in its ui output "inspect" (every loop copy too)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestTap",
            display_name="SeedReuse Test: Tap",
            category="SeedReuse/test",
            inputs=[io.AnyType.Input("value"), io.String.Input("label", default="")],
            outputs=[io.AnyType.Output("passed", display_name="value")],
        )

    @classmethod
    def execute(cls, value, label=""):
        count("tap")
        return io.NodeOutput(value, ui={"inspect": [{"label": label, "value": describe(value)}]})


FAMILY_NODES = [
    SeedReuseTestQwenTextEncoderLoader,
    SeedReuseTestQwenTextEncode,
    SeedReuseTestTextEncodeQwenImageEdit,
    SeedReuseTestModelPatchLoader,
    SeedReuseTestInfiniteTalkToVideo,
    SeedReuseTestTap,
]
