"""Generator of the models the STOCK InfiniteTalk nodes need (run as a script by infinitetalk_models.py).

usage: PYTHONPATH=<repo>:<comfyui_dir> python -m seedreuse_lab._gen_infinitetalk_models <comfyui_dir> <out_models_dir>

Only for a host that has WanInfiniteTalkToVideo and the MultiTalk model patch (ComfyUI 0.33;
host.has_stock_infinitetalk). Built from the host's own classes with seeded random weights and
loaded back the way the stock loaders do:

    diffusion_models/tiny_wan21_i2v_talk.safetensors  Wan 2.1 I2V (img_emb, in_dim 36), dim 320, 1 layer.
                                                      The patch's audio cross-attention has 40 heads
                                                      (fixed by the host) with a rotary embedding for two
                                                      speakers (even head width), and its speaker map
                                                      splits the model's heads in two (the host detects
                                                      dim // 128 heads): dim 320 = 40 x 8 with 2 heads
                                                      meets all three; the base tiny I2V (dim 128) none.
    model_patches/tiny_infinitetalk.safetensors       MultiTalkModelPatch in the key layout ModelPatchLoader
                                                      detects ("audio_proj.proj1.weight"): the host fixes
                                                      40 attention blocks, wav2vec2 base input (12 layers x
                                                      768, 5-frame window) and 32 context tokens; in_dim =
                                                      320 (the model width), intermediate and out width 32.

Everything written is a function of this file's text, _gen_tiny_models.py's text (helpers) and
the host's ComfyUI version (infinitetalk_models.py hashes all three into the cache directory name).
"""
from __future__ import annotations

import json
import os
import sys
import time

from . import _gen_tiny_models as base  # _init_tensors, _save

SEED = base.SEED + 200
DIM = 320            # 40 audio heads x 8 (even, for the two-speaker rotary), 2 model heads (the speaker map halves them)
PATCH_WIDTH = 32     # intermediate_dim and out_dim of the tiny patch

I2V_TALK = "tiny_wan21_i2v_talk.safetensors"
PATCH = "tiny_infinitetalk.safetensors"


def build_i2v(path: str) -> None:
    import comfy.ldm.wan.model
    import comfy.ops

    m = comfy.ldm.wan.model.WanModel(
        model_type="i2v", in_dim=36, dim=DIM, ffn_dim=256, num_heads=DIM // 128, num_layers=1, out_dim=16,
        text_dim=4096, freq_dim=256, operations=comfy.ops.disable_weight_init)
    base._save(base._init_tensors(m, SEED + 1), path, {"seedreuse_tiny": "wan2.1-i2v-talk", "dim": DIM})


def build_patch(path: str) -> None:
    import comfy.ops
    from comfy_extras.nodes_model_patch import MultiTalkModelPatch

    # ModelPatchLoader builds exactly this from the file: audio_window 5, context_tokens 32,
    # vae_scale 4, 40 blocks; in/intermediate/out widths read from the tensors
    m = MultiTalkModelPatch(audio_window=5, context_tokens=32, vae_scale=4, in_dim=DIM,
                            intermediate_dim=PATCH_WIDTH, out_dim=PATCH_WIDTH,
                            operations=comfy.ops.disable_weight_init)
    base._save(base._init_tensors(m, SEED + 2), path, {"seedreuse_tiny": "infinitetalk-patch", "in_dim": DIM,
                                                       "width": PATCH_WIDTH})


def verify(out: str) -> dict:
    """The I2V through UNETLoader's detection, the patch through ModelPatchLoader itself."""
    import comfy.sd
    import comfy.utils
    import folder_paths
    from comfy_extras.nodes_model_patch import ModelPatchLoader, MultiTalkModelPatch

    sd = comfy.utils.load_torch_file(os.path.join(out, "diffusion_models", I2V_TALK), safe_load=True)
    model = comfy.sd.load_diffusion_model_state_dict(sd)
    got = type(model.model.model_config).__name__ if model is not None else None
    if got != "WAN21_I2V":
        raise RuntimeError(f"{I2V_TALK}: detected as {got}, want WAN21_I2V")
    folder_paths.add_model_folder_path("model_patches", os.path.join(out, "model_patches"), is_default=True)
    (patcher,) = ModelPatchLoader().load_model_patch(PATCH)
    if not isinstance(patcher.model, MultiTalkModelPatch):
        raise RuntimeError(f"{PATCH}: ModelPatchLoader built {type(patcher.model).__name__}, want MultiTalkModelPatch")
    return {I2V_TALK: got, PATCH: {"class": type(patcher.model).__name__, "blocks": len(patcher.model.blocks),
                                   "params": sum(p.numel() for p in patcher.model.parameters())}}


def main(argv: list[str]) -> int:
    comfy_dir, out = argv[1], argv[2]
    if not os.path.isfile(os.path.join(comfy_dir, "main.py")):
        raise SystemExit(f"{comfy_dir} has no main.py")
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import torch

    torch.manual_seed(SEED)
    t0 = time.perf_counter()
    build_i2v(os.path.join(out, "diffusion_models", I2V_TALK))
    build_patch(os.path.join(out, "model_patches", PATCH))
    t1 = time.perf_counter()
    info = verify(out)
    report = {"generate_s": round(t1 - t0, 3), "verify_s": round(time.perf_counter() - t1, 3), "detected": info}
    print("SEEDREUSE_INFINITETALK_MODELS " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
