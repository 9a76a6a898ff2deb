"""Flux.2 dev and Flux.2 Klein 4B from their official templates (image_flux2: an image edit with
ReferenceLatent and FluxGuidance; image_flux2_klein_text_to_image), made reusable by the pack and
run on two workers: the host's Flux.2 DiT (width 128, one double and one single block; text width
15360 = 3 stacked Mistral 3 layers for dev, 7680 = 3 stacked Qwen3 4B layers for Klein) and
Flux.2 VAE (32 channels, batch-norm latent) from generated files; the text encoders (Mistral 3
24B, Qwen3 4B) stand-ins behind the STOCK CLIPTextEncode.

Flux.2 dev: the wrapped value is ReferenceLatent's output, which carries the guidance (a float)
and the list of reference latents (the input image VAE-encoded by the real Flux.2 VAE) beside the
text and its attention mask; B restores all of it byte-identical and runs neither the text
encoder, FluxGuidance, the VAE encode nor ReferenceLatent. Klein: the Qwen3 tokens padded to 512,
so the attention mask has masked positions."""
from __future__ import annotations

import pytest

from ._template_run import cross_worker, require_image_families

pytestmark = [pytest.mark.comfy, pytest.mark.one_host("0.33.0")]
OFFICIAL_TEMPLATES_RUN = {"image_flux2": "test_flux2_dev_reference_latent_cross_worker",
                          "image_flux2_klein_text_to_image": "test_flux2_klein_cross_worker"}


@pytest.fixture(autouse=True, scope="module")
def _host_has_the_family():
    require_image_families()


def _classes_ran(run, res, *classes) -> list:
    return sorted(k for k, n in run.pb.items() if n["class_type"] in classes and k in res.executed)


def test_flux2_dev_reference_latent_cross_worker(ab, family_object_info):
    a, b, root = ab
    run = cross_worker(a, b, root, "image_flux2", family_object_info)
    assert set(run.slots) == {"conditioning"}
    cond, extra = run.value(run.rb, "conditioning")["items"][0]["items"]
    n = cond["shape"][1]
    assert cond["shape"] == [1, n, 15360]
    items = extra["items"]
    assert items["guidance"] == {"type": "float", "value": 4.0}
    assert items["attention_mask"]["shape"] == [1, n] and items["attention_mask"]["dtype"] == "int64"
    refs = items["reference_latents"]["items"]
    assert len(refs) == 1 and refs[0]["shape"][:2] == [1, 128]       # Flux.2 latent: 32 channels x 2x2
    assert _classes_ran(run, run.ra, "VAEEncode", "FluxGuidance", "ReferenceLatent", "CLIPTextEncode")
    assert _classes_ran(run, run.rb, "VAEEncode", "FluxGuidance", "ReferenceLatent", "CLIPTextEncode") == []


def test_flux2_klein_cross_worker(ab, family_object_info):
    a, b, root = ab
    run = cross_worker(a, b, root, "image_flux2_klein_text_to_image", family_object_info)
    assert set(run.slots) == {"positive", "negative"}
    for slot in ("positive", "negative"):
        cond, extra = run.value(run.rb, slot)["items"][0]["items"]
        assert cond["shape"] == [1, 512, 7680]
        assert extra["items"]["attention_mask"]["shape"] == [1, 512]
    # the prompt and the empty negative differ in tokens, so in their masks
    masks = [run.value(run.rb, s)["items"][0]["items"][1]["items"]["attention_mask"]["sha256"]
             for s in ("positive", "negative")]
    assert masks[0] != masks[1]
