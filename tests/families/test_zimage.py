"""Z-Image Turbo from its official template (image_z_image_turbo), made reusable by the pack and
run on two workers: the host's Z-Image DiT (NextDiT at the full width 3840 the host detects,
one block) and Flux VAE from generated files; the Qwen3 4B text encoder a stand-in behind the
STOCK CLIPTextEncode (the host's Z-Image tokenizer and chat template, the real output structure).

The conditioning carries the Qwen3 attention mask ((1, tokens) int64 beside the (1, tokens, 2560)
hidden states): B restores both byte-identical, and the negative (ConditioningZeroOut of the
positive) too, without running the text encoder or its loader."""
from __future__ import annotations

import pytest

from ._template_run import cross_worker, require_image_families

pytestmark = [pytest.mark.comfy, pytest.mark.one_host("0.33.0")]
OFFICIAL_TEMPLATES_RUN = {"image_z_image_turbo": "test_z_image_turbo_cross_worker"}


@pytest.fixture(autouse=True, scope="module")
def _host_has_the_family():
    require_image_families()


def test_z_image_turbo_cross_worker(ab, family_object_info):
    a, b, root = ab
    run = cross_worker(a, b, root, "image_z_image_turbo", family_object_info)
    assert set(run.slots) == {"positive", "negative"}
    pos = run.value(run.rb, "positive")["items"][0]["items"]
    cond, extra = pos[0], pos[1]["items"]
    n = cond["shape"][1]
    assert cond["shape"] == [1, n, 2560] and cond["dtype"] == "float32"
    assert extra["pooled_output"] == {"type": "NoneType", "value": None}
    assert extra["attention_mask"]["shape"] == [1, n] and extra["attention_mask"]["dtype"] == "int64"
    neg = run.value(run.rb, "negative")["items"][0]["items"][0]
    assert neg["shape"] == [1, n, 2560] and neg["max"] == neg["min"] == 0.0     # zeroed out
