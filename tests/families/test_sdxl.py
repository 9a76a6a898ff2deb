"""SDXL base + refiner from the official template (sdxl_refiner_prompt_example: two
CheckpointLoaderSimple, four CLIPTextEncode, two KSamplerAdvanced splitting the steps), made
reusable by the pack and run on two workers: the host's SDXL and SDXL refiner UNets (their
detection's fixed channels, depths and context widths, at the smallest channel multipliers) and
SDXL VAE, from generated checkpoints without text-encoder weights (the stock loader loads model
and VAE; CLIP-L + CLIP-G and the refiner's CLIP-G are stand-ins behind the STOCK CLIPTextEncode,
from SeedReuseTestCheckpointCLIPLoader beside each checkpoint, with the host's SDXL tokenizer).

Four conditionings: the base's (1, 77, 2048) with CLIP-G's pooled (1, 1280), the refiner's
(1, 77, 1280) with its pooled (1, 1280); B restores the four byte-identical, runs no text encode
and no text loader, and both samplers sample (the refiner continues the base's latent)."""
from __future__ import annotations

import pytest

from ._template_run import cross_worker, require_image_families

pytestmark = [pytest.mark.comfy, pytest.mark.one_host("0.33.0")]
OFFICIAL_TEMPLATES_RUN = {"sdxl_refiner_prompt_example": "test_sdxl_base_and_refiner_cross_worker"}


@pytest.fixture(autouse=True, scope="module")
def _host_has_the_family():
    require_image_families()


def test_sdxl_base_and_refiner_cross_worker(ab, family_object_info):
    a, b, root = ab
    run = cross_worker(a, b, root, "sdxl_refiner_prompt_example", family_object_info)
    assert set(run.slots) == {"positive", "negative", "positive_2", "negative_2"}
    for slot, width in (("positive", 2048), ("negative", 2048), ("positive_2", 1280), ("negative_2", 1280)):
        cond, extra = run.value(run.rb, slot)["items"][0]["items"]
        assert cond["shape"] == [1, 77, width], slot
        assert extra["items"]["pooled_output"]["shape"] == [1, 1280], slot
    samplers = sorted(k for k, n in run.pb.items() if n["class_type"] == "KSamplerAdvanced")
    assert len(samplers) == 2 and set(samplers) <= set(run.rb.executed)
    # each sampler reads its own checkpoint's conditionings
    base, refiner = sorted(samplers, key=lambda k: run.pb[k]["inputs"]["start_at_step"])
    assert run.pb[base]["inputs"]["positive"] == [run.slots["positive"], 0]
    assert run.pb[refiner]["inputs"]["positive"] == [run.slots["positive_2"], 0]
