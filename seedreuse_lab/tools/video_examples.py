"""The shipped examples of the video families (ComfyUI 0.33): LTX-2.3 image to video with its
prompt enhancer, and MiniMax H3 image to video.

Each is the graph of the official template (video_ltx2_3_i2v, one pass instead of its
two-pass upscale; video_minimax_h3_i2v) with the stock nodes flat (no subgraph, no switches or
math nodes: what a user edits directly), the real model file names, and the Encode-or-Reuse nodes
and the Session exactly where the pack's instrumenter puts them (``instrument`` on the stock
graph: the prompt enhancer's text before the PreviewAny that shows it, LTXVConditioning's two
outputs and the audio-video latent; MiniMaxH3ImageToVideo's two outputs).
make_family_examples.py lays them out and writes them next to the other family examples, on a
host that has these nodes (``graphs(object_info)`` is empty elsewhere);
tests/families/test_family_examples.py checks they are up to date and runs them.
"""
from __future__ import annotations

from reuse_backend.workflow import instrument

# the stock nodes these examples need: a host without them builds no video example
NEEDS = ("LTXAVTextEncoderLoader", "TextGenerateLTX2Prompt", "LTXVImgToVideoInplace", "MiniMaxH3ImageToVideo")

LTX_CKPT = "ltx-2.3-22b-dev-fp8.safetensors"
LTX_LORA = "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors"
TEMPLATES = {"ltx2_i2v_enhancer_reuse": "video_ltx2_3_i2v", "minimax_h3_i2v_reuse": "video_minimax_h3_i2v"}
TITLES = {"ltx2_i2v_enhancer_reuse": "LTX-2.3 image to video, reuse the enhanced prompt",
          "minimax_h3_i2v_reuse": "MiniMax H3 image to video, reuse prompt and image"}

# LTX-2.3's distilled sigmas (the official template's first pass with the distilled LoRA)
LTX_SIGMAS = "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"


def _n(class_type: str, title: str | None = None, **inputs) -> dict:
    return {"class_type": class_type, "inputs": inputs, "_meta": {"title": title or class_type}}


def ltx2_i2v() -> dict:
    L = lambda nid, slot=0: [str(nid), slot]    # noqa: E731
    return {
        "1": _n("CheckpointLoaderSimple", ckpt_name=LTX_CKPT),
        "2": _n("LoraLoaderModelOnly", model=L(1), lora_name=LTX_LORA, strength_model=0.5),
        "3": _n("LTXAVTextEncoderLoader", text_encoder="gemma_3_12B_it_fp4_mixed.safetensors", ckpt_name=LTX_CKPT,
                device="default"),
        "4": _n("LoadImage", image="example.png"),
        "5": _n("ImageScale", image=L(4), upscale_method="lanczos", width=768, height=512, crop="center"),
        "6": _n("LTXVPreprocess", image=L(5), img_compression=18),
        "7": _n("TextGenerateLTX2Prompt", "Enhance the prompt (Gemma 3)", clip=L(3), image=L(5),
                prompt="The woman turns toward the window and smiles as the morning light moves across the room",
                max_length=2048, sampling_mode="on", **{"sampling_mode.temperature": 0.7, "sampling_mode.top_k": 64,
                                                       "sampling_mode.top_p": 0.95, "sampling_mode.min_p": 0.05,
                                                       "sampling_mode.repetition_penalty": 1.05, "sampling_mode.seed": 0,
                                                       "sampling_mode.presence_penalty": 0.0},
                thinking=False, use_default_template=True),
        "8": _n("PreviewAny", "The enhanced prompt", source=L(7)),
        "9": _n("CLIPTextEncode", "Positive (the enhanced prompt)", clip=L(3), text=L(7)),
        "10": _n("CLIPTextEncode", "Negative", clip=L(3),
                 text="pc game, console game, video game, cartoon, childish, ugly"),
        "11": _n("LTXVConditioning", positive=L(9), negative=L(10), frame_rate=24.0),
        "12": _n("EmptyLTXVLatentVideo", width=768, height=512, length=97, batch_size=1),
        "13": _n("LTXVImgToVideoInplace", vae=L(1, 2), image=L(6), latent=L(12), strength=1.0, bypass=False),
        "14": _n("LTXVAudioVAELoader", ckpt_name=LTX_CKPT),
        "15": _n("LTXVEmptyLatentAudio", frames_number=97, frame_rate=24, batch_size=1, audio_vae=L(14)),
        "16": _n("LTXVConcatAVLatent", video_latent=L(13), audio_latent=L(15)),
        "17": _n("RandomNoise", noise_seed=42),
        "18": _n("KSamplerSelect", sampler_name="euler"),
        "19": _n("ManualSigmas", sigmas=LTX_SIGMAS),
        "20": _n("CFGGuider", model=L(2), positive=L(11), negative=L(11, 1), cfg=1.0),
        "21": _n("SamplerCustomAdvanced", noise=L(17), guider=L(20), sampler=L(18), sigmas=L(19), latent_image=L(16)),
        "22": _n("LTXVSeparateAVLatent", av_latent=L(21)),
        "23": _n("VAEDecode", samples=L(22), vae=L(1, 2)),
        "24": _n("LTXVAudioVAEDecode", samples=L(22, 1), audio_vae=L(14)),
        "25": _n("CreateVideo", images=L(23), audio=L(24), fps=24.0),
        "26": _n("SaveVideo", video=L(25), filename_prefix="video/ltx2_i2v", format="auto", codec="auto"),
    }


