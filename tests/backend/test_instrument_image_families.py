"""The instrumenter on the image and audio families' graphs (Z-Image, Flux.1 / Flux.2, Qwen-Image-Edit
2511, SDXL, SD3.5, ACE-Step 1.5, MiniMax Music 3): what a user would expect wrapped is wrapped at
the widest point or explained in the report. Their official templates (the workflow-templates
package of requirements-test.txt) and small graphs of the same shape; no worker."""
from __future__ import annotations

import importlib.resources
import json

import pytest

from reuse_backend.workflow import instrument
from tests.backend.test_workflow_instrument import G

def _template(name: str) -> dict:
    import comfyui_workflow_templates_json as pkg       # requirements-test.txt
    return json.loads((importlib.resources.files(pkg) / "templates" / f"{name}.json").read_text(encoding="utf-8"))


KSAMPLER_WIDGETS = [1, "randomize", 2, 1.0, "euler", "simple", 1.0]
SAMPLER_INS = [("model", "MODEL"), ("seed", "INT"), ("positive", "CONDITIONING"), ("negative", "CONDITIONING"),
               ("latent_image", "LATENT")]


def _music(shared: str) -> dict:
    """An ACE-Step 1.5 graph: TextEncodeAceStepAudio1.5 (its own seed: the language model samples
    audio codes) -> KSampler. ``shared``: "primitive" (one PrimitiveNode sets both seeds, as the
    official templates do), "node" (a SeedNode sets both, as MiniMax Music 3's) or "" (each its own)."""
    g = G()
    g.node(1, "DualCLIPLoader", outs=["CLIP"], widgets=["te.safetensors", "lm.safetensors", "ace", "default"])
    g.node(2, "TextEncodeAceStepAudio1.5", ins=[("clip", "CLIP"), ("seed", "INT")], outs=["CONDITIONING"],
           widgets=["tags", "lyrics", 31, "fixed", 120, 10.0, "4", "en", "E minor", True, 2.0, 0.85, 0.9, 0, 0.0])
    g.node(3, "ConditioningZeroOut", ins=[("conditioning", "CONDITIONING")], outs=["CONDITIONING"])
    g.node(4, "UNETLoader", outs=["MODEL"], widgets=["ace.safetensors", "default"])
    g.node(5, "EmptyAceStep1.5LatentAudio", outs=["LATENT"], widgets=[10.0, 1])
    g.node(6, "KSampler", ins=SAMPLER_INS, outs=["LATENT"], widgets=KSAMPLER_WIDGETS)
    g.link(1, 1, 0, 2, 0).link(2, 2, 0, 3, 0).link(3, 4, 0, 6, 0).link(4, 2, 0, 6, 2).link(5, 3, 0, 6, 3)
    g.link(6, 5, 0, 6, 4)
    for n in g.doc["nodes"]:
        for s in n["inputs"]:
            if s["name"] == "seed":
                s["widget"] = {"name": "seed"}
    if shared == "primitive":
        g.node(7, "PrimitiveNode", outs=["INT"], widgets=[31, "fixed"])
        g.link(7, 7, 0, 2, 1).link(8, 7, 0, 6, 1)
    elif shared == "node":
        g.node(7, "SeedNode", outs=["INT"], widgets=[31])
        g.link(7, 7, 0, 2, 1).link(8, 7, 0, 6, 1)
    g.doc.update(last_node_id=20, last_link_id=20)
    return g.doc


@pytest.mark.parametrize("shared", ["primitive", "node", ""])
def test_an_encoder_seed_shared_with_the_sampler_is_noted(shared):
    """The encode is wrapped (its key covers its own seed); where that seed is set by what also
    sets the sampler's seed, every new seed encodes again, and the report says so per value."""
    _, rep = instrument(_music(shared))
    assert [(w["slot"], w["producer"]["class_type"]) for w in rep["wrapped"]] == [
        ("positive", "TextEncodeAceStepAudio1.5"), ("negative", "ConditioningZeroOut")]
    notes = [w.get("note", "") for w in rep["wrapped"]]
    if not shared:
        assert notes == ["", ""] and rep["not_wrapped"] == []
        return
    setter = "the primitive" if shared == "primitive" else "SeedNode (node 7)"
    for note in notes:
        assert note.startswith(f"input 'seed' of TextEncodeAceStepAudio1.5 (node 2) is set by {setter}, which also "
                               "sets 'seed' of KSampler (node 6)"), note
        assert "encodes again" in note and "a seed of its own" in note


def test_an_api_prompt_with_one_seed_node_is_noted_too():
    api = {"1": {"class_type": "CLIPLoader", "inputs": {"clip_name": "t.safetensors", "type": "minimax"}},
           "2": {"class_type": "SeedNode", "inputs": {"seed": 5}},
           "3": {"class_type": "MiniMaxMusic3TextEncode", "inputs": {"clip": ["1", 0], "caption": "c", "lyrics": "l",
                                                                     "seed": ["2", 0], "max_duration": 60.0}},
           "4": {"class_type": "KSampler", "inputs": {"model": ["5", 0], "seed": ["2", 0], "positive": ["3", 0],
                                                      "negative": ["3", 0], "latent_image": ["6", 0]}},
           "5": {"class_type": "UNETLoader", "inputs": {"unet_name": "m.safetensors", "weight_dtype": "default"}},
           "6": {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}}}
    info = {"MiniMaxMusic3TextEncode": {"output": ["CONDITIONING", "FLOAT"], "output_name": ["CONDITIONING", "FLOAT"]},
            "SeedNode": {"output": ["INT"], "output_name": ["INT"]}}
    _, rep = instrument(api, object_info=info)
    assert [w["slot"] for w in rep["wrapped"]] == ["positive"]
    assert "is set by SeedNode (node 2), which also sets 'seed' of KSampler (node 4)" in rep["wrapped"][0]["note"]


