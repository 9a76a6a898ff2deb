"""Generator of the full-size encoder models (run as a script by encoder_models.py, in a subprocess).

usage: PYTHONPATH=<repo>:<comfyui_dir> python -m seedreuse_lab._gen_encoder_models <comfyui_dir> <out_models_dir>

Two files with seeded random weights, fp16, in exactly the key layout the stock loaders expect,
because each is the state dict of the class that loader instantiates:

    clip_vision/clip_vision_h.safetensors                  comfy.clip_model.CLIPVisionModelProjection
                                                           with clip_vision_config_h.json (ViT-H/14)
    audio_encoders/wav2vec2-chinese-base_fp16.safetensors  comfy.audio_encoders.wav2vec2.Wav2Vec2Model
                                                           with the loader's "base" config (768, 12 layers)

The models are built with ``comfy.ops.disable_weight_init`` (no init pass: the weights are
allocated, then filled once, tensor by tensor, from one seeded generator) in fp16, so the peak
memory is about one copy of the file plus the tensor being filled. Then each file is loaded back
through the stock loader functions (``comfy.clip_vision.load``,
``comfy.audio_encoders.audio_encoders.load_audio_encoder_from_sd``): the test fails here if the
loader would pick another architecture. The output is byte-for-byte deterministic (a function of this file's text
and the host's ComfyUI version, which encoder_models.py hashes into the cache directory name).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

SEED = 20251201
CLIP_VISION_FILE = ("clip_vision", "clip_vision_h.safetensors")
AUDIO_ENCODER_FILE = ("audio_encoders", "wav2vec2-chinese-base_fp16.safetensors")
# comfy/audio_encoders/audio_encoders.py's config for embed_dim 768 (chinese-wav2vec2-base)
WAV2VEC2_BASE = {"embed_dim": 768, "num_heads": 12, "num_layers": 12, "conv_norm": False, "conv_bias": False,
                 "do_normalize": False, "do_stable_layer_norm": False}


def _fill(module, seed: int) -> dict:
    """Seeded values for every tensor of module.state_dict(), drawn in fp16 one tensor at a time:
    norm weights ~1, biases and embeddings ~0.02, matrices and convolutions ~1/sqrt(fan_in)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in module.state_dict().items():
        shape = tuple(t.shape)
        leaf = name.rsplit(".", 1)[-1]
        v = torch.randn(shape, generator=g, dtype=torch.float16)     # drawn in fp16: no fp32 copy
        if len(shape) <= 1 or leaf == "original0":      # original0: weight_norm's magnitude g
            v.mul_(0.02)
            if ("norm" in name and leaf == "weight") or leaf == "original0":
                v.add_(1.0)
        elif "embedding" in name:
            v.mul_(0.02)
        else:
            v.mul_(1.0 / math.sqrt(max(1, math.prod(shape[1:]))))
        out[name] = v
    return out


def _save(tensors: dict, path: str, what: str) -> None:
    from safetensors.torch import save_file

    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file(tensors, path, metadata={"seedreuse_test": json.dumps({"random_weights": what}, sort_keys=True)})


def build_clip_vision_h(path: str) -> dict:
    import torch
    import comfy.clip_model
    import comfy.ops

    cfg_path = os.path.join(os.path.dirname(os.path.realpath(comfy.clip_model.__file__)), "clip_vision_config_h.json")
    with open(cfg_path) as f:
        config = json.load(f)
    m = comfy.clip_model.CLIPVisionModelProjection(config, torch.float16, "cpu", comfy.ops.disable_weight_init)
    t0 = time.perf_counter()
    sd = _fill(m, SEED)
    del m
    t1 = time.perf_counter()
    _save(sd, path, "clip vision ViT-H/14 (CLIPVisionModelProjection, clip_vision_config_h.json)")
    return {"tensors": len(sd), "parameters": sum(t.numel() for t in sd.values()),
            "fill_s": round(t1 - t0, 3), "save_s": round(time.perf_counter() - t1, 3)}


