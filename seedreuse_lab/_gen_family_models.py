"""Generator of the support-matrix models (run as a script by family_models.py, in a subprocess).

usage: PYTHONPATH=<repo>:<comfyui_dir> python -m seedreuse_lab._gen_family_models <comfyui_dir> <out_models_dir>

The model families of the support matrix beyond Wan 2.1, each built from ComfyUI's own classes
with seeded random weights and loaded back through the stock loaders' detection:

    diffusion_models/tiny_wan22_t2v_high_noise.safetensors  Wan 2.2 A14B high-noise expert (WanModel t2v, dim 128)
    diffusion_models/tiny_wan22_t2v_low_noise.safetensors   Wan 2.2 A14B low-noise expert  (WanModel t2v, dim 128)
    diffusion_models/tiny_wan22_ti2v_5b.safetensors         Wan 2.2 TI2V 5B (WanModel in/out_dim 48, dim 128)
    vae/tiny_wan22_vae.safetensors                          Wan 2.2 VAE: the host fixes its config (dim 160,
                                                            dec_dim 256, z_dim 48), so it is full size: ~705M
                                                            parameters, stored bf16 (~1.4 GB)
    diffusion_models/tiny_qwen_image.safetensors            Qwen-Image with ONE transformer block: the host reads
                                                            only in_channels and the block count from the file
                                                            (width 3072, text width 3584 fixed): ~380M parameters,
                                                            stored bf16 (~0.76 GB)
    text_encoders/standin_qwen25_vl.safetensors             placeholder for the stand-in Qwen2.5-VL encoder
    model_patches/standin_infinitetalk.safetensors          placeholder for the stand-in InfiniteTalk patch

The Qwen-Image VAE is the Wan 2.1 VAE architecture (comfy/ldm/wan/vae.py, detected by
decoder.head.0.gamma): the tests use the base tiny Wan 2.1 VAE for it.

Everything written is a function of this file's text, _gen_tiny_models.py's text (helpers) and
the host's ComfyUI version (family_models.py hashes all three into the cache directory name).
"""
from __future__ import annotations

import json
import os
import sys
import time

from . import _gen_tiny_models as base  # _init_tensors, _save, build_placeholder

SEED = base.SEED + 100

HIGH = "tiny_wan22_t2v_high_noise.safetensors"
LOW = "tiny_wan22_t2v_low_noise.safetensors"
TI2V = "tiny_wan22_ti2v_5b.safetensors"
VAE22 = "tiny_wan22_vae.safetensors"
QWEN = "tiny_qwen_image.safetensors"
QWEN_TE = "standin_qwen25_vl.safetensors"
INFINITETALK_PATCH = "standin_infinitetalk.safetensors"


def _init_bf16(module, seed: int) -> dict:
    """base._init_tensors' values (same generator stream, same rules), each tensor converted to
    bf16 as soon as it is drawn, so the float32 copy of a large model never exists whole."""
    import math

    import torch

    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in module.state_dict().items():
        shape = tuple(t.shape)
        leaf = name.rsplit(".", 1)[-1]
        if len(shape) <= 1:
            if leaf in ("gamma",) or "norm" in name and leaf == "weight":
                v = 1.0 + 0.05 * torch.randn(shape, generator=g)
            else:
                v = 0.02 * torch.randn(shape, generator=g)
        elif "modulation" in name or "emb_pos" in name:
            v = 0.02 * torch.randn(shape, generator=g)
        else:
            v = torch.randn(shape, generator=g) / math.sqrt(max(1, math.prod(shape[1:])))
        out[name] = v.to(torch.bfloat16).contiguous()
    return out


def _meta(build):
    """Build a module on the meta device: only names and shapes are needed."""
    import torch

    with torch.device("meta"):
        return build()


def build_wan_expert(path: str, seed: int, name: str) -> None:
    import comfy.ldm.wan.model
    import comfy.ops

    m = comfy.ldm.wan.model.WanModel(
        model_type="t2v", in_dim=16, dim=128, ffn_dim=256, num_heads=1, num_layers=1, out_dim=16,
        text_dim=4096, freq_dim=256, operations=comfy.ops.disable_weight_init)
    base._save(base._init_tensors(m, seed), path, {"seedreuse_tiny": name, "dim": 128})


def build_wan22_ti2v(path: str) -> None:
    import comfy.ldm.wan.model
    import comfy.ops

    m = comfy.ldm.wan.model.WanModel(
        model_type="t2v", in_dim=48, dim=128, ffn_dim=256, num_heads=1, num_layers=1, out_dim=48,
        text_dim=4096, freq_dim=256, operations=comfy.ops.disable_weight_init)
    base._save(base._init_tensors(m, SEED + 3), path, {"seedreuse_tiny": "wan2.2-ti2v-5b", "dim": 128})


