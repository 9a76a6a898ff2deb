"""Generator of the VIDEO support-matrix models (run as a script by video_family_models.py).

usage: PYTHONPATH=<repo>:<comfyui_dir> python -m seedreuse_lab._gen_video_family_models <comfyui_dir> <out_models_dir>

Only for a host that has the LTX-2 audio-video, MiniMax H3 and HunyuanVideo 1.5 nodes (ComfyUI
0.33). Each file is built from the host's own classes with seeded random weights and loaded back
through the detection code its loader uses:

    checkpoints/tiny_ltx2_av.safetensors              LTX-2 audio-video checkpoint for CheckpointLoaderSimple
                                                      and LTXVAudioVAELoader: LTXAVModel (1 layer, video width
                                                      64, audio width 32; the text side takes the Gemma 3
                                                      projection's real width 3840 and projects it before
                                                      1-layer connectors), the LTX video VAE (the real block
                                                      layout, 8 base channels, 128 latent channels), the
                                                      audio VAE and vocoder (tiny widths); the configs in the
                                                      file's "config" metadata, which the host reads
    latent_upscale_models/tiny_ltx2_spatial_upscaler.safetensors
                                                      LTX-2 latent upsampler (128 channels, mid 32, 1 block)
    diffusion_models/tiny_minimax_h3.safetensors      MiniMax H3 packed DiT (1 layer, width 128, 1 head of
                                                      128; text width 5120 = Qwen3-VL 32B's)
    vae/minimax_h3_audio_vae.safetensors              MiniMax H3 audio VAE at its host-fixed FULL size (DAC
                                                      encoder + BigVGAN decoder, ~151M parameters, bf16)
    vae/tiny_minimax_h3_video_vae.safetensors         MiniMax H3 video VAE at a tiny config the stock VAELoader
                                                      cannot build (the host fixes a 2.6B-parameter config):
                                                      loaded by the stand-in SeedReuseTestTinyVAELoader, which
                                                      builds the host's MiniMaxH3VideoVAE from the config in
                                                      this file's metadata
    diffusion_models/tiny_hunyuan_video_15_i2v.safetensors
                                                      HunyuanVideo 1.5 I2V DiT (width 128, 1 double + 1 single
                                                      block, vision_in 1152 = SigLIP's, byT5 mapper, text 3584)
    vae/tiny_hunyuan_video_15_vae.safetensors         HunyuanVideo 1.5 VAE (the host's vae_refiner Encoder /
                                                      Decoder, 32 latent channels, 16x / 4x) at a tiny width
                                                      (the host fixes 1.26B parameters): stand-in loader, as above
    text_encoders/standin_gemma3_12b.safetensors, standin_qwen3vl_32b.safetensors,
    standin_qwen25_vl_7b_hv15.safetensors, standin_byt5_small.safetensors,
    clip_vision/standin_siglip_so400m.safetensors     placeholders whose sha256 seeds the stand-in encoders

Everything written is a function of this file's text, _gen_tiny_models.py's text (helpers) and
the host's ComfyUI version (video_family_models.py hashes all three into the cache directory name).
"""
from __future__ import annotations

import json
import os
import sys
import time

from . import _gen_tiny_models as base  # _init_tensors, build_placeholder

SEED = base.SEED + 300

LTX2 = "tiny_ltx2_av.safetensors"
LTX2_UPSCALER = "tiny_ltx2_spatial_upscaler.safetensors"
MINIMAX = "tiny_minimax_h3.safetensors"
MINIMAX_AUDIO_VAE = "minimax_h3_audio_vae.safetensors"
MINIMAX_VIDEO_VAE = "tiny_minimax_h3_video_vae.safetensors"
HV15 = "tiny_hunyuan_video_15_i2v.safetensors"
HV15_VAE = "tiny_hunyuan_video_15_vae.safetensors"
PLACEHOLDERS = {("text_encoders", "standin_gemma3_12b.safetensors"): "gemma3_12b",
                ("text_encoders", "standin_qwen3vl_32b.safetensors"): "qwen3vl_32b",
                ("text_encoders", "standin_qwen25_vl_7b_hv15.safetensors"): "qwen25_7b_hv15",
                ("text_encoders", "standin_byt5_small.safetensors"): "byt5_small",
                ("clip_vision", "standin_siglip_so400m.safetensors"): "siglip_so400m"}