def build_wav2vec2_base(path: str) -> dict:
    import torch
    import comfy.ops
    from comfy.audio_encoders.wav2vec2 import Wav2Vec2Model

    m = Wav2Vec2Model(**WAV2VEC2_BASE, dtype=torch.float16, device="cpu", operations=comfy.ops.disable_weight_init)
    sd = _fill(m, SEED + 1)
    del m
    _save(sd, path, "wav2vec2 base (Wav2Vec2Model, the audio encoder loader's embed_dim 768 config)")
    return {"tensors": len(sd), "parameters": sum(t.numel() for t in sd.values())}


def verify(out: str) -> dict:
    """Load each file the way CLIPVisionLoader / AudioEncoderLoader do and check the architecture
    they picked (encoding is left to the tests: one ViT-H encode costs seconds on 2 cores)."""
    import comfy.audio_encoders.audio_encoders as audio_encoders
    import comfy.clip_vision
    import comfy.utils

    from safetensors import safe_open

    def same_keys(model_sd, rel) -> None:     # nothing missing, nothing the loader would drop
        with safe_open(os.path.join(out, *rel), "pt") as f:
            file_keys = set(f.keys())
        if set(model_sd) != file_keys:
            raise RuntimeError(f"{rel[1]}: keys differ from the loader's model: "
                               f"missing {sorted(set(model_sd) - file_keys)[:5]}, extra {sorted(file_keys - set(model_sd))[:5]}")

    info = {}
    t0 = time.perf_counter()
    cv = comfy.clip_vision.load(os.path.join(out, *CLIP_VISION_FILE))
    t1 = time.perf_counter()
    vm = cv.model.vision_model
    layers, width = len(vm.encoder.layers), vm.embeddings.class_embedding.shape[0]
    if (layers, width, cv.image_size) != (32, 1280, 224):
        raise RuntimeError(f"clip vision loaded as {layers} layers x {width} at {cv.image_size} px, want ViT-H")
    same_keys(cv.get_sd(), CLIP_VISION_FILE)
    info["clip_vision"] = {"detected": "ViT-H/14", "layers": layers, "width": width, "weight_dtype": str(cv.dtype),
                           "load_s": round(t1 - t0, 3)}
    del cv

    t0 = time.perf_counter()
    sd = comfy.utils.load_torch_file(os.path.join(out, *AUDIO_ENCODER_FILE), safe_load=True)
    ae = audio_encoders.load_audio_encoder_from_sd(sd)
    t1 = time.perf_counter()
    enc = ae.model.encoder
    layers, width = len(enc.layers), enc.layer_norm.weight.shape[0]
    if (layers, width) != (12, 768):
        raise RuntimeError(f"audio encoder loaded as {layers} layers x {width}, want wav2vec2 base")
    same_keys(ae.get_sd(), AUDIO_ENCODER_FILE)
    info["audio_encoder"] = {"detected": "wav2vec2 base", "layers": layers, "width": width,
                             "weight_dtype": str(ae.dtype), "load_s": round(t1 - t0, 3)}
    return info


def main(argv: list[str]) -> int:
    comfy_dir, out = argv[1], argv[2]
    if not os.path.isfile(os.path.join(comfy_dir, "main.py")):
        raise SystemExit(f"{comfy_dir} has no main.py")
    sys.argv = [sys.argv[0], "--cpu"]  # comfy.cli_args parses sys.argv on import ...
    import comfy.options

    comfy.options.enable_args_parsing()  # ... only when enabled (main.py does this)
    t0 = time.perf_counter()
    built = {"clip_vision": build_clip_vision_h(os.path.join(out, *CLIP_VISION_FILE))}
    t1 = time.perf_counter()
    built["audio_encoder"] = build_wav2vec2_base(os.path.join(out, *AUDIO_ENCODER_FILE))
    t2 = time.perf_counter()
    info = verify(out)
    t3 = time.perf_counter()
    for k, f in (("clip_vision", CLIP_VISION_FILE), ("audio_encoder", AUDIO_ENCODER_FILE)):
        built[k]["bytes"] = os.path.getsize(os.path.join(out, *f))
    report = {"generate_clip_vision_s": round(t1 - t0, 3), "generate_audio_encoder_s": round(t2 - t1, 3),
              "verify_s": round(t3 - t2, 3), "built": built, "verified": info}
    print("SEEDREUSE_ENCODER_MODELS " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
