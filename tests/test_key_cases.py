"""The key's hard cases end to end, on two real workers sharing one cache, a new KSampler seed
every run (seedreuse_lab/key_case_graphs.py):

1. a wildcard-style node's own ``seed`` picks the prompt text: a changed pick re-encodes on the
   other worker (never the old prompt's encoding), an unchanged one reuses; the dry run and the
   history say the value depends on that seed; ``reuse=require`` fails before sampling naming it;
2. a two-pass graph (KSampler -> VAEDecode -> VAEEncode -> Encode or Reuse -> second KSampler): the
   wrapped latent is reused while the first sampler's seed is unchanged (the first pass does not
   run at all) and re-encoded when it changes;
3. the stock ``TextGenerate`` prompt enhancer (0.33.0) on a stand-in language model, sampling on
   and off: a new sampler seed skips the language model too; a changed enhancer seed re-generates.
"""
from __future__ import annotations

import pytest

from seedreuse_lab.graphs import T2V
from seedreuse_lab.key_case_graphs import ENCODE2, ENHANCER, WILDCARD, enhancer_t2v, two_pass_t2v, wildcard_t2v

pytestmark = pytest.mark.comfy


def slot(res, name: str) -> dict:
    got = [e["data"] for e in res.events_of("seedreuse.slot") if e["data"]["slot"] == name]
    assert len(got) == 1, res.events_of("seedreuse.slot")
    return got[0]


def ran(res, node: str) -> bool:
    return node in res.executed


def check(worker, prompt: dict) -> dict:
    """The dry run's answer (POST /seedreuse/check) for ``prompt``."""
    return worker.post_json("/seedreuse/check", {"prompt": prompt}, timeout=60)


def test_wildcard_seed_picks_the_prompt_and_the_key_follows_it(pair_over_empty_root):
    a, b, root = pair_over_empty_root
    ra = a.run(wildcard_t2v(pick_seed=1, seed=10, cache_name="wild")).raise_for_status()
    assert a.counts()["text_encode"] == 1 and slot(ra, "positive")["action"] == "encoded"
    # the other worker, another pick: encoded again (the old prompt's encoding is never served)
    rb = b.run(wildcard_t2v(pick_seed=2, seed=11, cache_name="wild")).raise_for_status()
    sb = slot(rb, "positive")
    assert sb["action"] == "encoded" and b.counts()["text_encode"] == 1 and b.counts()["wildcard"] == 1, sb
    assert f"input `seed` of node {WILDCARD} (SeedReuseTestWildcard)" in sb["reason"], sb["reason"]
    assert any(d["kind"] == "seed" and d["node"] == WILDCARD for d in sb["depends_on"]), sb
    # back on the first worker with the second pick and a new sampler seed: reused, no encoder
    a.reset_counts()
    ra2 = a.run(wildcard_t2v(pick_seed=2, seed=12, cache_name="wild")).raise_for_status()
    sa2 = slot(ra2, "positive")
    assert sa2["action"] == "reused" and a.counts()["text_encode"] == 0 and a.counts()["wildcard"] == 0, sa2
    assert ran(ra2, T2V.SAMPLER)
    assert f"depends on input `seed` of node {WILDCARD} (SeedReuseTestWildcard): reused only while it is " \
           "unchanged" in sa2["reason"]
    # the dry run says the same, before anything runs
    ans = check(a, wildcard_t2v(pick_seed=2, seed=99, cache_name="wild"))["nodes"]["101"]
    assert ans["will"] == "reuse" and ans["depends_on"][0]["input"] == "seed", ans
    ans = check(a, wildcard_t2v(pick_seed=3, seed=99, cache_name="wild"))["nodes"]["101"]
    assert ans["will"] == "encode" and f"node {WILDCARD}" in ans["reason"], ans
    # require: fails before sampling, naming the field that changed
    a.reset_counts()
    rr = a.run(wildcard_t2v(pick_seed=3, seed=13, cache_name="wild", reuse="require"))
    assert rr.status == "error" and not ran(rr, T2V.SAMPLER), rr.executed
    msg = rr.error["exception_message"]
    assert "value.text:seed" in msg and f"input `seed` of node {WILDCARD} (SeedReuseTestWildcard)" in msg, msg
    assert a.counts()["text_encode"] == 0


