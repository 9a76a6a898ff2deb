"""Generator of the full-size Wan 2.1 text encoder and VAE (run by fullsize_models.py in a subprocess).

usage: PYTHONPATH=<repo>:<comfyui_dir> python -m seedreuse_lab._gen_fullsize_models <comfyui_dir> <out_models_dir>

Two files with seeded random fp16 weights, each the state dict of the class the stock loader
instantiates for it, under the names the official Wan 2.1 templates use:

    text_encoders/umt5_xxl_fp16.safetensors  comfy.text_encoders.t5.T5 with umt5_config_xxl.json (what
                                             CLIPLoader type "wan" builds: 24 blocks, d_model 4096,
                                             vocab 256384), 5.68 B parameters, ~11.4 GB; plus the
                                             tokenizer CLIPLoader reads from the file itself: a
                                             SentencePiece model in the ``spiece_model`` tensor (trained
                                             here on a seeded synthetic corpus with umT5's special ids:
                                             pad 0, eos 1, unk 2)
    vae/wan_2.1_vae.safetensors              comfy.ldm.wan.vae.WanVAE, dim 96, z_dim 16 (what VAELoader
                                             detects as the Wan 2.1 VAE), ~254 MB

The umT5 file is written tensor by tensor: the model is built on the meta device (no memory),
the safetensors header is computed from its shapes, and each tensor is drawn from one seeded
generator in chunks of at most CHUNK values and appended to the file, so the peak memory is one
chunk (never a copy of the model). A progress bar goes to stderr. The file is then checked
without loading it: its keys are exactly the model's state dict, ``comfy.sd.detect_te_model``
says T5-XXL on the header's shapes, and the tokenizer loads through ComfyUI's WanT5Tokenizer.
The VAE is small: built, filled and loaded back through ``comfy.sd.VAE``. Random weights cost the
same time and memory as a checkpoint's: the loaders read and the encoders multiply the same shapes.
"""
from __future__ import annotations

import io
import json
import math
import os
import random
import sys
import time

SEED = 20251205
CHUNK = 1 << 25          # values drawn per step (64 MiB of fp16)
UMT5_FILE = ("text_encoders", "umt5_xxl_fp16.safetensors")
VAE_FILE = ("vae", "wan_2.1_vae.safetensors")
SPM_VOCAB = 4000


def _progress(done: int, total: int, t0: float, what: str) -> None:
    frac = done / total if total else 1.0
    bar = "#" * int(30 * frac)
    rate = done / max(1e-9, time.perf_counter() - t0) / 2 ** 20
    print(f"\r[{bar:<30}] {100 * frac:5.1f}% {done / 2 ** 30:6.2f}/{total / 2 ** 30:.2f} GiB {rate:6.0f} MiB/s {what}",
          end="" if done < total else "\n", file=sys.stderr, flush=True)


def _scale(name: str, shape: tuple) -> tuple[float, float]:
    """(std, mean) of a tensor's values: norm weights ~1, biases and embeddings ~0.02,
    matrices and convolutions ~1/sqrt(fan_in)."""
    leaf = name.rsplit(".", 1)[-1]
    if len(shape) <= 1 or leaf in ("gamma", "original0"):
        norm = ("norm" in name or "layer_norm" in name) and leaf == "weight" or leaf == "gamma"
        return 0.02, (1.0 if norm else 0.0)
    if "embed" in name or "shared" in name or "relative_attention_bias" in name:
        return 0.02, 0.0
    return 1.0 / math.sqrt(max(1, math.prod(shape[1:]))), 0.0


def train_tokenizer() -> bytes:
    """A SentencePiece unigram model trained on a seeded synthetic corpus (deterministic: one
    thread, no sampling of the input), with umT5's special ids."""
    import sentencepiece as spm

    rng = random.Random(SEED)
    syll = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(6000)]
    corpus = "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(4, 16))) for _ in range(20000))
    spm.set_random_generator_seed(SEED)
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus.splitlines()), model_writer=out,
                                   vocab_size=SPM_VOCAB, model_type="unigram", pad_id=0, eos_id=1, unk_id=2,
                                   bos_id=-1, num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
                                   minloglevel=2)
    return out.getvalue()


def _umt5_meta_state(comfy_t5):
    import torch
    import comfy.ops

    cfg_path = os.path.join(os.path.dirname(os.path.realpath(comfy_t5.__file__)), "umt5_config_xxl.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    with torch.device("meta"):
        m = comfy_t5.T5(cfg, torch.float16, "meta", comfy.ops.disable_weight_init)
    return cfg, {k: tuple(v.shape) for k, v in m.state_dict().items()}


def stream_safetensors(path: str, shapes: dict, seed: int, extra: dict, metadata: dict, chunk: int = CHUNK,
                       label: str = "", dtype: str = "F16") -> int:
    """Write a safetensors file of ``dtype`` (F16 or BF16) tensors ``shapes`` (name -> shape), each
    drawn from one seeded generator in chunks of at most ``chunk`` values (scaled by _scale), in
    sorted name order, then the uint8 tensors ``extra`` (name -> bytes); at most one chunk in
    memory. Written to a temporary name, fsynced, renamed. Returns the file's size."""
    import numpy as np
    import torch

    draw = {"F16": torch.float16, "BF16": torch.float32}[dtype]   # bf16 drawn in float32, then rounded
    names = sorted(shapes)
    header, off = {}, 0
    for n in names:
        nbytes = 2 * math.prod(shapes[n])
        header[n] = {"dtype": dtype, "shape": list(shapes[n]), "data_offsets": [off, off + nbytes]}
        off += nbytes
    data_bytes = off
    for n, blob in sorted(extra.items()):
        header[n] = {"dtype": "U8", "shape": [len(blob)], "data_offsets": [off, off + len(blob)]}
        off += len(blob)
    header["__metadata__"] = metadata
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-len(hjson) % 8)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    t0, done = time.perf_counter(), 0
    tmp = path + f".part-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(len(hjson).to_bytes(8, "little") + hjson)
        for n in names:
            std, mean = _scale(n, shapes[n])
            left = math.prod(shapes[n])
            while left:
                k = min(left, chunk)
                v = torch.randn((k,), generator=g, dtype=draw).mul_(std)
                if mean:
                    v.add_(mean)
                if dtype == "BF16":
                    v = v.to(torch.bfloat16).view(torch.int16)
                f.write(v.numpy().view(np.uint8).tobytes())
                left -= k
                done += 2 * k
                if label:
                    _progress(done, data_bytes, t0, n[:40])
        for _n, blob in sorted(extra.items()):
            f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return 8 + len(hjson) + off