GEMMA_WIDTH = 3840        # LTX-2's Gemma 3 12B text projection (single_linear): the width its DiT reads

LTX2_TRANSFORMER = {
    "num_layers": 1, "num_attention_heads": 2, "attention_head_dim": 32, "cross_attention_dim": 64,
    "audio_num_attention_heads": 2, "audio_attention_head_dim": 16, "audio_cross_attention_dim": 32,
    "caption_channels": GEMMA_WIDTH, "caption_proj_before_connector": True,
    "connector_num_layers": 1, "connector_attention_head_dim": 32, "connector_num_attention_heads": 2,
    "audio_connector_attention_head_dim": 16, "audio_connector_num_attention_heads": 2,
}
LTX2_VAE = {
    "_class_name": "CausalVideoAutoencoder", "dims": 3, "in_channels": 3, "out_channels": 3,
    "latent_channels": 128, "encoder_base_channels": 8, "decoder_base_channels": 8,
    "encoder_blocks": [["res_x", {"num_layers": 1}], ["compress_all", {}], ["res_x", {"num_layers": 1}],
                       ["compress_all", {}], ["res_x", {"num_layers": 1}], ["compress_all", {}],
                       ["res_x", {"num_layers": 1}]],
    "decoder_blocks": [["res_x", {"num_layers": 1, "inject_noise": False}],
                       ["compress_all", {"residual": True, "multiplier": 2}],
                       ["res_x", {"num_layers": 1, "inject_noise": False}],
                       ["compress_all", {"residual": True, "multiplier": 2}],
                       ["res_x", {"num_layers": 1, "inject_noise": False}],
                       ["compress_all", {"residual": True, "multiplier": 2}],
                       ["res_x", {"num_layers": 1, "inject_noise": False}]],
    "scaling_factor": 1.0, "norm_layer": "pixel_norm", "patch_size": 4, "latent_log_var": "uniform",
    "use_quant_conv": False, "causal_decoder": False, "timestep_conditioning": False,
}
LTX2_AUDIO_VAE = {
    "model": {"params": {"sampling_rate": 16000, "ddconfig": {
        "double_z": True, "mel_bins": 64, "z_channels": 8, "resolution": 256, "downsample_time": False,
        "in_channels": 2, "out_ch": 2, "ch": 8, "ch_mult": [1, 2, 4], "num_res_blocks": 1,
        "attn_resolutions": [], "dropout": 0.0, "mid_block_add_attention": False, "norm_type": "pixel",
        "causality_axis": "height"}}},
    "preprocessing": {"stft": {"filter_length": 1024, "hop_length": 160}},
}
LTX2_VOCODER = {"resblock_kernel_sizes": [3], "upsample_rates": [5, 4, 2, 2, 2],
                "upsample_kernel_sizes": [16, 16, 8, 4, 4], "resblock_dilation_sizes": [[1, 3, 5]],
                "upsample_initial_channel": 64, "stereo": True, "resblock": "1", "output_sample_rate": 16000}
LTX2_UPSCALER_CONFIG = {"in_channels": 128, "mid_channels": 32, "num_blocks_per_stage": 1, "dims": 3,
                        "spatial_upsample": True, "temporal_upsample": False, "spatial_scale": 2.0,
                        "rational_resampler": False}

# the stand-in loader (seedreuse_lab/stand_in_nodes/video_family_standins.py) builds these from the
# file's metadata "config": {"tiny_vae": <kind>, "params": {...}}
MINIMAX_VIDEO_VAE_PARAMS = {"ch": 32, "ch_mult": [1, 1, 1, 1, 1, 1], "num_res_blocks": 1,
                            "decoder": {"num_layers": 1, "heads": 2, "dim_head": 16}}
