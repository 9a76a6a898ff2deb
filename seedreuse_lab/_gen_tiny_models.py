"""Generator of the tiny real models (run as a script by tiny_models.py, in a subprocess).

usage: PYTHONPATH=<repo>:<comfyui_dir> python -m seedreuse_lab._gen_tiny_models <comfyui_dir> <out_models_dir>

Builds the models from ComfyUI's own classes, fills every tensor with seeded random values, saves
them as safetensors under <out_models_dir>/<folder>/<file>, then loads each back through the
same detection code the stock loaders use (comfy.sd.load_diffusion_model_state_dict / comfy.sd.VAE)
so a broken generator fails here, not in a worker. The output is byte-for-byte deterministic.
Everything this file writes is a function of this file's text and the host's ComfyUI version
(tiny_models.py hashes both into the cache directory name).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time

SEED = 20250101


def _init_tensors(module, seed: int) -> dict:
    """Seeded, numerically tame values for every parameter/buffer, in state_dict order."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in module.state_dict().items():
        shape = tuple(t.shape)
        leaf = name.rsplit(".", 1)[-1]
        if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            out[name] = t.clone()
            continue
        if len(shape) <= 1:
            if leaf in ("gamma",) or "norm" in name and leaf == "weight":
                v = 1.0 + 0.05 * torch.randn(shape, generator=g)
            else:  # biases and other vectors
                v = 0.02 * torch.randn(shape, generator=g)
        elif "modulation" in name or "emb_pos" in name:
            v = 0.02 * torch.randn(shape, generator=g)
        else:
            fan_in = max(1, math.prod(shape[1:]))
            v = torch.randn(shape, generator=g) / math.sqrt(fan_in)
        out[name] = v.to(torch.float32).contiguous()
    return out


def _save(tensors: dict, path: str, metadata: dict) -> None:
    from safetensors.torch import save_file

    os.makedirs(os.path.dirname(path), exist_ok=True)
    # One metadata key only: safetensors writes the metadata map in hash order, so several keys
    # would make the file bytes (and every hash derived from them) differ from run to run.
    save_file(tensors, path, metadata={"seedreuse_test": json.dumps(metadata, sort_keys=True)})


def build_wan21(model_type: str, path: str) -> dict:
    import comfy.ldm.wan.model
    import comfy.ops

    in_dim = 36 if model_type == "i2v" else 16
    m = comfy.ldm.wan.model.WanModel(
        model_type=model_type, in_dim=in_dim, dim=128, ffn_dim=256, num_heads=1, num_layers=1,
        out_dim=16, text_dim=4096, freq_dim=256, operations=comfy.ops.disable_weight_init)
    sd = _init_tensors(m, SEED + (1 if model_type == "i2v" else 0))
    _save(sd, path, {"seedreuse_tiny": f"wan2.1-{model_type}", "dim": 128})
    return sd


def build_wan21_vae(path: str, dim: int = 8) -> dict:
    import comfy.ldm.wan.vae

    m = comfy.ldm.wan.vae.WanVAE(dim=dim, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                                 attn_scales=[], temperal_downsample=[False, True, True], dropout=0.0)
    sd = _init_tensors(m, SEED + 2)
    _save(sd, path, {"seedreuse_tiny": "wan2.1-vae", "dim": dim})
    return sd


def build_placeholder(kind: str, path: str) -> None:
    """A few random tensors; the file's sha256 seeds the stand-in encoder's outputs."""
    import torch

    g = torch.Generator().manual_seed(int.from_bytes(hashlib.sha256(kind.encode()).digest()[:4], "little"))
    sd = {f"standin.{kind}.w{i}": torch.randn((8, 8), generator=g) for i in range(3)}
    _save(sd, path, {"standin": kind})


def verify(out: str, t2v_sd: dict, i2v_sd: dict, vae_sd: dict) -> dict:
    """Load every model with the detection the stock loaders (UNETLoader, VAELoader) use."""
    import comfy.model_detection
    import comfy.sd
    import comfy.utils

    info = {}
    for name, want, fname in (("t2v", "WAN21_T2V", "tiny_wan21_t2v.safetensors"),
                              ("i2v", "WAN21_I2V", "tiny_wan21_i2v.safetensors")):
        sd = comfy.utils.load_torch_file(os.path.join(out, "diffusion_models", fname), safe_load=True)
        model = comfy.sd.load_diffusion_model_state_dict(sd)
        if model is None:
            raise RuntimeError(f"{fname}: not detected as a diffusion model")
        got = type(model.model.model_config).__name__
        if got != want:
            raise RuntimeError(f"{fname}: detected as {got}, want {want}")
        info[name] = got
    sd = comfy.utils.load_torch_file(os.path.join(out, "vae", "tiny_wan21_vae.safetensors"), safe_load=True)
    vae = comfy.sd.VAE(sd=sd)
    if type(vae.first_stage_model).__module__ != "comfy.ldm.wan.vae" or vae.latent_channels != 16:
        raise RuntimeError(f"tiny vae detected as {type(vae.first_stage_model)}")
    info["vae"] = type(vae.first_stage_model).__module__
    return info


def main(argv: list[str]) -> int:
    comfy_dir, out = argv[1], argv[2]
    # ComfyUI is importable through PYTHONPATH (host.module_env); comfy_dir is checked only
    if not os.path.isfile(os.path.join(comfy_dir, "main.py")):
        raise SystemExit(f"{comfy_dir} has no main.py")
    sys.argv = [sys.argv[0], "--cpu"]  # comfy.cli_args parses sys.argv on import ...
    import comfy.options

    comfy.options.enable_args_parsing()  # ... only when enabled (main.py does this)
    t0 = time.perf_counter()
    import torch

    torch.manual_seed(SEED)
    t2v = build_wan21("t2v", os.path.join(out, "diffusion_models", "tiny_wan21_t2v.safetensors"))
    i2v = build_wan21("i2v", os.path.join(out, "diffusion_models", "tiny_wan21_i2v.safetensors"))
    vae = build_wan21_vae(os.path.join(out, "vae", "tiny_wan21_vae.safetensors"))
    build_placeholder("umt5", os.path.join(out, "text_encoders", "standin_umt5.safetensors"))
    build_placeholder("clip_vision_h", os.path.join(out, "clip_vision", "standin_clip_vision.safetensors"))
    build_placeholder("wav2vec2", os.path.join(out, "audio_encoders", "standin_wav2vec2.safetensors"))
    t1 = time.perf_counter()
    info = verify(out, t2v, i2v, vae)
    t2 = time.perf_counter()
    report = {"generate_s": round(t1 - t0, 3), "verify_s": round(t2 - t1, 3), "detected": info}
    print("SEEDREUSE_TINY_MODELS " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
