"""The support-matrix models (Wan 2.2 A14B experts, Wan 2.2 TI2V 5B + Wan 2.2 VAE, one-block
Qwen-Image, stand-in placeholders), generated once per generator version, like tiny_models.py.

``ensure_family_models()`` builds them with _gen_family_models.py into
``<repo>/.cache/tiny-models/family-<hash>/models/`` (hash of _gen_family_models.py,
_gen_tiny_models.py and the host's ComfyUI version). Unlike the base tiny models these are
large (the Wan 2.2 VAE config and Qwen-Image's width are fixed by the host: ~2.2 GB in all,
about a minute to generate on 2 cores), so only the tests of tests/families ask for them.
``models_dir_with_families(dest)`` links the base tiny models and these into one models dir.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from . import host
from . import tiny_models as tm

GENERATOR = Path(__file__).with_name("_gen_family_models.py")

WAN22_HIGH = "tiny_wan22_t2v_high_noise.safetensors"
WAN22_LOW = "tiny_wan22_t2v_low_noise.safetensors"
WAN22_TI2V = "tiny_wan22_ti2v_5b.safetensors"
WAN22_VAE = "tiny_wan22_vae.safetensors"
QWEN_IMAGE = "tiny_qwen_image.safetensors"
QWEN_TEXT_ENCODER = "standin_qwen25_vl.safetensors"
INFINITETALK_PATCH = "standin_infinitetalk.safetensors"
QWEN_IMAGE_VAE = tm.VAE   # Qwen-Image's VAE is the Wan 2.1 VAE architecture

FILES = {
    ("diffusion_models", WAN22_HIGH),
    ("diffusion_models", WAN22_LOW),
    ("diffusion_models", WAN22_TI2V),
    ("vae", WAN22_VAE),
    ("diffusion_models", QWEN_IMAGE),
    ("text_encoders", QWEN_TEXT_ENCODER),
    ("model_patches", INFINITETALK_PATCH),
}


def generator_hash() -> str:
    return tm.generator_hash(GENERATOR, on_base=True)


def ensure_family_models(timeout: float = 900) -> tm.TinyModels:
    """Generate (or reuse) the family models. Safe to call from concurrent processes."""
    digest = "family-" + generator_hash()
    final = tm.CACHE_BASE / digest
    models = final / "models"
    tm.CACHE_BASE.mkdir(parents=True, exist_ok=True)
    with open(tm.CACHE_BASE / f"{digest}.lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        report_file = final / "report.json"
        if report_file.is_file() and all((models / f / n).is_file() for f, n in FILES):
            return tm.TinyModels(models, False, 0.0, json.loads(report_file.read_text()))
        tmp = tm.CACHE_BASE / f"{digest}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        proc = subprocess.run(
            host.module_command("_gen_family_models", host.comfyui_dir(), tmp / "models"),
            env=host.module_env(with_comfyui=True),
            cwd=str(host.comfyui_dir()), capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError("family model generation failed:\n" + (proc.stdout + proc.stderr)[-4000:])
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("SEEDREUSE_FAMILY_MODELS ")]
        report = json.loads(line[-1].split(" ", 1)[1]) if line else {}
        report["subprocess_s"] = round(seconds, 3)
        report["comfyui"] = host.comfyui_version()
        (tmp / "report.json").write_text(json.dumps(report, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        # older generator versions are large: keep only the current one of this host
        tm.prune_older("family-", digest)
        return tm.TinyModels(models, True, seconds, report)


def models_dir_with_families(base: tm.TinyModels, family: tm.TinyModels, dest: Path) -> Path:
    """dest/<folder>/<file> -> symlinks to the base tiny models and the family models."""
    tm.link_models_dir(base, dest)
    return tm.link_files(family, FILES, dest)


# ------------------------------------------------------------------ image and audio families
# Z-Image, Flux.1 / Flux.2, SDXL base + refiner, SD3.5, ACE-Step 1.5 (_gen_image_family_models.py:
# ~3.9 GB, the Z-Image DiT alone 1.8 GB: the host detects Z-Image only at its full width), on a
# host that has their classes (ComfyUI 0.33; 0.3.75 has none of ZImage, Flux2, ACEStep15).

IMAGE_GENERATOR = Path(__file__).with_name("_gen_image_family_models.py")
IMAGE_PREFIX = "imgfam-"


def image_families_on_host() -> bool:
    """True when the host's source has the image/audio family classes the generator builds
    (read from comfy/supported_models.py; no ComfyUI import)."""
    try:
        src = (host.comfyui_dir() / "comfy" / "supported_models.py").read_text()
    except (OSError, host.HostNotFound):
        return False
    return all(f"class {c}(" in src for c in ("ZImage", "Flux2", "ACEStep15", "SDXLRefiner", "SD3"))


def image_family_files() -> set:
    from . import _gen_image_family_models as gen

    return {("diffusion_models", f) for f, _ in gen.DIFFUSION} | {("checkpoints", f) for f, _ in gen.CHECKPOINTS} \
        | {("vae", f) for f, _ in gen.VAES} | {("text_encoders", f) for f in gen.TEXT_ENCODERS}


def ensure_image_family_models(timeout: float = 1800) -> tm.TinyModels:
    """Generate (or reuse) the image/audio family models; older versions of this host's are pruned."""
    digest = IMAGE_PREFIX + tm.generator_hash(IMAGE_GENERATOR, on_base=True)
    return tm.generate_cached(digest, "_gen_image_family_models", image_family_files(),
                              "SEEDREUSE_IMAGE_FAMILY_MODELS", timeout=timeout, prune_prefix=IMAGE_PREFIX)


def link_image_families_if_host_has_them(dest: Path) -> Path:
    """On a host with the classes: generate (once) and link the image/audio family models into
    dest; elsewhere dest unchanged. Returns dest."""
    if image_families_on_host():
        tm.link_files(ensure_image_family_models(), image_family_files(), dest)
    return dest