HV15_VAE_PARAMS = {"block_out_channels": [16, 32, 64, 128, 128], "num_res_blocks": 1}


def _save_config(tensors: dict, path: str, config: dict) -> None:
    """safetensors with ONE metadata key, "config" (the host reads its model configs there; one key
    keeps the file bytes deterministic)."""
    from safetensors.torch import save_file

    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file(tensors, path, metadata={"config": json.dumps(config, sort_keys=True)})


def _tame_statistics(sd: dict) -> dict:
    """Latent statistics buffers (per-channel means / stds of the VAEs): means 0, stds 1, so the
    normalization is the identity instead of a division by random numbers near 0."""
    import torch

    for k, v in sd.items():
        leaf = k.rsplit(".", 1)[-1]
        if "statistics" in k or leaf in ("latents_mean", "latents_std"):
            sd[k] = (torch.ones_like(v) if "std" in leaf else torch.zeros_like(v)).contiguous()
    return sd


def build_ltx2(path: str) -> dict:
    import comfy.ops
    from comfy.ldm.lightricks.av_model import LTXAVModel
    from comfy.ldm.lightricks.vae.audio_vae import AudioVAE
    from comfy.ldm.lightricks.vae.causal_video_autoencoder import VideoVAE

    config = {"transformer": LTX2_TRANSFORMER, "vae": LTX2_VAE, "audio_vae": LTX2_AUDIO_VAE,
              "vocoder": LTX2_VOCODER, "seedreuse_tiny": "ltx2-av"}
    dit = LTXAVModel(operations=comfy.ops.disable_weight_init, **LTX2_TRANSFORMER)
    vae = VideoVAE(config=LTX2_VAE)
    audio = AudioVAE(metadata={"config": json.dumps(config)})
    sd = {}
    sd.update({f"model.diffusion_model.{k}": v for k, v in base._init_tensors(dit, SEED + 1).items()})
    sd.update({f"vae.{k}": v for k, v in _tame_statistics(base._init_tensors(vae, SEED + 2)).items()})
    audio_sd = _tame_statistics(base._init_tensors(audio, SEED + 3))
    for k, v in audio_sd.items():    # the checkpoint layout LTXVAudioVAELoader reads: audio_vae.* / vocoder.*
        if k.startswith("autoencoder."):
            sd["audio_vae." + k[len("autoencoder."):]] = v
        elif k.startswith("vocoder."):
            sd[k] = v
    _save_config(sd, path, config)
    return config


def build_ltx2_upscaler(path: str) -> None:
    import comfy.ops
    from comfy.ldm.lightricks.latent_upsampler import LatentUpsampler

    m = LatentUpsampler.from_config(LTX2_UPSCALER_CONFIG, operations=comfy.ops.disable_weight_init)
    _save_config(base._init_tensors(m, SEED + 4), path, {**LTX2_UPSCALER_CONFIG, "seedreuse_tiny": "ltx2-upscaler"})


def build_minimax(path: str) -> None:
    import comfy.ops
    from comfy.ldm.minimax.model import MiniMaxH3Model

    m = MiniMaxH3Model(hidden_size=128, num_layers=1, token_refiner_num_layers=1, num_attention_heads=1,
                       attention_head_dim=128, ffn_hidden_size=256, text_dim=5120, timestep_input_dim=256,
                       time_embed_hidden_size=128, time_embed_dim=64, operations=comfy.ops.disable_weight_init)
    sd = base._init_tensors(m, SEED + 5)
    import torch
    # the real rope.inv_freq buffer: 1 / 10000^(2i / 32) over its 16 entries (not a random vector)
    sd["rope.inv_freq"] = (1.0 / (10000.0 ** (torch.arange(0, 16, dtype=torch.float32) * 2 / 32))).contiguous()
    base._save(sd, path, {"seedreuse_tiny": "minimax-h3", "hidden": 128})


def _meta(build):
    import torch

    with torch.device("meta"):
        return build()


