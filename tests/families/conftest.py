"""Fixtures of the support-matrix tests: one pair of real ComfyUI workers for the whole package.

The family models (seedreuse_lab/family_models.py) are generated once per generator version
(~2.2 GB: the Wan 2.2 VAE and Qwen-Image have host-fixed widths; on a host with their classes,
0.33, also the image and audio families' ~4 GB: the Z-Image DiT's width is host-fixed), like the full-size encoders
(seedreuse_lab/encoder_models.py, ~1.45 GB), and the two workers A and B
are started once and shared by every family test (each test uses its own cache names), so the
package pays one startup. Tests reset the stand-in counters at their start and free the
workers' models at their end (POST /free) so the big models do not stay resident.
"""
from __future__ import annotations

import sys

import pytest

from seedreuse_lab import encoder_models, family_models, infinitetalk_models
from seedreuse_lab.worker import WorkerGroup


@pytest.fixture(scope="package")
def family_models_dir(tiny_models, tmp_path_factory):
    """Tiny models + family models + the full-size CLIP vision ViT-H and wav2vec2 base that the
    InfiniteTalk graphs load through the stock nodes (+ on a host with the stock
    WanInfiniteTalkToVideo, the tiny MultiTalk patch and its Wan 2.1 I2V)."""
    fam = family_models.ensure_family_models()
    d = family_models.models_dir_with_families(tiny_models, fam, tmp_path_factory.mktemp("family-models"))
    infinitetalk_models.link_if_host_has_them(d)
    family_models.link_image_families_if_host_has_them(d)     # Z-Image, Flux, SDXL, SD3.5, ACE-Step (0.33)
    return encoder_models.link_encoders(encoder_models.ensure_encoder_models(), d)


@pytest.fixture(scope="package")
def family_workers(request, tmp_path_factory, family_models_dir):
    """(A, B, cache_root): two started workers sharing one SEEDREUSE_CACHE_ROOT."""
    base = tmp_path_factory.mktemp("family-workers")
    root = base / "cache"
    root.mkdir()
    group = WorkerGroup(base, 2, models_dir=family_models_dir, cache_root=root, name_prefix="fam")
    group.start()
    failed_before = request.session.testsfailed
    yield group[0], group[1], root
    if request.session.testsfailed > failed_before:
        for w in group:
            sys.stderr.write(f"\n[{w.name}] {w.log_tail(80)}\n")
    group.stop()


@pytest.fixture
def ab(family_workers):
    """The package's two workers with fresh stand-in counters; models freed after the test."""
    a, b, root = family_workers
    for w in (a, b):
        w.reset_counts()
    yield a, b, root
    for w in (a, b):
        try:
            w.free()
        except Exception:
            pass


@pytest.fixture(scope="package")
def family_object_info(family_workers) -> dict:
    """Worker A's /object_info (the template tests convert UI files to API form with it)."""
    return family_workers[0].object_info()

