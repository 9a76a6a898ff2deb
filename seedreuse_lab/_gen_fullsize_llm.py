"""Generator of Z-Image's text encoder at its real size (run by fullsize_models.py in a subprocess).

usage: PYTHONPATH=<repo>:<comfyui_dir> python -m seedreuse_lab._gen_fullsize_llm <comfyui_dir> <out_models_dir>

    text_encoders/qwen_3_4b.safetensors   comfy.text_encoders.llama.Qwen3_4B (Qwen3_4BConfig: 36 layers,
                                          width 2560, vocabulary 151936): what CLIPLoader builds for this
                                          file with type lumina2 (Z-Image) or flux2 (Flux.2 Klein 4B);
                                          4.02 B parameters, bf16 as the official file, ~8.0 GB

The file is the model's state dict (the keys comfy.sd.detect_te_model reads as QWEN3_4B), written
tensor by tensor from one seeded generator (_gen_fullsize_models.stream_safetensors: one chunk in
memory, a progress bar on stderr, a temporary name renamed when done) and checked without
loading it: its keys are exactly the host class's state dict, the detection says Qwen3 4B on the
header's shapes, and the host's Z-Image tokenizer (its qwen25_tokenizer files, in the host
tree: the real checkpoint carries no tokenizer) tokenizes within the vocabulary. Random weights
cost what a checkpoint costs: the loader reads and the encoder multiplies the same shapes.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

from ._gen_fullsize_models import stream_safetensors

SEED = 20261206
FILE = ("text_encoders", "qwen_3_4b.safetensors")


def qwen3_4b_shapes() -> dict:
    import torch

    import comfy.ops
    import comfy.text_encoders.llama as llama

    with torch.device("meta"):
        m = llama.Qwen3_4B({}, torch.bfloat16, "meta", comfy.ops.disable_weight_init)
    return {k: tuple(v.shape) for k, v in m.state_dict().items()}


def verify(path: str, shapes: dict) -> dict:
    import torch

    import comfy.sd
    from comfy.text_encoders.z_image import ZImageTokenizer
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        keys = set(f.keys())
        meta_sd = {k: torch.empty(f.get_slice(k).get_shape(), device="meta") for k in keys}
    if keys != set(shapes):
        raise RuntimeError(f"keys differ from the host's Qwen3_4B: missing {sorted(set(shapes) - keys)[:5]}, "
                           f"extra {sorted(keys - set(shapes))[:5]}")
    detected = comfy.sd.detect_te_model(meta_sd)
    if detected != comfy.sd.TEModel.QWEN3_4B:
        raise RuntimeError(f"detected as {detected}, want QWEN3_4B")
    ids = [t[0] for t in ZImageTokenizer().tokenize_with_weights("a lighthouse at dusk")["qwen3_4b"][0]]
    vocab = shapes["model.embed_tokens.weight"][0]
    if not ids or max(ids) >= vocab:
        raise RuntimeError(f"tokenizer gave {len(ids)} ids, max {max(ids, default=None)} (vocabulary {vocab})")
    return {"detected": str(detected), "tokens": len(ids), "vocab": vocab}


def main(argv: list[str]) -> int:
    comfy_dir, out = argv[1], argv[2]
    if not os.path.isfile(os.path.join(comfy_dir, "main.py")):
        raise SystemExit(f"{comfy_dir} has no main.py")
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    t0 = time.perf_counter()
    shapes = qwen3_4b_shapes()
    path = os.path.join(out, *FILE)
    meta = {"seedreuse_test": json.dumps({"random_weights": "Qwen3 4B (comfy.text_encoders.llama.Qwen3_4B)",
                                          "seed": SEED}, sort_keys=True)}
    stream_safetensors(path, shapes, SEED, {}, meta, label="Qwen3 4B", dtype="BF16")
    rep = {"qwen3_4b": {"parameters": sum(math.prod(s) for s in shapes.values()), "tensors": len(shapes),
                        "bytes": os.path.getsize(path), "write_s": round(time.perf_counter() - t0, 1),
                        "verified": verify(path, shapes)}}
    rep["seconds"] = round(time.perf_counter() - t0, 1)
    print("SEEDREUSE_FULLSIZE_LLM " + json.dumps(rep), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