def test_a_model_patch_with_its_own_vae_encode_is_reported():
    """Z-Image Fun ControlNet's QwenImageDiffsynthControlnet VAE-encodes the control image into a
    model patch (MODEL in, MODEL out): a model is not cached, so the report says that encode runs
    on every request. A LoRA loader (MODEL and CLIP through) encodes nothing and is not reported."""
    g = G()
    g.node(1, "UNETLoader", outs=["MODEL"], widgets=["z.safetensors", "default"])
    g.node(2, "ModelPatchLoader", outs=["MODEL_PATCH"], widgets=["union.safetensors"])
    g.node(3, "VAELoader", outs=["VAE"], widgets=["ae.safetensors"])
    g.node(4, "LoadImage", outs=["IMAGE", "MASK"], widgets=["control.png", "image"])
    g.node(5, "QwenImageDiffsynthControlnet", ins=[("model", "MODEL"), ("model_patch", "MODEL_PATCH"), ("vae", "VAE"),
                                                   ("image", "IMAGE")], outs=["MODEL"], widgets=[1.0])
    g.node(6, "CLIPLoader", outs=["CLIP"], widgets=["qwen_3_4b.safetensors", "lumina2", "default"])
    g.node(7, "LoraLoader", ins=[("model", "MODEL"), ("clip", "CLIP")], outs=["MODEL", "CLIP"],
           widgets=["l.safetensors", 1.0, 1.0])
    g.node(8, "CLIPTextEncode", ins=[("clip", "CLIP")], outs=["CONDITIONING"], widgets=["a cat"])
    g.node(9, "EmptySD3LatentImage", outs=["LATENT"], widgets=[64, 64, 1])
    g.node(10, "KSampler", ins=SAMPLER_INS, outs=["LATENT"], widgets=KSAMPLER_WIDGETS)
    g.link(1, 1, 0, 5, 0).link(2, 2, 0, 5, 1).link(3, 3, 0, 5, 2).link(4, 4, 0, 5, 3).link(5, 5, 0, 7, 0)
    g.link(6, 6, 0, 7, 1).link(7, 7, 1, 8, 0).link(8, 7, 0, 10, 0).link(9, 8, 0, 10, 2).link(10, 8, 0, 10, 3)
    g.link(11, 9, 0, 10, 4)
    g.doc.update(last_node_id=20, last_link_id=20)
    _, rep = instrument(g.doc)
    assert [w["producer"]["class_type"] for w in rep["wrapped"]] == ["CLIPTextEncode"]
    assert [(n["node"], n["class_type"]) for n in rep["not_wrapped"]] == [("5", "QwenImageDiffsynthControlnet")]
    assert rep["not_wrapped"][0]["reason"].startswith("patches the model and runs its own VAE encode inside")


# template -> (the wrapped producers' classes, slot by slot; the classes reported as not wrapped)
FAMILY_TEMPLATES = {
    "image_z_image_turbo": ({"positive": "CLIPTextEncode", "negative": "ConditioningZeroOut"}, set()),
    # ReferenceLatent's output covers FluxGuidance, the text encode and the reference image's VAE encode
    "image_flux2": ({"conditioning": "ReferenceLatent"}, set()),
    "image_flux2_klein_text_to_image": ({"positive": "CLIPTextEncode", "negative": "CLIPTextEncode"}, set()),
    "image_qwen_image_edit_2511": ({"positive": "FluxKontextMultiReferenceLatentMethod",
                                    "negative": "FluxKontextMultiReferenceLatentMethod", "latent_image": "VAEEncode"},
                                   set()),
    "flux_dev_full_text_to_image": ({"positive": "CLIPTextEncode", "negative": "ConditioningZeroOut"}, set()),
    "sdxl_refiner_prompt_example": ({"positive": "CLIPTextEncode", "negative": "CLIPTextEncode",
                                     "positive_2": "CLIPTextEncode", "negative_2": "CLIPTextEncode"}, set()),
    "sd3.5_simple_example": ({"positive": "CLIPTextEncode", "negative": "CLIPTextEncode"}, set()),
    "audio_ace_step_1_5_split": ({"positive": "TextEncodeAceStepAudio1.5", "negative": "ConditioningZeroOut"}, set()),
    # the latent's length is the encoder's duration output: wrapped, so a hit runs no encoder at all
    "audio_minimax_music_3": ({"positive": "MiniMaxMusic3TextEncode", "negative": "ConditioningZeroOut",
                               "latent_image": "EmptyMiniMaxMusic3LatentAudio"}, set()),
    "image_z_image_turbo_fun_union_controlnet": ({"positive": "CLIPTextEncode", "negative": "ConditioningZeroOut"},
                                                 {"QwenImageDiffsynthControlnet"}),
}
SHARED_SEED = {"audio_ace_step_1_5_split", "audio_minimax_music_3"}


@pytest.mark.parametrize("name", sorted(FAMILY_TEMPLATES))
def test_family_templates_are_wrapped_at_the_widest_point_or_explained(name):
    doc = _template(name)
    new, rep = instrument(doc, name_hint=name)
    again, rep2 = instrument(new, name_hint=name)
    assert again == new and not rep2["changed"]
    producers, reported = FAMILY_TEMPLATES[name]
    assert {w["slot"]: w["producer"]["class_type"] for w in rep["wrapped"]} == producers, rep["wrapped"]
    assert {n["class_type"] for n in rep["not_wrapped"]} == reported, rep["not_wrapped"]
    notes = {w.get("note", "") for w in rep["wrapped"]}
    assert (notes != {""}) == (name in SHARED_SEED), notes
    json.dumps(rep)
