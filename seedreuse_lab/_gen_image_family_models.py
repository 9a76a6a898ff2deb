"""Generator of the image and audio family models (run as a script by family_models.py, in a subprocess).

usage: PYTHONPATH=<repo>:<comfyui_dir> python -m seedreuse_lab._gen_image_family_models <comfyui_dir> <out_models_dir>

Each model is built from ComfyUI's own classes with seeded random weights (stored bf16, drawn
tensor by tensor) and loaded back through the stock loaders' detection (``verify``), which must
pick the intended model class. Widths the host reads from the file are made small; widths the
host fixes are kept (measured sizes in docs/SUPPORT_MATRIX.md):

    diffusion_models/tiny_zimage_turbo.safetensors   Z-Image (NextDiT, "ZImage"): the host detects
                                                     Z-Image only at width 3840 and builds 2 + 2
                                                     refiner blocks: one main block, ~909M params
    diffusion_models/tiny_flux2_dev.safetensors      Flux.2 dev: width 128, 1 + 1 blocks, text 15360
                                                     (3 stacked Mistral 3 layers), guidance embed
    diffusion_models/tiny_flux2_klein_4b.safetensors Flux.2 Klein 4B: text 7680 (3 Qwen3 4B layers)
    diffusion_models/tiny_flux1_dev.safetensors      Flux.1 dev: width 128, T5 4096 + CLIP-L pooled 768
    diffusion_models/tiny_ace_step15.safetensors     ACE-Step 1.5: DiT width 128 (8 query heads of the
                                                     host-fixed 128), its condition encoder at the
                                                     host-fixed audio-code width 2048 (~337M params)
    checkpoints/tiny_sdxl_base.safetensors           SDXL UNet (the host's SDXL match: 320 channels,
                                                     transformer depth 2,2,10,10, context 2048) at
                                                     channel_mult 1,1,1 + SDXL VAE; no text encoders
    checkpoints/tiny_sdxl_refiner.safetensors        SDXL refiner UNet (384, depth 4,4,4,4, context
                                                     1280) at channel_mult 1,1,1,1 + VAE; no text encoders
    checkpoints/tiny_sd35.safetensors                SD3.5 MMDiT depth 2 (width 128, rms qk norm) +
                                                     SD3 VAE (16 channels); no text encoders
    vae/tiny_flux_ae.safetensors                     Flux / Z-Image VAE (16 channels)
    vae/tiny_flux2_vae.safetensors                   Flux.2 VAE (32 channels, batch-norm latent)
    vae/tiny_ace15_vae.safetensors                   ACE-Step 1.5 audio VAE (Oobleck, 48 kHz strides:
                                                     the host fixes its config, ~169M params)
    text_encoders/standin_*.safetensors              placeholders of the stand-in text encoders
                                                     (stand_in_nodes/image_family_standins.py),
                                                     each naming the encoder it stands for

The image VAEs: the host fixes the encoder's width (128) and reads the decoder's from the file
(32 here). The VAE and text-encoder placeholders are built through the stock loader's own code
path (``comfy.sd.VAE`` on the detection keys, then its model's full state dict).

Everything written is a function of this file's text, _gen_tiny_models.py's text (helpers) and
the host's ComfyUI version (family_models.py hashes all three into the cache directory name).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

from . import _gen_tiny_models as base  # _save, build_placeholder

SEED = base.SEED + 200

ZIMAGE = "tiny_zimage_turbo.safetensors"
FLUX2_DEV = "tiny_flux2_dev.safetensors"
FLUX2_KLEIN = "tiny_flux2_klein_4b.safetensors"
FLUX1_DEV = "tiny_flux1_dev.safetensors"
ACE15 = "tiny_ace_step15.safetensors"
SDXL_BASE = "tiny_sdxl_base.safetensors"
SDXL_REFINER = "tiny_sdxl_refiner.safetensors"
SD35 = "tiny_sd35.safetensors"
FLUX_AE = "tiny_flux_ae.safetensors"
FLUX2_VAE = "tiny_flux2_vae.safetensors"
ACE15_VAE = "tiny_ace15_vae.safetensors"
# text-encoder placeholders: file -> the encoder kind the stand-in loaders read from it
TEXT_ENCODERS = {
    "standin_qwen3_4b.safetensors": "qwen3_4b",            # Z-Image, Flux.2 Klein 4B
    "standin_mistral3_24b.safetensors": "mistral3_24b",    # Flux.2 dev
    "standin_clip_l.safetensors": "clip_l",                # Flux.1 (with T5-XXL)
    "standin_t5xxl.safetensors": "t5xxl",
    "standin_qwen3_06b_ace15.safetensors": "qwen3_06b",    # ACE-Step 1.5 text encoder
    "standin_qwen3_2b_ace15_lm.safetensors": "qwen3_2b",   # ACE-Step 1.5 language model
}
# checkpoints: which stand-in text encoders stand for the weights the file leaves out
CHECKPOINT_TEXT = {SDXL_BASE: "sdxl", SDXL_REFINER: "sdxl_refiner", SD35: "sd3"}

DEC_CH = 32       # decoder width of the image VAEs (the host reads it from the file; GroupNorm needs 32)


def _fill(module_or_sd, seed: int) -> dict:
    """Seeded, numerically tame bf16 values for every tensor (drawn one by one, so no float32
    copy of a large model exists whole); integer buffers are kept."""
    import torch

    sd = module_or_sd if isinstance(module_or_sd, dict) else module_or_sd.state_dict()
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in sd.items():
        shape = tuple(t.shape)
        leaf = name.rsplit(".", 1)[-1]
        if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            out[name] = torch.zeros(shape, dtype=t.dtype) if t.is_meta else t.clone()
            continue
        if "running_var" in name:
            v = torch.ones(shape)
        elif "running_mean" in name:
            v = torch.zeros(shape)
        elif len(shape) <= 1:
            if leaf in ("gamma", "scale") or ("norm" in name and leaf == "weight") or "beta" == leaf:
                v = 1.0 + 0.05 * torch.randn(shape, generator=g)
            else:
                v = 0.02 * torch.randn(shape, generator=g)
        elif "modulation" in name or "pad_token" in name or "original0" in leaf:
            v = 0.02 * torch.randn(shape, generator=g) + (1.0 if "original0" in leaf else 0.0)
        else:
            v = torch.randn(shape, generator=g) / math.sqrt(max(1, math.prod(shape[1:])))
        out[name] = v.to(torch.bfloat16).contiguous()
    return out


def _meta(build):
    import torch

    with torch.device("meta"):
        return build()


def _ops():
    import comfy.ops
    return comfy.ops.disable_weight_init


def build_zimage() -> dict:
    import comfy.ldm.lumina.model

    # what model_detection reads for dim 3840 (Z-Image), with one main block
    m = _meta(lambda: comfy.ldm.lumina.model.NextDiT(
        patch_size=2, in_channels=16, dim=3840, n_layers=1, n_heads=30, n_kv_heads=30,
        ffn_dim_multiplier=8.0 / 3.0, qk_norm=True, cap_feat_dim=2560, axes_dims=[32, 48, 48],
        axes_lens=[1536, 512, 512], rope_theta=256.0, z_image_modulation=True, time_scale=1000.0,
        pad_tokens_multiple=32, operations=_ops()))
    return _fill(m, SEED + 1)


def _flux(seed: int, **kw) -> dict:
    import comfy.ldm.flux.model

    m = _meta(lambda: comfy.ldm.flux.model.Flux(operations=_ops(), **kw))
    return _fill(m, seed)


def build_flux2(context_in_dim: int, guidance: bool, seed: int) -> dict:
    return _flux(seed, image_model="flux2", in_channels=128, out_channels=128, vec_in_dim=None,
                 context_in_dim=context_in_dim, hidden_size=128, mlp_ratio=3.0, num_heads=1, depth=1,
                 depth_single_blocks=1, axes_dim=[32, 32, 32, 32], theta=2000, patch_size=1, qkv_bias=False,
                 guidance_embed=guidance, txt_ids_dims=[3], global_modulation=True, mlp_silu_act=True,
                 ops_bias=False, default_ref_method="index", ref_index_scale=10.0)


def build_flux1_dev() -> dict:
    return _flux(SEED + 4, image_model="flux", in_channels=16, out_channels=16, vec_in_dim=768,
                 context_in_dim=4096, hidden_size=128, mlp_ratio=4.0, num_heads=1, depth=1,
                 depth_single_blocks=1, axes_dim=[16, 56, 56], theta=10000, patch_size=2, qkv_bias=True,
                 guidance_embed=True, txt_ids_dims=[])


def build_ace15() -> dict:
    import comfy.ldm.ace.ace_step15

    # the condition encoder's width must be the audio-code quantizer's, which the host fixes (2048:
    # the codes' embeddings go straight into the detokenizer); the DiT itself is narrow. Built for
    # real, not on meta (the quantizer computes its codebook size at construction)
    m = comfy.ldm.ace.ace_step15.AceStepConditionGenerationModel(
        hidden_size=128, intermediate_size=256, num_heads=8, num_dit_layers=2, encoder_hidden_size=2048,
        encoder_num_heads=8, encoder_intermediate_size=256, operations=_ops())
    return _fill(m, SEED + 5)


def _unet(seed: int, **kw) -> dict:
    import comfy.ldm.modules.diffusionmodules.openaimodel as oai

    m = _meta(lambda: oai.UNetModel(image_size=32, in_channels=4, out_channels=4, num_head_channels=64,
                                    use_spatial_transformer=True, legacy=False, num_classes="sequential",
                                    use_linear_in_transformer=True, operations=_ops(), **kw))
    return _fill(m, seed)


def build_sdxl_unet() -> dict:
    # the host's SDXL match (model_channels, transformer_depth, context_dim, adm_in_channels) at
    # the smallest channel_mult, one transformer block in the middle and after each output block
    return _unet(SEED + 6, model_channels=320, num_res_blocks=[2, 2, 2], channel_mult=[1, 1, 1],
                 transformer_depth=[0, 0, 2, 2, 10, 10], transformer_depth_middle=1,
                 transformer_depth_output=[0, 0, 0, 1, 1, 1, 1, 1, 1], context_dim=2048, adm_in_channels=2816)


def build_sdxl_refiner_unet() -> dict:
    return _unet(SEED + 7, model_channels=384, num_res_blocks=[2, 2, 2, 2], channel_mult=[1, 1, 1, 1],
                 transformer_depth=[0, 0, 4, 4, 4, 4, 0, 0], transformer_depth_middle=1,
                 transformer_depth_output=[0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0], context_dim=1280,
                 adm_in_channels=2560)


def build_sd35_mmdit() -> dict:
    import comfy.ldm.modules.diffusionmodules.mmdit as mmdit

    m = _meta(lambda: mmdit.MMDiT(
        patch_size=2, in_channels=16, out_channels=16, depth=2, adm_in_channels=2048,
        context_embedder_config={"target": "torch.nn.Linear", "params": {"in_features": 4096, "out_features": 128}},
        pos_embed_max_size=16, num_patches=256, qk_norm="rms", x_block_self_attn_layers=[],
        operations=_ops()))
    return _fill(m, SEED + 8)


def build_image_vae(z_channels: int, seed: int, *, quant_conv: bool = False, batch_norm: bool = False) -> dict:
    """The state dict of the VAE comfy.sd.VAE builds for these detection keys (the stock
    VAELoader's own code path), filled with seeded values."""
    import torch

    import comfy.sd

    keys = {"decoder.conv_in.weight": torch.zeros((DEC_CH * 4, z_channels, 3, 3)),
            "decoder.up.3.upsample.conv.weight": torch.zeros((DEC_CH * 4, DEC_CH * 4, 3, 3))}
    if quant_conv:
        keys["post_quant_conv.weight"] = torch.zeros((z_channels, z_channels, 1, 1))
    if batch_norm:
        keys["bn.running_mean"] = torch.zeros((z_channels * 4,))
    vae = comfy.sd.VAE(sd=keys)
    return _fill(vae.first_stage_model.state_dict(), seed)


def build_ace15_vae() -> dict:
    from comfy.ldm.audio.autoencoder import AudioOobleckVAE

    m = _meta(lambda: AudioOobleckVAE(strides=[2, 4, 4, 6, 10]))
    return _fill(m, SEED + 12)


def _checkpoint(unet: dict, vae: dict) -> dict:
    out = {f"model.diffusion_model.{k}": v for k, v in unet.items()}
    out.update({f"first_stage_model.{k}": v for k, v in vae.items()})
    return out


def build_all(out: str) -> dict:
    times = {}

    def step(name, fn):
        t0 = time.perf_counter()
        fn()
        times[name] = round(time.perf_counter() - t0, 3)

    def save(folder, fname, sd, meta):
        base._save(sd, os.path.join(out, folder, fname), meta)

    step("zimage", lambda: save("diffusion_models", ZIMAGE, build_zimage(), {"seedreuse_tiny": "z-image-turbo"}))
    step("flux2", lambda: (
        save("diffusion_models", FLUX2_DEV, build_flux2(15360, True, SEED + 2), {"seedreuse_tiny": "flux2-dev"}),
        save("diffusion_models", FLUX2_KLEIN, build_flux2(7680, False, SEED + 3), {"seedreuse_tiny": "flux2-klein-4b"})))
    step("flux1", lambda: save("diffusion_models", FLUX1_DEV, build_flux1_dev(), {"seedreuse_tiny": "flux1-dev"}))
    step("ace15", lambda: save("diffusion_models", ACE15, build_ace15(), {"seedreuse_tiny": "ace-step-1.5"}))
    step("vaes", lambda: (
        save("vae", FLUX_AE, build_image_vae(16, SEED + 9), {"seedreuse_tiny": "flux-ae"}),
        save("vae", FLUX2_VAE, build_image_vae(32, SEED + 10, quant_conv=True, batch_norm=True), {"seedreuse_tiny": "flux2-vae"}),
        save("vae", ACE15_VAE, build_ace15_vae(), {"seedreuse_tiny": "ace-step-1.5-vae"})))
    step("checkpoints", lambda: (
        save("checkpoints", SDXL_BASE, _checkpoint(build_sdxl_unet(), build_image_vae(4, SEED + 11, quant_conv=True)),
             {"seedreuse_tiny": "sdxl-base", "standin_text": CHECKPOINT_TEXT[SDXL_BASE]}),
        save("checkpoints", SDXL_REFINER, _checkpoint(build_sdxl_refiner_unet(),
                                                      build_image_vae(4, SEED + 13, quant_conv=True)),
             {"seedreuse_tiny": "sdxl-refiner", "standin_text": CHECKPOINT_TEXT[SDXL_REFINER]}),
        save("checkpoints", SD35, _checkpoint(build_sd35_mmdit(), build_image_vae(16, SEED + 14)),
             {"seedreuse_tiny": "sd3.5", "standin_text": CHECKPOINT_TEXT[SD35]})))
    step("placeholders", lambda: [base.build_placeholder(kind, os.path.join(out, "text_encoders", f))
                                  for f, kind in TEXT_ENCODERS.items()])
    return times


DIFFUSION = ((ZIMAGE, "ZImage"), (FLUX2_DEV, "Flux2"), (FLUX2_KLEIN, "Flux2"), (FLUX1_DEV, "Flux"),
             (ACE15, "ACEStep15"))
CHECKPOINTS = ((SDXL_BASE, "SDXL"), (SDXL_REFINER, "SDXLRefiner"), (SD35, "SD3"))
VAES = ((FLUX_AE, 16), (FLUX2_VAE, 128), (ACE15_VAE, 64))


def verify(out: str) -> dict:
    """Load every file through the stock loaders' detection; each must pick the intended class."""
    import comfy.sd
    import comfy.utils

    info = {}
    for fname, want in DIFFUSION:
        sd = comfy.utils.load_torch_file(os.path.join(out, "diffusion_models", fname), safe_load=True)
        model = comfy.sd.load_diffusion_model_state_dict(sd)
        del sd
        got = type(model.model.model_config).__name__ if model is not None else None
        if got != want:
            raise RuntimeError(f"{fname}: detected as {got}, want {want}")
        info[fname] = {"model_config": got, "params": sum(p.numel() for p in model.model.diffusion_model.parameters())}
        del model
    for fname, want in CHECKPOINTS:
        model, clip, vae, _ = comfy.sd.load_checkpoint_guess_config(
            os.path.join(out, "checkpoints", fname), output_vae=True, output_clip=True)
        got = type(model.model.model_config).__name__
        if got != want or clip is not None or vae is None:
            raise RuntimeError(f"{fname}: detected as {got} (want {want}), clip {clip}, vae {vae}")
        info[fname] = {"model_config": got, "params": sum(p.numel() for p in model.model.diffusion_model.parameters()),
                       "vae_latent_channels": vae.latent_channels}
        del model, vae
    for fname, channels in VAES:
        sd = comfy.utils.load_torch_file(os.path.join(out, "vae", fname), safe_load=True)
        vae = comfy.sd.VAE(sd=sd)
        del sd
        if vae.latent_channels != channels:
            raise RuntimeError(f"{fname}: {vae.latent_channels} latent channels, want {channels}")
        info[fname] = {"model": type(vae.first_stage_model).__name__, "latent_channels": vae.latent_channels,
                       "params": sum(p.numel() for p in vae.first_stage_model.parameters())}
        del vae
    return info


def main(argv: list[str]) -> int:
    out = argv[2]
    # ComfyUI is importable through PYTHONPATH (host.module_env)
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    times = build_all(out)
    t1 = time.perf_counter()
    info = verify(out)
    times["verify"] = round(time.perf_counter() - t1, 3)
    sizes = {f"{folder}/{f}": os.path.getsize(os.path.join(out, folder, f))
             for folder in sorted(os.listdir(out)) for f in sorted(os.listdir(os.path.join(out, folder)))}
    print("SEEDREUSE_IMAGE_FAMILY_MODELS " + json.dumps({"seconds": times, "detected": info, "bytes": sizes}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
