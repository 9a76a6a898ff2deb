"""SeedReuseTestInfiniteTalkProbe: what the STOCK WanInfiniteTalkToVideo did, as the stand-in's record.

On a host with the stock node (ComfyUI 0.33) the InfiniteTalk tests run it for real (the tiny
MultiTalk patch of seedreuse_lab/infinitetalk_models.py); it reports nothing itself, so this
pass-through sits between its MODEL output and the sampler and reads the patched model:

* ``transformer_options["audio_embeds"]``: the node's projected audio window. The probe finds
  WHICH window it is by projecting every window [s, s + length) of the features the node was
  given with the node's own patch and the host's ``project_audio_features`` and comparing
  bit-exactly (CPU, same ops); audio_start = None when no window matches (the test then fails).
* the ``infinite_talk_outer_sample`` wrapper: ``is_extend`` and the motion-frame latent the
  sampler's first latent frames are pinned to (its sha256 shows that a resumed segment starts
  from the same boundary).

The record has the stand-in's keys (family_standins.SeedReuseTestInfiniteTalkToVideo) so the
tests assert the same things on both hosts; ``window_sha256`` is the unprojected window the
match identified (as the stand-in reports it). Needs the host's comfy.ldm.wan.model_multitalk.
"""
from __future__ import annotations

import comfy.patcher_extension
import torch
from comfy_api.latest import io

from .family_standins import _MODEL_PATCH, _sha, feature_window, interpolated_features
from .standins import count

OUTER_WRAPPER = "infinite_talk_outer_sample"   # the key WanInfiniteTalkToVideo adds its wrapper under


def _outer_wrapper(model):
    found = model.wrappers.get(comfy.patcher_extension.WrappersMP.OUTER_SAMPLE, {}).get(OUTER_WRAPPER, [])
    if not found:
        raise RuntimeError("SeedReuseTestInfiniteTalkProbe: the model has no InfiniteTalk outer-sample wrapper "
                           "(connect WanInfiniteTalkToVideo's model output)")
    return found[-1]


class SeedReuseTestInfiniteTalkProbe(io.ComfyNode):
    """Pass-through of WanInfiniteTalkToVideo's MODEL that records the audio window it used (ui "infinitetalk")."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestInfiniteTalkProbe",
            display_name="SeedReuse Test: InfiniteTalk probe (stock WanInfiniteTalkToVideo)",
            category="SeedReuse/test",
            inputs=[
                io.Model.Input("value", tooltip="WanInfiniteTalkToVideo's model output."),
                _MODEL_PATCH.Input("model_patch", tooltip="The patch the node was given."),
                io.AudioEncoderOutput.Input("audio_encoder_output_1", tooltip="The features the node was given."),
                io.Int.Input("length", default=81, min=1, max=16384, tooltip="The node's length."),
                io.Int.Input("motion_frame_count", default=9, min=1, max=33, tooltip="The node's motion_frame_count."),
                io.Int.Input("trim_image", default=0, min=0, max=16384, tooltip="The node's trim_image output."),
                io.Image.Input("previous_frames", optional=True, tooltip="The node's previous_frames."),
            ],
            outputs=[io.Model.Output("passed", display_name="model", tooltip="value, unchanged.")],
        )

    @classmethod
    def execute(cls, value, model_patch, audio_encoder_output_1, length, motion_frame_count, trim_image,
                previous_frames=None):
        from comfy.ldm.wan.model_multitalk import project_audio_features

        count("infinitetalk_probe")
        embeds = value.model_options["transformer_options"]["audio_embeds"]
        wrapper = _outer_wrapper(value)
        encoded = [interpolated_features(audio_encoder_output_1)]
        feature_frames = int(encoded[0].shape[0])
        audio_start = None
        with torch.no_grad():
            for s in range(feature_frames + 1):
                cand = project_audio_features(model_patch.model.audio_proj, encoded, s, s + length).to(embeds)
                if cand.shape == embeds.shape and torch.equal(cand, embeds):
                    audio_start = s
                    break
        window = feature_window(encoded, audio_start or 0, (audio_start or 0) + length)[0]
        motion = wrapper.motion_frames_latent
        record = {
            "audio_start": audio_start, "audio_end": None if audio_start is None else audio_start + length,
            "length": length, "feature_frames": feature_frames, "window_frames": int(window.shape[0]),
            "padded_frames": max(0, (audio_start or 0) + length - feature_frames),
            "window_sha256": _sha(window), "audio_embeds_sha256": _sha(embeds),
            "audio_samples_16k": int(audio_encoder_output_1.get("audio_samples", -1)),
            "previous_frames": None if previous_frames is None else int(previous_frames.shape[0]),
            "previous_frames_sha256": None if previous_frames is None else _sha(previous_frames),
            "motion_frame_count": motion_frame_count, "trim_image": int(trim_image),
            "is_extend": bool(wrapper.is_extend), "speakers": len(encoded),
            "motion_latent_frames": int(motion.shape[2]), "motion_latent_sha256": _sha(motion),
            "node": "stock",
        }
        return io.NodeOutput(value, ui={"infinitetalk": [record]})


TALK_PROBE_NODES = [SeedReuseTestInfiniteTalkProbe]