def minimax_h3_i2v() -> dict:
    L = lambda nid, slot=0: [str(nid), slot]    # noqa: E731
    return {
        "1": _n("UNETLoader", unet_name="minimax_h3_fl2va_pruned_int8_convrot.safetensors", weight_dtype="default"),
        "2": _n("CLIPLoader", clip_name="qwen3vl_32b_minimax_h3_nvfp4_awq.safetensors", type="minimax", device="default"),
        "3": _n("VAELoader", "Video VAE", vae_name="minimax_h3_video_vae_fp16.safetensors"),
        "4": _n("VAELoader", "Audio VAE", vae_name="minimax_h3_audio_vae_fp32.safetensors"),
        "5": _n("LoadImage", image="example.png"),
        "6": _n("MiniMaxH3ImageToVideo", clip=L(2), vae=L(3), first_frame=L(5),
                prompt="The camera slowly pushes in while the subject turns toward it; soft studio light, "
                       "a quiet ambient hum", width=768, height=768, length=56),
        "7": _n("RandomNoise", noise_seed=42),
        "8": _n("KSamplerSelect", sampler_name="res_multistep"),
        "9": _n("BasicScheduler", model=L(1), scheduler="simple", steps=20, denoise=1.0),
        "10": _n("BasicGuider", model=L(1), conditioning=L(6)),
        "11": _n("SamplerCustomAdvanced", noise=L(7), guider=L(10), sampler=L(8), sigmas=L(9), latent_image=L(6, 1)),
        "12": _n("VAEDecode", samples=L(11), vae=L(3)),
        "13": _n("VAEDecodeAudio", samples=L(11), vae=L(4)),
        "14": _n("CreateVideo", images=L(12), audio=L(13), fps=24.0),
        "15": _n("SaveVideo", video=L(14), filename_prefix="video/minimax_h3", format="auto", codec="auto"),
    }


NOTES = {
    "ltx2_i2v_enhancer_reuse":
        "## LTX-2.3 image to video with Encoder Reuse\n\n"
        "Needs ComfyUI 0.33 or newer (the LTX-2 audio-video nodes and TextGenerateLTX2Prompt). Pick "
        "`ltx-2.3-22b-dev-fp8` (checkpoints), `gemma_3_12B_it_fp4_mixed` (text_encoders), the distilled LoRA "
        "(loras) and a start image.\n\n"
        "The prompt enhancer (Gemma 3 12B writing the full prompt from yours and the image) and both text "
        "encodes run once; a new noise seed reuses the enhanced prompt (the preview shows it, slot "
        "`generated_text`), both conditionings and the audio-video latent with the start image from the shared "
        "cache, so Gemma is not loaded again on any worker. The enhancer's own seed is part of its key: change "
        "it (or the prompt, or the image) and it runs again.\n\n"
        "This is the official LTX-2.3 image-to-video template in one pass; the template's second pass "
        "(a 2x latent upscale) re-encodes the start image into the upscaled latent on every run.",
    "minimax_h3_i2v_reuse":
        "## MiniMax H3 image to video with Encoder Reuse\n\n"
        "Needs ComfyUI 0.33 or newer (the MiniMax H3 nodes). Pick the MiniMax H3 model (diffusion_models), "
        "`qwen3vl_32b_minimax_h3_*` (text_encoders, type minimax), the video and audio VAEs (vae) and a first "
        "frame.\n\n"
        "MiniMaxH3ImageToVideo encodes the prompt and the first frame with Qwen3-VL 32B and the video VAE: both "
        "of its outputs (the conditioning with the first frame's latent, and the audio-video latent) go through "
        "**Encode or Reuse**, so a new seed samples again without loading Qwen3-VL.",
}


def model_urls() -> dict[str, tuple[str, str]]:
    """file -> (folder, url) of the models the examples load, as their official templates list
    them (the nodes' ``properties.models``)."""
    from .. import official_templates as ot

    out = {}
    for template in TEMPLATES.values():
        doc = ot.load_template(template)
        for g in [doc, *((doc.get("definitions") or {}).get("subgraphs") or [])]:
            for n in g.get("nodes") or []:
                for m in (n.get("properties") or {}).get("models") or []:
                    out[m["name"]] = (m["directory"], m["url"])
    return out


def graphs(object_info: dict) -> dict[str, tuple[dict, str]]:
    """id -> (API-format graph made reusable by the instrumenter, note); empty on a host without
    the nodes (NEEDS)."""
    if not all(n in object_info for n in NEEDS):
        return {}
    out = {}
    for name, build in (("ltx2_i2v_enhancer_reuse", ltx2_i2v), ("minimax_h3_i2v_reuse", minimax_h3_i2v)):
        api, report = instrument(build(), cache_name=name.removesuffix("_reuse"), object_info=object_info)
        if not report["changed"] or report["not_wrapped"]:
            raise AssertionError(f"{name}: the instrumenter left {report['not_wrapped']} (wrapped {report['wrapped']})")
        out[name] = (api, NOTES[name])
    return out
