"""Flux.1 dev from its official template (flux_dev_full_text_to_image: DualCLIPLoader with CLIP-L
and T5-XXL, type flux), made reusable by the pack and run on two workers: the host's Flux DiT
(width 128, one double and one single block, guidance embedding, CLIP-L pooled input 768) and
Flux VAE from generated files; both text encoders stand-ins behind the STOCK CLIPTextEncode (the
host's Flux tokenizer: CLIP-L's 77 tokens, T5-XXL's padded to 256).

The conditioning is T5-XXL's hidden states (1, 256, 4096) with CLIP-L's pooled output (1, 768) in
``pooled_output``: B restores both byte-identical and runs neither encoder nor their loader."""
from __future__ import annotations

import pytest

from ._template_run import cross_worker, require_image_families

pytestmark = [pytest.mark.comfy, pytest.mark.one_host("0.33.0")]
OFFICIAL_TEMPLATES_RUN = {"flux_dev_full_text_to_image": "test_flux1_dev_pooled_outputs_cross_worker"}


@pytest.fixture(autouse=True, scope="module")
def _host_has_the_family():
    require_image_families()


def test_flux1_dev_pooled_outputs_cross_worker(ab, family_object_info):
    a, b, root = ab
    run = cross_worker(a, b, root, "flux_dev_full_text_to_image", family_object_info)
    assert set(run.slots) == {"positive", "negative"}
    cond, extra = run.value(run.rb, "positive")["items"][0]["items"]
    assert cond["shape"] == [1, 256, 4096]
    assert set(extra["items"]) == {"pooled_output"} and extra["items"]["pooled_output"]["shape"] == [1, 768]
    neg_cond, neg_extra = run.value(run.rb, "negative")["items"][0]["items"]
    assert neg_cond["max"] == neg_cond["min"] == 0.0 and neg_extra["items"]["pooled_output"]["max"] == 0.0
