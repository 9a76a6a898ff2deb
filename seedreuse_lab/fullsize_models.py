"""Full-size Wan 2.1 text encoder (umT5-XXL) and VAE, and Z-Image's Qwen3 4B text encoder, with
seeded random weights, generated once.

``ensure_fullsize_models()`` runs _gen_fullsize_models.py once per VERSION into
``<repo>/.cache/tiny-models/fullsize-<version>/models/`` (~11.7 GB; its progress bar on stderr)
and reuses the files after. The files do not depend on the host: they are the state dicts of
ComfyUI classes whose layouts both tested hosts share (the generator checks the keys against the
host it runs on; the benchmark loads them through the stock loaders on each host). Bump VERSION
when the generator's output changes; older versions are removed (the files are large).

    text_encoders/umt5_xxl_fp16.safetensors   umT5-XXL, 5.68 B parameters + tokenizer, fp16
    vae/wan_2.1_vae.safetensors               Wan 2.1 VAE, fp16

``models_dir_fullsize(dest)`` makes one models dir with the tiny DiT (tiny_models.py), these two
and the full-size CLIP vision ViT-H and wav2vec2 base (encoder_models.py).
``ensure_fullsize_llm()`` runs _gen_fullsize_llm.py once per LLM_VERSION into
``llm-fullsize-<version>/`` (text_encoders/qwen_3_4b.safetensors, bf16, ~8.0 GB);
``models_dir_fullsize_llm(dest)`` adds the image-family models (the Z-Image DiT and Flux VAE).
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import encoder_models as em
from . import host
from . import tiny_models as tm

VERSION = "1"
PREFIX = "fullsize-"
UMT5 = "umt5_xxl_fp16.safetensors"
VAE = "wan_2.1_vae.safetensors"
FILES = {("text_encoders", UMT5), ("vae", VAE)}
MARKER = "SEEDREUSE_FULLSIZE_MODELS"
# Z-Image's (and Flux.2 Klein 4B's) text encoder, for the full-size-llm section; its own prefix, so
# neither generator's pruning removes the other's files
LLM_VERSION = "1"
LLM_PREFIX = "llm-fullsize-"
QWEN3_4B = "qwen_3_4b.safetensors"
LLM_FILES = {("text_encoders", QWEN3_4B)}
LLM_MARKER = "SEEDREUSE_FULLSIZE_LLM"


def ensure_fullsize_models(timeout: float = 3600) -> tm.TinyModels:
    """Generate (or reuse) the two files; safe from concurrent processes (one generates, the
    others wait on the lock). The generator's progress bar is shown on this process's stderr."""
    return _ensure(PREFIX, VERSION, "_gen_fullsize_models", FILES, MARKER, timeout)


def ensure_fullsize_llm(timeout: float = 3600) -> tm.TinyModels:
    """Z-Image's Qwen3 4B text encoder at its real size (_gen_fullsize_llm.py, ~8 GB), once per LLM_VERSION."""
    return _ensure(LLM_PREFIX, LLM_VERSION, "_gen_fullsize_llm", LLM_FILES, LLM_MARKER, timeout)


def _ensure(prefix: str, version: str, module: str, files: set, marker: str, timeout: float) -> tm.TinyModels:
    digest = prefix + version
    final = tm.CACHE_BASE / digest
    models = final / "models"
    tm.CACHE_BASE.mkdir(parents=True, exist_ok=True)
    with open(tm.CACHE_BASE / f"{digest}.lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        report_file = final / "report.json"
        if report_file.is_file() and all((models / f / n).is_file() for f, n in files):
            return tm.TinyModels(models, False, 0.0, json.loads(report_file.read_text()))
        _prune_older(prefix, digest)
        tmp = tm.CACHE_BASE / f"{digest}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        proc = subprocess.run(host.module_command(module, host.comfyui_dir(), tmp / "models"),
                              env=host.module_env(with_comfyui=True), cwd=str(host.comfyui_dir()),
                              stdout=subprocess.PIPE, stderr=sys.stderr, text=True, timeout=timeout)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"{module} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}")
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith(marker + " ")]
        report = json.loads(line[-1].split(" ", 1)[1]) if line else {}
        report.update(subprocess_s=round(seconds, 1), generated_on=host.comfyui_version(), version=version)
        (tmp / "report.json").write_text(json.dumps(report, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return tm.TinyModels(models, True, seconds, report)


def _prune_older(prefix: str, keep: str) -> None:
    """Other finished versions of one generator, and leftovers of interrupted generations."""
    for old in tm.CACHE_BASE.glob(prefix + "*"):
        if old.is_dir() and old.name != keep:
            shutil.rmtree(old, ignore_errors=True)


def models_dir_fullsize(dest: Path) -> Path:
    """dest: the tiny models, the full-size ViT-H and wav2vec2, and umT5-XXL + the Wan 2.1 VAE
    (per-file symlinks). Returns dest."""
    full = ensure_fullsize_models()
    em.models_dir_with_encoders(tm.ensure_tiny_models(), em.ensure_encoder_models(), dest)
    return tm.link_files(full, FILES, dest)


def models_dir_fullsize_llm(dest: Path) -> Path:
    """dest: the real-size Qwen3 4B and the image-family models (the Z-Image DiT, the Flux VAE),
    per-file symlinks. Returns dest."""
    from . import family_models as fam

    tm.link_files(fam.ensure_image_family_models(), fam.image_family_files(), dest)
    return tm.link_files(ensure_fullsize_llm(), LLM_FILES, dest)