def build_minimax_audio_vae(path: str) -> None:
    import torch
    from comfy.ldm.minimax.audio_vae import MiniMaxH3AudioVAE

    m = _meta(MiniMaxH3AudioVAE)
    sd = {k: v.to(torch.bfloat16).contiguous() if v.is_floating_point() else v
          for k, v in _tame_statistics(base._init_tensors(m, SEED + 6)).items()}
    del m
    base._save(sd, path, {"seedreuse_tiny": "minimax-h3-audio-vae", "size": "full", "dtype": "bf16"})


def tiny_minimax_video_vae(params: dict):
    """The host's MiniMaxH3VideoVAE at ``params`` (ch, ch_mult, num_res_blocks, decoder widths)."""
    import comfy.ops
    from comfy.ldm.minimax import vae as mvae

    p = dict(params)
    dec = p.pop("decoder")
    m = mvae.MiniMaxH3VideoVAE(operations=comfy.ops.disable_weight_init, **p)
    m.decoder = mvae.ViT3DDecoder(patch_size=m.vae_ratio, patch_size_t=m.vae_ratio_t, in_channels=24,
                                  out_channels=3, operations=comfy.ops.disable_weight_init, **dec)
    return m


def build_minimax_video_vae(path: str) -> None:
    m = tiny_minimax_video_vae(MINIMAX_VIDEO_VAE_PARAMS)
    sd = _tame_statistics(base._init_tensors(m, SEED + 7))
    _save_config(sd, path, {"tiny_vae": "minimax_h3_video", "params": MINIMAX_VIDEO_VAE_PARAMS})


def build_hv15(path: str) -> None:
    import comfy.ops
    from comfy.ldm.hunyuan_video.model import HunyuanVideo

    m = HunyuanVideo(image_model="hunyuan_video", in_channels=65, out_channels=32, patch_size=[1, 1, 1],
                     vec_in_dim=None, axes_dim=[16, 56, 56], meanflow=False, context_in_dim=3584,
                     hidden_size=128, mlp_ratio=4.0, num_heads=1, depth=1, depth_single_blocks=1, theta=256,
                     qkv_bias=True, byt5=True, guidance_embed=False, use_cond_type_embedding=True,
                     vision_in_dim=1152, meanflow_sum=True, operations=comfy.ops.disable_weight_init)
    base._save(base._init_tensors(m, SEED + 8), path, {"seedreuse_tiny": "hunyuan-video-1.5-i2v", "hidden": 128})


def tiny_hv15_vae(params: dict):
    """The host's HunyuanVideo 1.5 VAE (AutoencodingEngine with vae_refiner Encoder / Decoder, the
    ddconfig of comfy/sd.py) with ``params`` replacing its widths."""
    from comfy.ldm.models.autoencoder import AutoencodingEngine

    ddconfig = {"block_out_channels": [128, 256, 512, 1024, 1024], "in_channels": 3, "out_channels": 3,
                "num_res_blocks": 2, "ffactor_spatial": 16, "ffactor_temporal": 4, "downsample_match_channel": True,
                "upsample_match_channel": True, "z_channels": 32, **params}
    return AutoencodingEngine(regularizer_config={"target": "comfy.ldm.models.autoencoder.EmptyRegularizer"},
                              encoder_config={"target": "comfy.ldm.hunyuan_video.vae_refiner.Encoder", "params": ddconfig},
                              decoder_config={"target": "comfy.ldm.hunyuan_video.vae_refiner.Decoder", "params": ddconfig})


def build_hv15_vae(path: str) -> None:
    m = tiny_hv15_vae(HV15_VAE_PARAMS)
    _save_config(base._init_tensors(m, SEED + 9), path, {"tiny_vae": "hunyuan_video_15", "params": HV15_VAE_PARAMS})