def test_two_pass_latent_follows_the_first_samplers_seed(pair_over_empty_root):
    a, b, root = pair_over_empty_root
    ra = a.run(two_pass_t2v(1, 1, cache_name="twopass")).raise_for_status()
    assert slot(ra, "first_pass_latent")["action"] == "encoded" and ran(ra, T2V.SAMPLER)
    # a new seed for the second pass only: the wrapped latent is reused, the first pass never runs
    rb = b.run(two_pass_t2v(1, 2, cache_name="twopass")).raise_for_status()
    sb = slot(rb, "first_pass_latent")
    assert sb["action"] == "reused", sb
    assert not ran(rb, T2V.SAMPLER) and not ran(rb, ENCODE2) and ran(rb, "34"), rb.executed
    assert any(d["kind"] == "sampler" and d["node"] == T2V.SAMPLER for d in sb["depends_on"]), sb
    assert any(d["kind"] == "seed" and d["node"] == T2V.SAMPLER for d in sb["depends_on"]), sb
    # a new first-pass seed: that latent is made again (never the old pass's latent)
    ra2 = a.run(two_pass_t2v(2, 3, cache_name="twopass")).raise_for_status()
    sa2 = slot(ra2, "first_pass_latent")
    assert sa2["action"] == "encoded" and ran(ra2, T2V.SAMPLER) and ran(ra2, ENCODE2), sa2
    assert f"input `seed` of node {T2V.SAMPLER} (KSampler)" in sa2["reason"], sa2["reason"]
    ans = check(b, two_pass_t2v(2, 4, cache_name="twopass"))["nodes"]["102"]
    assert ans["will"] == "reuse" and any(d["kind"] == "sampler" for d in ans["depends_on"]), ans


@pytest.mark.parametrize("sampling", ["on", "off"])
def test_prompt_enhancer_is_reused_while_its_seed_is_unchanged(pair_over_empty_root, sampling):
    a, b, root = pair_over_empty_root
    if "TextGenerate" not in a.object_info("TextGenerate"):
        pytest.skip("this host has no stock TextGenerate node (ComfyUI 0.33 added it)")
    name = f"enhance-{sampling}"
    ra = a.run(enhancer_t2v(sampling, 1, 1, cache_name=name)).raise_for_status()
    assert a.counts()["llm_generate"] == 1 and a.counts()["text_encode"] == 1
    assert slot(ra, "positive")["action"] == "encoded"
    # a new sampler seed on the other worker: neither the language model nor the encoder runs
    rb = b.run(enhancer_t2v(sampling, 1, 2, cache_name=name)).raise_for_status()
    sb = slot(rb, "positive")
    assert sb["action"] == "reused", sb
    assert b.counts()["llm_generate"] == 0 and b.counts()["llm_loader"] == 0 and b.counts()["text_encode"] == 0
    assert not ran(rb, ENHANCER) and ran(rb, T2V.SAMPLER)
    if sampling == "on":
        assert any(d["input"] == "sampling_mode.seed" and d["node"] == ENHANCER for d in sb["depends_on"]), sb
        # a changed enhancer seed: the language model generates again, the text is encoded again
        a.reset_counts()
        ra2 = a.run(enhancer_t2v(sampling, 2, 3, cache_name=name)).raise_for_status()
        sa2 = slot(ra2, "positive")
        assert sa2["action"] == "encoded" and a.counts()["llm_generate"] == 1, sa2
        assert "sampling_mode.seed" in sa2["reason"], sa2["reason"]
    else:
        assert sb["depends_on"] == [], sb
