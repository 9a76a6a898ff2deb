"""ACE-Step 1.5 from its official template (audio_ace_step_1_5_split: UNETLoader, DualCLIPLoader
with the Qwen3 0.6B text encoder and the 1.7B language model, TextEncodeAceStepAudio1.5), made
reusable by the pack and run on two workers: the host's ACE-Step 1.5 DiT (width 128, the host's
fixed layer counts) and its audio VAE (Oobleck, 48 kHz, full size: the host fixes its config) from
generated files; the text encoder and the language model stand-ins behind the STOCK
TextEncodeAceStepAudio1.5 (the host's ACE-Step tokenizer with its metadata, lyrics and seed).

Its text encode has a seed of its own: the language model samples the audio codes with it. The
value is wrapped (the key covers that seed): a new SAMPLER seed reuses it on another worker (the
caption's hidden states, the lyrics' and the list of audio codes restored byte-identical, no
encoder and no loader run), and a new ENCODER seed encodes again: new audio codes, the same
caption and lyrics encodings. (The official templates set both seeds from one primitive, so
there every new seed encodes again; the instrumenter's report says so per value, see
tests/backend/test_instrument_image_families.py. The test sets the sampler's seed alone, as a
user who gives the encoder a seed of its own does.)"""
from __future__ import annotations

import pytest

from ._common import slot_events
from ._template_run import cross_worker, require_image_families, run_prompt

pytestmark = [pytest.mark.comfy, pytest.mark.one_host("0.33.0")]
OFFICIAL_TEMPLATES_RUN = {"audio_ace_step_1_5_split": "test_ace_step_15_reused_until_its_own_seed_changes"}
NAME = "audio_ace_step_1_5_split"


@pytest.fixture(autouse=True, scope="module")
def _host_has_the_family():
    require_image_families()


def _parts(value: dict) -> dict:
    cond, extra = value["items"][0]["items"]
    return {"cond": cond, **extra["items"]}


def test_ace_step_15_reused_until_its_own_seed_changes(ab, family_object_info):
    a, b, root = ab
    run = cross_worker(a, b, root, NAME, family_object_info, encoder_seed=31)
    assert set(run.slots) == {"positive", "negative"}
    pos = _parts(run.value(run.rb, "positive"))
    assert pos["cond"]["shape"][0::2] == [1, 1024] and pos["pooled_output"]["value"] is None
    assert pos["conditioning_lyrics"]["shape"][0::2] == [1, 1024]
    codes = pos["audio_codes"]["items"]
    assert len(codes) == 1 and len(codes[0]["items"]) == 5          # 1 s at 5 codes a second
    assert all(c["type"] == "int" and 0 <= c["value"] < 64000 for c in codes[0]["items"])

    # the encoder's own seed changes: the language model runs again (new codes), on worker B
    b.reset_counts()
    pc, inspects, rc = run_prompt(b, run.api, NAME, seed=3, tag="c", encoder_seed=32)
    assert {k: v["action"] for k, v in slot_events(rc).items()} == {"positive": "encoded", "negative": "encoded"}
    assert b.counts()["text_encode"] == 1 and b.counts()["text_loader"] == 1
    new = _parts(rc.inspected(inspects["positive"]))
    assert new["audio_codes"] != pos["audio_codes"]
    assert new["cond"] == pos["cond"] and new["conditioning_lyrics"] == pos["conditioning_lyrics"]
