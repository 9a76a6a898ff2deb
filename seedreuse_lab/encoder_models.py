"""Full-size encoders with seeded random weights: CLIP vision ViT-H/14 and wav2vec2 base.

Unlike umT5-XXL (~11 GB in fp16, about 40 s per encode on this 2-core machine: only the `full-size`
benchmark runs it, fullsize_models.py), the tests run
these two for real through the stock nodes (CLIPVisionLoader / CLIPVisionEncode,
AudioEncoderLoader / AudioEncoderEncode). ``ensure_encoder_models()`` generates them once per
generator version with _gen_encoder_models.py into
``<repo>/.cache/tiny-models/encoders-<hash>/models/`` (hash of that file and the host's ComfyUI
version; older versions are removed, the files are large) and the generator checks that the
stock loaders pick ViT-H and wav2vec2 base. File names are the ones the official templates use:

    clip_vision/clip_vision_h.safetensors                  ViT-H/14, fp16, 1.26 GB
    audio_encoders/wav2vec2-chinese-base_fp16.safetensors  wav2vec2 base (768, 12 layers), fp16, 189 MB

``models_dir_with_encoders(base, enc, dest)`` links the tiny models and these into one models dir.
The audio encoder nodes need torchaudio on the host (scripts/setup.sh installs it).
"""
from __future__ import annotations

from pathlib import Path

from . import tiny_models as tm

GENERATOR = Path(__file__).with_name("_gen_encoder_models.py")
CLIP_VISION_H = "clip_vision_h.safetensors"
WAV2VEC2_BASE = "wav2vec2-chinese-base_fp16.safetensors"
FILES = {("clip_vision", CLIP_VISION_H), ("audio_encoders", WAV2VEC2_BASE)}
PREFIX = "encoders-"


def generator_hash() -> str:
    return tm.generator_hash(GENERATOR)


def ensure_encoder_models(timeout: float = 1200) -> tm.TinyModels:
    """Generate (or reuse) the two encoder files. Safe to call from concurrent processes."""
    return tm.generate_cached(PREFIX + generator_hash(), "_gen_encoder_models", FILES, "SEEDREUSE_ENCODER_MODELS",
                              timeout=timeout, prune_prefix=PREFIX)


def link_encoders(enc: tm.TinyModels, dest: Path) -> Path:
    """dest/<folder>/<file> -> symlinks to the encoder files. Returns dest."""
    return tm.link_files(enc, FILES, dest)


def models_dir_with_encoders(base: tm.TinyModels, enc: tm.TinyModels, dest: Path) -> Path:
    """A models dir with the tiny models and the full-size encoders (per-file symlinks)."""
    tm.link_models_dir(base, dest)
    return link_encoders(enc, dest)
