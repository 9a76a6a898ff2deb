"""The video families' models (LTX-2 audio-video, MiniMax H3, HunyuanVideo 1.5) for a host that
has their stock nodes (``host.has_video_families()``: ComfyUI 0.33, not 0.3.75).

``ensure_video_family_models()`` generates them once per generator version with
_gen_video_family_models.py into ``<repo>/.cache/tiny-models/videofam-<hash>/models/`` (hash of
that file, _gen_tiny_models.py and the host's ComfyUI version; older versions of this host are
pruned: the full-size MiniMax H3 audio VAE makes it ~0.37 GB). The files and what stands in for
what: _gen_video_family_models.py's docstring.
"""
from __future__ import annotations

from pathlib import Path

from . import _gen_video_family_models as gen
from . import host
from . import tiny_models as tm

GENERATOR = Path(__file__).with_name("_gen_video_family_models.py")
PREFIX = "videofam-"

LTX2 = gen.LTX2
LTX2_UPSCALER = gen.LTX2_UPSCALER
MINIMAX = gen.MINIMAX
MINIMAX_AUDIO_VAE = gen.MINIMAX_AUDIO_VAE
MINIMAX_VIDEO_VAE = gen.MINIMAX_VIDEO_VAE
HV15 = gen.HV15
HV15_VAE = gen.HV15_VAE
GEMMA = "standin_gemma3_12b.safetensors"
QWEN3VL = "standin_qwen3vl_32b.safetensors"
QWEN25_HV15 = "standin_qwen25_vl_7b_hv15.safetensors"
BYT5 = "standin_byt5_small.safetensors"
SIGLIP = "standin_siglip_so400m.safetensors"

FILES = {("checkpoints", LTX2), ("latent_upscale_models", LTX2_UPSCALER), ("diffusion_models", MINIMAX),
         ("vae", MINIMAX_AUDIO_VAE), ("vae", MINIMAX_VIDEO_VAE), ("diffusion_models", HV15), ("vae", HV15_VAE),
         *gen.PLACEHOLDERS}


def generator_hash() -> str:
    return tm.generator_hash(GENERATOR, on_base=True)


def ensure_video_family_models(timeout: float = 900) -> tm.TinyModels:
    """Generate (or reuse) the files. Safe to call from concurrent processes. Raises RuntimeError on
    a host without the video families' nodes."""
    if not host.has_video_families():
        raise RuntimeError(f"ComfyUI {host.comfyui_version()} at {host.comfyui_dir()} lacks the LTX-2 / MiniMax H3 / "
                           "HunyuanVideo 1.5 nodes: the video family tests run on ComfyUI 0.33")
    return tm.generate_cached(PREFIX + generator_hash(), "_gen_video_family_models", FILES,
                              "SEEDREUSE_VIDEO_FAMILY_MODELS", timeout=timeout, prune_prefix=PREFIX)


def link_if_host_has_them(dest: Path) -> Path:
    """On a host with the video families' nodes: generate (once) and link the files into dest;
    elsewhere dest unchanged. Returns dest."""
    if host.has_video_families():
        tm.link_files(ensure_video_family_models(), FILES, dest)
    return dest
