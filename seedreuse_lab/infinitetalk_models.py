"""Tiny models for the STOCK InfiniteTalk nodes (WanInfiniteTalkToVideo + ModelPatchLoader).

Only a host that has those nodes (``host.has_stock_infinitetalk()``: ComfyUI 0.33, not 0.3.75)
gets them; there the InfiniteTalk tests run the stock node, elsewhere the stand-in
(seedreuse_lab/stand_in_nodes/family_standins.py) with the family placeholder patch.
``ensure_infinitetalk_models()`` generates them once per generator version with
_gen_infinitetalk_models.py into ``<repo>/.cache/tiny-models/infinitetalk-<hash>/models/`` (hash
of that file, _gen_tiny_models.py and the host's ComfyUI version; small, so no pruning):

    diffusion_models/tiny_wan21_i2v_talk.safetensors  Wan 2.1 I2V, dim 320 (40 audio-attention heads
                                                      x 8; 2 model heads, as two speakers need)
    model_patches/tiny_infinitetalk.safetensors       MultiTalkModelPatch, seeded random weights
"""
from __future__ import annotations

from pathlib import Path

from . import host
from . import tiny_models as tm

GENERATOR = Path(__file__).with_name("_gen_infinitetalk_models.py")
I2V_TALK = "tiny_wan21_i2v_talk.safetensors"
PATCH = "tiny_infinitetalk.safetensors"
FILES = {("diffusion_models", I2V_TALK), ("model_patches", PATCH)}
PREFIX = "infinitetalk-"


def generator_hash() -> str:
    return tm.generator_hash(GENERATOR, on_base=True)


def ensure_infinitetalk_models(timeout: float = 600) -> tm.TinyModels:
    """Generate (or reuse) the two files. Safe to call from concurrent processes. Raises
    RuntimeError on a host without the stock InfiniteTalk nodes."""
    if not host.has_stock_infinitetalk():
        raise RuntimeError(f"ComfyUI {host.comfyui_version()} at {host.comfyui_dir()} has no WanInfiniteTalkToVideo "
                           "/ MultiTalk model patch: its InfiniteTalk tests use the stand-in, which needs no patch")
    return tm.generate_cached(PREFIX + generator_hash(), "_gen_infinitetalk_models", FILES,
                              "SEEDREUSE_INFINITETALK_MODELS", timeout=timeout, checksums=True)


def link_infinitetalk_models(models: tm.TinyModels, dest: Path) -> Path:
    """dest/<folder>/<file> -> symlinks to the two files. Returns dest."""
    return tm.link_files(models, FILES, dest)


def link_if_host_has_them(dest: Path) -> Path:
    """On a host with the stock InfiniteTalk nodes: generate (once) and link the two files into
    dest; elsewhere dest unchanged. Returns dest."""
    if host.has_stock_infinitetalk():
        link_infinitetalk_models(ensure_infinitetalk_models(), dest)
    return dest