def verify(out: str) -> dict:
    import comfy.sd
    import comfy.utils

    info = {}
    ckpt = os.path.join(out, "checkpoints", LTX2)
    model, clip, vae, _ = comfy.sd.load_checkpoint_guess_config(ckpt, output_vae=True, output_clip=False)[:4]
    want = {"model": "LTXAV", "vae": "comfy.ldm.lightricks.vae.causal_video_autoencoder"}
    got = {"model": type(model.model.model_config).__name__, "vae": type(vae.first_stage_model).__module__}
    if got != want:
        raise RuntimeError(f"{LTX2}: detected {got}, want {want}")
    info[LTX2] = {**got, "params": sum(p.numel() for p in model.model.diffusion_model.parameters()),
                  "vae_params": sum(p.numel() for p in vae.first_stage_model.parameters())}
    del model, vae
    sd, metadata = comfy.utils.load_torch_file(ckpt, return_metadata=True)
    sd = comfy.utils.state_dict_prefix_replace(sd, {"audio_vae.": "autoencoder.", "vocoder.": "vocoder."}, filter_keys=True)
    audio = comfy.sd.VAE(sd=sd, metadata=metadata)
    audio.throw_exception_if_invalid()
    info[LTX2]["audio_vae"] = type(audio.first_stage_model).__name__
    del audio, sd
    for fname, want in ((MINIMAX, "MiniMaxH3"), (HV15, "HunyuanVideo15")):
        sd = comfy.utils.load_torch_file(os.path.join(out, "diffusion_models", fname), safe_load=True)
        model = comfy.sd.load_diffusion_model_state_dict(sd)
        del sd
        got = type(model.model.model_config).__name__ if model is not None else None
        if got != want:
            raise RuntimeError(f"{fname}: detected as {got}, want {want}")
        info[fname] = {"model_config": got, "params": sum(p.numel() for p in model.model.diffusion_model.parameters())}
        del model
    sd = comfy.utils.load_torch_file(os.path.join(out, "vae", MINIMAX_AUDIO_VAE), safe_load=True)
    audio = comfy.sd.VAE(sd=sd)
    del sd
    if type(audio.first_stage_model).__name__ != "MiniMaxH3AudioVAE":
        raise RuntimeError(f"{MINIMAX_AUDIO_VAE}: detected as {type(audio.first_stage_model)}")
    info[MINIMAX_AUDIO_VAE] = {"params": sum(p.numel() for p in audio.first_stage_model.parameters())}
    del audio
    return info


def main(argv: list[str]) -> int:
    comfy_dir, out = argv[1], argv[2]
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import torch

    torch.manual_seed(SEED)
    steps = [
        ("ltx2", lambda: build_ltx2(os.path.join(out, "checkpoints", LTX2))),
        ("ltx2_upscaler", lambda: build_ltx2_upscaler(os.path.join(out, "latent_upscale_models", LTX2_UPSCALER))),
        ("minimax", lambda: build_minimax(os.path.join(out, "diffusion_models", MINIMAX))),
        ("minimax_audio_vae", lambda: build_minimax_audio_vae(os.path.join(out, "vae", MINIMAX_AUDIO_VAE))),
        ("minimax_video_vae", lambda: build_minimax_video_vae(os.path.join(out, "vae", MINIMAX_VIDEO_VAE))),
        ("hv15", lambda: build_hv15(os.path.join(out, "diffusion_models", HV15))),
        ("hv15_vae", lambda: build_hv15_vae(os.path.join(out, "vae", HV15_VAE))),
        ("placeholders", lambda: [base.build_placeholder(kind, os.path.join(out, folder, name))
                                  for (folder, name), kind in sorted(PLACEHOLDERS.items())]),
    ]
    times = {}
    for name, fn in steps:
        t0 = time.perf_counter()
        fn()
        times[name] = round(time.perf_counter() - t0, 3)
    t1 = time.perf_counter()
    info = verify(out)
    times["verify"] = round(time.perf_counter() - t1, 3)
    sizes = {f"{folder}/{f}": os.path.getsize(os.path.join(out, folder, f))
             for folder in sorted(os.listdir(out)) for f in sorted(os.listdir(os.path.join(out, folder)))}
    print("SEEDREUSE_VIDEO_FAMILY_MODELS " + json.dumps({"seconds": times, "detected": info, "bytes": sizes}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
