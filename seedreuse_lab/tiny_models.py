"""Tiny REAL models for CPU tests, generated at test time (never downloaded).

``ensure_tiny_models()`` builds them once per generator version into
``<repo>/.cache/tiny-models/<hash>/models/`` (hash of _gen_tiny_models.py + the host's ComfyUI
version) in a subprocess that imports ComfyUI's own classes, and verifies that the stock loaders'
detection accepts them. ``link_models_dir(dest)`` makes a models directory of per-file symlinks
to the cache that a test may extend (e.g. add a second text-encoder file).

Files (folder/name as the loaders' combo widgets list them):
    diffusion_models/tiny_wan21_t2v.safetensors   Wan 2.1 T2V, dim 128, 1 layer (~3.6 MB)
    diffusion_models/tiny_wan21_i2v.safetensors   Wan 2.1 I2V, in_dim 36, img_emb (~11 MB)
    vae/tiny_wan21_vae.safetensors                Wan 2.1 VAE, dim 8 (~3.7 MB)
    text_encoders/standin_umt5.safetensors        placeholder for the stand-in text encoder
    clip_vision/standin_clip_vision.safetensors   placeholder for the stand-in CLIP vision
    audio_encoders/standin_wav2vec2.safetensors   placeholder for the stand-in audio encoder
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import host

GENERATOR = Path(__file__).with_name("_gen_tiny_models.py")
CACHE_BASE = Path(os.environ.get("SEEDREUSE_TINY_MODELS_CACHE", host.REPO_ROOT / ".cache" / "tiny-models"))

T2V = "tiny_wan21_t2v.safetensors"
I2V = "tiny_wan21_i2v.safetensors"
VAE = "tiny_wan21_vae.safetensors"
TEXT_ENCODER = "standin_umt5.safetensors"
CLIP_VISION = "standin_clip_vision.safetensors"
AUDIO_ENCODER = "standin_wav2vec2.safetensors"

FILES = {
    ("diffusion_models", T2V),
    ("diffusion_models", I2V),
    ("vae", VAE),
    ("text_encoders", TEXT_ENCODER),
    ("clip_vision", CLIP_VISION),
    ("audio_encoders", AUDIO_ENCODER),
}


@dataclass(frozen=True)
class TinyModels:
    root: Path            # the cached models directory (read-only by convention)
    generated: bool       # True when this call generated them
    seconds: float        # generation time (0 when cached)
    report: dict          # generator report (timings, detected model classes)

    def path(self, folder: str, name: str) -> Path:
        return self.root / folder / name

    def link_models_dir(self, dest: Path) -> Path:
        return link_models_dir(self, dest)


def generator_hash(generator: Path | None = None, *, on_base: bool = False) -> str:
    """A generator's version: its source (``on_base``: and this module's generator, whose
    models it builds on) and the ComfyUI version, whose classes the weights are made for."""
    h = hashlib.sha256()
    h.update((generator or GENERATOR).read_bytes())
    if on_base:
        h.update(b"\0base=" + GENERATOR.read_bytes())
    h.update(b"\0comfyui=" + host.comfyui_version().encode())
    return h.hexdigest()[:16]


def ensure_tiny_models(timeout: float = 300) -> TinyModels:
    """Generate (or reuse) the tiny models. Safe to call from concurrent processes."""
    return generate_cached(generator_hash(), "_gen_tiny_models", FILES, "SEEDREUSE_TINY_MODELS",
                           timeout=timeout, checksums=True)


def link_models_dir(tm: TinyModels, dest: Path) -> Path:
    """dest/<folder>/<file> -> symlinks into the cache. Returns dest. Idempotent."""
    return link_files(tm, FILES, dest)


def link_files(models: TinyModels, files, dest: Path) -> Path:
    """dest/<folder>/<name> -> a symlink to models.path(folder, name) for each (folder, name) of
    ``files``, replacing what was there. Returns dest. Idempotent."""
    dest = Path(dest)
    for folder, name in files:
        d = dest / folder
        d.mkdir(parents=True, exist_ok=True)
        link = d / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(models.path(folder, name))
    return dest


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def generate_cached(digest: str, module: str, files: set, marker: str, *, timeout: float,
                    prune_prefix: str | None = None, checksums: bool = False) -> TinyModels:
    """Run generator ``module`` (seedreuse_lab.<module> <comfyui_dir> <out_models_dir>) once into
    CACHE_BASE/<digest>/models, under a lock (safe from concurrent processes); later calls return
    the cached files. ``marker`` prefixes the generator's JSON report line on stdout. With
    ``prune_prefix``, other finished versions named <prune_prefix>* generated for THIS host's
    ComfyUI version are removed (large files; see prune_older); with ``checksums``, the report
    records each file's sha256."""
    final = CACHE_BASE / digest
    models = final / "models"
    CACHE_BASE.mkdir(parents=True, exist_ok=True)
    with open(CACHE_BASE / f"{digest}.lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        report_file = final / "report.json"
        if report_file.is_file() and all((models / f / n).is_file() for f, n in files):
            return TinyModels(models, False, 0.0, json.loads(report_file.read_text()))
        tmp = CACHE_BASE / f"{digest}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        proc = subprocess.run(
            host.module_command(module, host.comfyui_dir(), tmp / "models"),
            env=host.module_env(with_comfyui=True),
            cwd=str(host.comfyui_dir()), capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"{module} failed:\n" + (proc.stdout + proc.stderr)[-4000:])
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith(marker + " ")]
        report = json.loads(line[-1].split(" ", 1)[1]) if line else {}
        report["subprocess_s"] = round(seconds, 3)
        report["comfyui"] = host.comfyui_version()
        if checksums:       # small files: their sha256 in the report
            report["sha256"] = {f"{f}/{n}": _sha256(tmp / "models" / f / n) for f, n in sorted(files)}
        (tmp / "report.json").write_text(json.dumps(report, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        if prune_prefix:
            prune_older(prune_prefix, digest)
        return TinyModels(models, True, seconds, report)


def prune_older(prefix: str, keep: str) -> None:
    """Remove the finished CACHE_BASE/<prefix>* versions other than ``keep`` that were generated
    for this host's ComfyUI version (report.json "comfyui"; a version without it counts as this
    host's). Another host's files stay: the two hosts share the cache and a suite of the other
    host may be reading them. Not guaranteed: a run of this host still holding an older version
    of the same generator loses it (as before)."""
    here = host.comfyui_version()
    for old in CACHE_BASE.glob(prefix + "*"):
        if not old.is_dir() or old.name == keep or ".tmp-" in old.name:
            continue
        try:
            made_for = json.loads((old / "report.json").read_text()).get("comfyui", here)
        except (OSError, ValueError):
            made_for = here
        if made_for == here:
            shutil.rmtree(old, ignore_errors=True)