def build_wan22_vae(path: str) -> None:
    import comfy.ldm.wan.vae2_2

    # exactly the ddconfig comfy.sd.VAE builds for a Wan 2.2 VAE state dict
    m = _meta(lambda: comfy.ldm.wan.vae2_2.WanVAE(
        dim=160, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
        temperal_downsample=[False, True, True], dropout=0.0))
    sd = _init_bf16(m, SEED + 4)
    del m
    base._save(sd, path, {"seedreuse_tiny": "wan2.2-vae", "dim": 160, "dtype": "bf16"})


def build_qwen_image(path: str) -> None:
    import comfy.ldm.qwen_image.model
    import comfy.ops

    m = _meta(lambda: comfy.ldm.qwen_image.model.QwenImageTransformer2DModel(
        in_channels=64, num_layers=1, image_model="qwen_image", operations=comfy.ops.disable_weight_init))
    sd = _init_bf16(m, SEED + 5)
    del m
    base._save(sd, path, {"seedreuse_tiny": "qwen-image-1-block", "dtype": "bf16"})


def verify(out: str) -> dict:
    import comfy.sd
    import comfy.utils

    info = {}
    for fname, want in ((HIGH, "WAN21_T2V"), (LOW, "WAN21_T2V"), (TI2V, "WAN22_T2V"), (QWEN, "QwenImage")):
        sd = comfy.utils.load_torch_file(os.path.join(out, "diffusion_models", fname), safe_load=True)
        model = comfy.sd.load_diffusion_model_state_dict(sd)
        del sd
        if model is None:
            raise RuntimeError(f"{fname}: not detected as a diffusion model")
        got = type(model.model.model_config).__name__
        if got != want:
            raise RuntimeError(f"{fname}: detected as {got}, want {want}")
        info[fname] = {"model_config": got, "model": type(model.model.diffusion_model).__name__,
                       "latent_channels": model.model.latent_format.latent_channels,
                       "params": sum(p.numel() for p in model.model.diffusion_model.parameters())}
        del model
    sd = comfy.utils.load_torch_file(os.path.join(out, "vae", VAE22), safe_load=True)
    vae = comfy.sd.VAE(sd=sd)
    del sd
    if type(vae.first_stage_model).__module__ != "comfy.ldm.wan.vae2_2" or vae.latent_channels != 48:
        raise RuntimeError(f"{VAE22}: detected as {type(vae.first_stage_model)} ({vae.latent_channels} channels)")
    info[VAE22] = {"module": type(vae.first_stage_model).__module__, "latent_channels": vae.latent_channels,
                   "params": sum(p.numel() for p in vae.first_stage_model.parameters())}
    return info


def main(argv: list[str]) -> int:
    comfy_dir, out = argv[1], argv[2]
    # ComfyUI is importable through PYTHONPATH (host.module_env)
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import torch

    torch.manual_seed(SEED)
    times = {}
    steps = [
        ("experts", lambda: (build_wan_expert(os.path.join(out, "diffusion_models", HIGH), SEED + 1, "wan2.2-high-noise"),
                             build_wan_expert(os.path.join(out, "diffusion_models", LOW), SEED + 2, "wan2.2-low-noise"))),
        ("ti2v", lambda: build_wan22_ti2v(os.path.join(out, "diffusion_models", TI2V))),
        ("wan22_vae", lambda: build_wan22_vae(os.path.join(out, "vae", VAE22))),
        ("qwen_image", lambda: build_qwen_image(os.path.join(out, "diffusion_models", QWEN))),
        ("placeholders", lambda: (base.build_placeholder("qwen25_vl", os.path.join(out, "text_encoders", QWEN_TE)),
                                  base.build_placeholder("infinitetalk", os.path.join(out, "model_patches",
                                                                                      INFINITETALK_PATCH)))),
    ]
    for name, fn in steps:
        t0 = time.perf_counter()
        fn()
        times[name] = round(time.perf_counter() - t0, 3)
    t1 = time.perf_counter()
    info = verify(out)
    times["verify"] = round(time.perf_counter() - t1, 3)
    sizes = {}
    for folder in sorted(os.listdir(out)):
        for f in sorted(os.listdir(os.path.join(out, folder))):
            sizes[f"{folder}/{f}"] = os.path.getsize(os.path.join(out, folder, f))
    print("SEEDREUSE_FAMILY_MODELS " + json.dumps({"seconds": times, "detected": info, "bytes": sizes}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
