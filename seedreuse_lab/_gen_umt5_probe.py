"""Would a full-size umT5-XXL (random weights) run here? Measured, not guessed (run by bench_real.py).

usage: PYTHONPATH=<repo>:<comfyui_dir> python -m seedreuse_lab._gen_umt5_probe <comfyui_dir> [tokens]

Counts the parameters of ComfyUI's own umT5-XXL encoder (comfy.text_encoders.t5.T5 with
umt5_config_xxl.json, the model CLIPLoader type "wan" builds) on the meta device (no memory),
then generates ONE of its 24 blocks with seeded random fp16 weights (every umT5 block has its own
relative attention bias) and times its forward on ``tokens`` tokens (512: WanT5Tokenizer pads to
at least 512) with fp16 weights cast per op, as ComfyUI runs a text encoder on the CPU. Prints
one JSON line: parameters, the fp16 size, the RAM it would need, one block's time x 24.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time


def main(argv: list[str]) -> int:
    comfy_dir, tokens = argv[1], int(argv[2]) if len(argv) > 2 else 512
    if not os.path.isfile(os.path.join(comfy_dir, "main.py")):
        raise SystemExit(f"{comfy_dir} has no main.py")
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import torch
    import comfy.model_management
    import comfy.ops
    import comfy.text_encoders.t5 as t5
    from comfy.ldm.modules.attention import optimized_attention_for_device

    cfg_path = os.path.join(os.path.dirname(os.path.realpath(t5.__file__)), "umt5_config_xxl.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    with torch.device("meta"):
        full = t5.T5(cfg, torch.float16, "meta", comfy.ops.disable_weight_init)
    params = sum(p.numel() for p in full.state_dict().values())
    del full
    inner = cfg["d_kv"] * cfg["num_heads"]
    block = t5.T5Block(cfg["d_model"], inner, cfg["d_ff"], cfg["dense_act_fn"], cfg["is_gated_act"], cfg["num_heads"],
                       True, torch.float16, "cpu", comfy.ops.manual_cast)
    g = torch.Generator().manual_seed(5)
    t0 = time.perf_counter()
    with torch.no_grad():
        for name, p in block.state_dict().items():
            v = torch.randn(p.shape, generator=g, dtype=torch.float16)
            p.copy_(v.mul_(1.0 / math.sqrt(max(1, p.shape[-1]))) if p.dim() > 1 else v.mul_(0.02).add_(1.0))
    gen_s = time.perf_counter() - t0
    block_params = sum(p.numel() for p in block.state_dict().values())
    x = torch.randn((1, tokens, cfg["d_model"]), generator=g)
    attn = optimized_attention_for_device(x.device, mask=False, small_input=True)
    times = []
    with torch.no_grad():
        for _ in range(2):
            t0 = time.perf_counter()
            y, _bias = block(x, None, None, attn)
            times.append(time.perf_counter() - t0)
    mem = {}
    for line in open("/proc/meminfo"):
        k, v = line.split(":", 1)
        if k in ("MemTotal", "MemAvailable"):
            mem[k] = int(v.split()[0]) * 1024
    report = {
        "parameters": params, "fp16_bytes": 2 * params, "layers": cfg["num_layers"], "tokens": tokens,
        "text_encoder_dtype_cpu": str(comfy.model_management.text_encoder_dtype(torch.device("cpu"))),
        "block_parameters": block_params, "block_generate_s": round(gen_s, 3),
        "block_forward_s": [round(t, 3) for t in times], "finite": bool(torch.isfinite(y).all()),
        "encode_estimate_s": round(min(times) * cfg["num_layers"], 1),
        "mem_total": mem.get("MemTotal"), "mem_available": mem.get("MemAvailable"),
        "torch_threads": torch.get_num_threads(),
    }
    print("SEEDREUSE_UMT5_PROBE " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