def write_umt5(path: str) -> dict:
    """Stream the random-weight umT5-XXL + tokenizer to ``path`` in safetensors format."""
    import comfy.text_encoders.t5 as comfy_t5

    cfg, shapes = _umt5_meta_state(comfy_t5)
    spiece = train_tokenizer()
    t0 = time.perf_counter()
    meta = {"seedreuse_test": json.dumps(
        {"random_weights": "umT5-XXL (comfy.text_encoders.t5.T5, umt5_config_xxl.json)", "seed": SEED}, sort_keys=True)}
    stream_safetensors(path, shapes, SEED, {"spiece_model": spiece}, meta, label="umT5-XXL")
    return {"parameters": sum(math.prod(s) for s in shapes.values()), "tensors": len(shapes), "layers": cfg["num_layers"],
            "tokenizer_bytes": len(spiece), "write_s": round(time.perf_counter() - t0, 1)}


def verify_umt5(path: str) -> dict:
    """Keys, detection and tokenizer, without loading the 11 GB of weights."""
    import torch
    import comfy.sd
    import comfy.text_encoders.t5 as comfy_t5
    import comfy.text_encoders.wan as wan
    from safetensors import safe_open

    _cfg, shapes = _umt5_meta_state(comfy_t5)
    with safe_open(path, "pt") as f:
        keys = set(f.keys())
        meta_sd = {k: torch.empty(f.get_slice(k).get_shape(), device="meta") for k in keys if k != "spiece_model"}
        spiece = f.get_tensor("spiece_model")
    if keys - {"spiece_model"} != set(shapes):
        raise RuntimeError(f"umT5 keys differ from comfy's T5: missing {sorted(set(shapes) - keys)[:5]}")
    detected = comfy.sd.detect_te_model(meta_sd)
    if detected != comfy.sd.TEModel.T5_XXL:
        raise RuntimeError(f"umT5 file detected as {detected}, want T5_XXL")
    tok = wan.WanT5Tokenizer(tokenizer_data={"spiece_model": spiece})
    ids = [t[0] for t in tok.tokenize_with_weights("a red fox running through snow")["umt5xxl"][0]]
    if len(ids) < 512 or max(ids) >= shapes["shared.weight"][0]:
        raise RuntimeError(f"tokenizer gave {len(ids)} ids, max {max(ids)}")
    return {"detected": str(detected), "tokens": len(ids), "vocab": shapes["shared.weight"][0]}


def write_vae(path: str) -> dict:
    import torch
    import comfy.ldm.wan.vae
    import comfy.sd
    import comfy.utils
    from safetensors.torch import save_file

    m = comfy.ldm.wan.vae.WanVAE(dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                                 temperal_downsample=[False, True, True], dropout=0.0)
    g = torch.Generator().manual_seed(SEED + 1)
    sd = {}
    for n, t in m.state_dict().items():
        std, mean = _scale(n, tuple(t.shape))
        sd[n] = torch.randn(tuple(t.shape), generator=g, dtype=torch.float16).mul_(std).add_(mean)
    del m
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file(sd, path, metadata={"seedreuse_test": json.dumps({"random_weights": "Wan 2.1 VAE (WanVAE dim 96)"})})
    params = sum(t.numel() for t in sd.values())
    del sd
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(path, safe_load=True))
    if type(vae.first_stage_model).__module__ != "comfy.ldm.wan.vae" or vae.latent_channels != 16:
        raise RuntimeError(f"vae detected as {type(vae.first_stage_model)}")
    return {"parameters": params, "detected": "Wan 2.1 VAE"}


def main(argv: list[str]) -> int:
    comfy_dir, out = argv[1], argv[2]
    if not os.path.isfile(os.path.join(comfy_dir, "main.py")):
        raise SystemExit(f"{comfy_dir} has no main.py")
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    t0 = time.perf_counter()
    rep = {"vae": write_vae(os.path.join(out, *VAE_FILE))}
    rep["umt5"] = write_umt5(os.path.join(out, *UMT5_FILE))
    rep["umt5"]["verified"] = verify_umt5(os.path.join(out, *UMT5_FILE))
    for k, f in (("umt5", UMT5_FILE), ("vae", VAE_FILE)):
        rep[k]["bytes"] = os.path.getsize(os.path.join(out, *f))
    rep["seconds"] = round(time.perf_counter() - t0, 1)
    print("SEEDREUSE_FULLSIZE_MODELS " + json.dumps(rep), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
