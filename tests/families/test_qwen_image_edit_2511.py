"""Qwen-Image-Edit 2511 from its official template (image_qwen_image_edit_2511: two input images,
TextEncodeQwenImageEditPlus, FluxKontextMultiReferenceLatentMethod), made reusable by the pack and
run on two workers: the host's Qwen-Image DiT (one full-width block) and the Qwen-Image VAE
architecture from generated files; the Qwen2.5-VL 7B text encoder a stand-in behind the host's
Qwen-Image tokenizer. TextEncodeQwenImageEditPlus runs as SeedReuseTestTextEncodeQwenImageEditPlus:
the stock node's code with its two fixed sizes as inputs (its 1024x1024 reference latents would
make the one-block DiT's sampling take minutes here); FluxKontextImageScale (about 1 megapixel) is
an ImageScale to 32x32.

Each conditioning carries the reference latents of BOTH images (a list of two VAE latents, encoded
by the real VAE) and the reference method the template sets ("index_timestep_zero"); with the
sampler's start latent (the VAE encode of the first image) B restores them byte-identical and runs
no VL encode, no VAE encode and neither image's rescale."""
from __future__ import annotations

import pytest

from ._template_run import cross_worker, require_image_families

pytestmark = [pytest.mark.comfy, pytest.mark.one_host("0.33.0")]
OFFICIAL_TEMPLATES_RUN = {"image_qwen_image_edit_2511": "test_qwen_image_edit_2511_two_references_cross_worker"}


@pytest.fixture(autouse=True, scope="module")
def _host_has_the_family():
    require_image_families()


def test_qwen_image_edit_2511_two_references_cross_worker(ab, family_object_info):
    a, b, root = ab
    run = cross_worker(a, b, root, "image_qwen_image_edit_2511", family_object_info)
    assert set(run.slots) == {"positive", "negative", "latent_image"}
    for slot in ("positive", "negative"):
        cond, extra = run.value(run.rb, slot)["items"][0]["items"]
        assert cond["shape"][0] == 1 and cond["shape"][2] == 3584
        items = extra["items"]
        assert items["reference_latents_method"] == {"type": "str", "value": "index_timestep_zero"}
        refs = items["reference_latents"]["items"]
        assert [r["shape"] for r in refs] == [[1, 16, 1, 4, 4]] * 2       # both images, 32x32, the VAE's /8
        assert refs[0]["sha256"] != refs[1]["sha256"]
    latent = run.value(run.rb, "latent_image")["items"]["samples"]
    assert latent["shape"] == [1, 16, 1, 4, 4]
    encodes = sorted(k for k, n in run.pb.items()
                     if n["class_type"] in ("SeedReuseTestTextEncodeQwenImageEditPlus", "VAEEncode", "ImageScale"))
    assert len(encodes) == 4 and set(encodes) <= set(run.ra.executed) and not set(encodes) & set(run.rb.executed)
