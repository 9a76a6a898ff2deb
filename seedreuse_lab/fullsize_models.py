"""Full-size Wan 2.1 text encoder (umT5-XXL) and VAE with seeded random weights, generated once.

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


def ensure_fullsize_models(timeout: float = 3600) -> tm.TinyModels:
    """Generate (or reuse) the two files; safe from concurrent processes (one generates, the
    others wait on the lock). The generator's progress bar is shown on this process's stderr."""
    digest = PREFIX + VERSION
    final = tm.CACHE_BASE / digest
    models = final / "models"
    tm.CACHE_BASE.mkdir(parents=True, exist_ok=True)
    with open(tm.CACHE_BASE / f"{digest}.lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        report_file = final / "report.json"
        if report_file.is_file() and all((models / f / n).is_file() for f, n in FILES):
            return tm.TinyModels(models, False, 0.0, json.loads(report_file.read_text()))
        _prune_older(digest)
        tmp = tm.CACHE_BASE / f"{digest}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        proc = subprocess.run(host.module_command("_gen_fullsize_models", host.comfyui_dir(), tmp / "models"),
                              env=host.module_env(with_comfyui=True), cwd=str(host.comfyui_dir()),
                              stdout=subprocess.PIPE, stderr=sys.stderr, text=True, timeout=timeout)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"_gen_fullsize_models failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}")
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER + " ")]
        report = json.loads(line[-1].split(" ", 1)[1]) if line else {}
        report.update(subprocess_s=round(seconds, 1), generated_on=host.comfyui_version(), version=VERSION)
        (tmp / "report.json").write_text(json.dumps(report, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return tm.TinyModels(models, True, seconds, report)


def _prune_older(keep: str) -> None:
    """Other finished fullsize-* versions, and leftovers of interrupted generations."""
    for old in tm.CACHE_BASE.glob(PREFIX + "*"):
        if old.is_dir() and old.name != keep:
            shutil.rmtree(old, ignore_errors=True)


def models_dir_fullsize(dest: Path) -> Path:
    """dest: the tiny models, the full-size ViT-H and wav2vec2, and umT5-XXL + the Wan 2.1 VAE
    (per-file symlinks). Returns dest."""
    full = ensure_fullsize_models()
    em.models_dir_with_encoders(tm.ensure_tiny_models(), em.ensure_encoder_models(), dest)
    return tm.link_files(full, FILES, dest)
