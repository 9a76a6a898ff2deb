"""SD3.5 from its official template (sd3.5_simple_example: CheckpointLoaderSimple with the three
text encoders inside), made reusable by the pack and run on two workers: the host's MMDiT (depth 2,
width 128, RMS q/k norm, 4096-wide context embedder, 2048 pooled input) and SD3 VAE from a
generated checkpoint without text-encoder weights; CLIP-L, CLIP-G and T5-XXL stand-ins behind the
STOCK CLIPTextEncode (SeedReuseTestCheckpointCLIPLoader, the host's SD3 tokenizer).

The conditioning is CLIP-L + CLIP-G (77 tokens, padded to 4096) followed by T5-XXL (77 tokens),
(1, 154, 4096), with the pooled outputs of CLIP-L and CLIP-G concatenated (1, 2048); B restores
both byte-identical and runs none of the three encoders."""
from __future__ import annotations

import pytest

from ._template_run import cross_worker, require_image_families

pytestmark = [pytest.mark.comfy, pytest.mark.one_host("0.33.0")]
OFFICIAL_TEMPLATES_RUN = {"sd3.5_simple_example": "test_sd35_three_encoders_cross_worker"}


@pytest.fixture(autouse=True, scope="module")
def _host_has_the_family():
    require_image_families()


def test_sd35_three_encoders_cross_worker(ab, family_object_info):
    a, b, root = ab
    run = cross_worker(a, b, root, "sd3.5_simple_example", family_object_info)
    assert set(run.slots) == {"positive", "negative"}
    for slot in ("positive", "negative"):
        cond, extra = run.value(run.rb, slot)["items"][0]["items"]
        assert cond["shape"] == [1, 154, 4096]
        assert extra["items"]["pooled_output"]["shape"] == [1, 2048]
