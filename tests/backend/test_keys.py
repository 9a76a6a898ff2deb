"""reuse_key: canonical digests, graph walks and mismatch reports (plain pytest)."""
import json
import subprocess
import sys

import pytest

from reuse_backend.keys import graph_key
from reuse_backend.errors import KeyMismatchError, NoCommittedCacheError
from reuse_backend.keys.key import ReuseKey, diff, ensure_match
from reuse_backend.keys.slots import decide_slot


def t2v_prompt(text="a cat", clip_name="umt5.safetensors", seed=1, steps=2):
    return {
        "1": {"class_type": "CLIPLoader", "inputs": {"clip_name": clip_name, "type": "wan"}},
        "2": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["1", 0], "text": text}},
        "3": {"class_type": "SeedReuseSession", "inputs": {"cache_name": "c", "reuse": "auto", "reuse_prefix_segments": 0}},
        "4": {"class_type": "SeedReuseEncodeConditioning", "inputs": {"session": ["3", 0], "slot": "positive", "value": ["2", 0]}},
        "5": {"class_type": "KSampler", "inputs": {"positive": ["4", 0], "seed": seed, "steps": steps}},
    }


def fields_of(prompt, start="4", resolver=None):
    return graph_key.describe_upstream(prompt, prompt[start]["inputs"]["value"], resolver=resolver,
                                       skip_inputs={"SeedReuseSession": ("cache_name", "reuse", "reuse_prefix_segments")})


def test_fields_are_named_by_path_not_node_id():
    f = fields_of(t2v_prompt())
    assert f["value"] == "CLIPTextEncode#0"
    assert f["value:text"] == "a cat"
    assert f["value.clip"] == "CLIPLoader#0"
    assert f["value.clip:clip_name"] == "umt5.safetensors"
    # renumbering the nodes gives the same fields
    p = t2v_prompt()
    renum = {"10": p["1"], "20": dict(p["2"], inputs={"clip": ["10", 0], "text": "a cat"})}
    renum["40"] = {"class_type": p["4"]["class_type"], "inputs": {"session": ["3", 0], "slot": "positive", "value": ["20", 0]}}
    renum["3"] = p["3"]
    assert fields_of(renum, "40") == f


def test_downstream_seed_and_the_packs_own_controls_stay_out_of_the_key():
    a = ReuseKey.build("slot", fields_of(t2v_prompt(seed=1)))
    b = ReuseKey.build("slot", fields_of(t2v_prompt(seed=99)))   # the main sampler's seed: downstream
    assert a.digest == b.digest
    p = t2v_prompt()
    p["3"]["inputs"].update(cache_name="other", reuse="require")  # the pack's controls on its own Session
    assert ReuseKey.build("slot", fields_of(p)).digest == a.digest


@pytest.mark.parametrize("name", ["seed", "noise_seed", "cache_name", "reuse", "reuse_prefix_segments",
                                  "filename_prefix", "control_after_generate", "sampling_mode.seed"])
def test_every_input_upstream_enters_the_key_whatever_its_name(name):
    """An upstream node's input named like a seed or like one of the pack's controls is an input
    like any other (a wildcard node's seed picks the prompt): the key changes with it."""
    p = t2v_prompt()
    p["2"]["inputs"][name] = 1
    one = ReuseKey.build("slot", fields_of(p))
    p["2"]["inputs"][name] = 2
    two = ReuseKey.build("slot", fields_of(p))
    assert one.digest != two.digest
    assert [d.field for d in diff(one.to_dict(), two)] == [f"value:{name}"]


def test_a_seed_upstream_is_a_dependency_named_with_its_node():
    p = t2v_prompt()
    p["6"] = {"class_type": "Wildcard", "inputs": {"text": "{green frog|blue whale}", "seed": 1}}
    p["2"]["inputs"]["text"] = ["6", 0]
    w = graph_key.walk_upstream(p, ["2", 0])
    assert [d.describe() for d in w.depends] == [
        "depends on input `seed` of node 6 (Wildcard): reused only while it is unchanged"]
    cached = ReuseKey.build("slot", w.fields).to_dict()
    p["6"]["inputs"]["seed"] = 2
    w2 = graph_key.walk_upstream(p, ["2", 0])
    current = ReuseKey.build("slot", w2.fields, origins=w2.origins, depends=w2.depends)
    with pytest.raises(KeyMismatchError) as ei:
        ensure_match(cached, current, cache_name="c", what="slot 'positive'")
    assert "value.text:seed (input `seed` of node 6 (Wildcard)): cached 1 != current 2" in ei.value.message
    assert ei.value.details["fields"][0]["where"] == "input `seed` of node 6 (Wildcard)"
    assert ei.value.details["depends_on"] == [d.describe() for d in w2.depends]


def test_a_cache_keyed_before_seeds_were_covered_never_matches_where_a_seed_is_upstream():
    """Upgrade rule: the key of a cache written before keys covered seeds is the new key less
    every field under an input the old walk dropped by name; a field the cached key lacks is a
    difference, so that cache is missed (re-encoded once), while a graph with no such input keeps
    the same key and still hits."""
    dropped = {"seed", "noise_seed", "control_after_generate", "filename_prefix", "reuse",
               "reuse_prefix_segments", "cache_name"}

    def old_key(fields):
        def kept(path):
            parts = [seg for piece in path.replace("#", ".").split(".") for seg in piece.split(":")]
            return not any(seg.split("@")[0] in dropped for seg in parts[1:])
        return ReuseKey.build("slot", {k: v for k, v in fields.items() if kept(k)}).to_dict()

    plain = t2v_prompt()
    new = ReuseKey.build("slot", fields_of(plain))
    ensure_match(old_key(new.fields), new, cache_name="c", what="slot")      # unchanged key: still a hit
    seeded = t2v_prompt()
    seeded["6"] = {"class_type": "Wildcard", "inputs": {"text": "x", "seed": ["7", 0]}}
    seeded["7"] = {"class_type": "PrimitiveInt", "inputs": {"value": 3}}
    seeded["2"]["inputs"]["text"] = ["6", 0]
    new = ReuseKey.build("slot", fields_of(seeded))
    with pytest.raises(KeyMismatchError) as ei:
        ensure_match(old_key(new.fields), new, cache_name="c", what="slot")
    assert {f["field"] for f in ei.value.details["fields"]} == {"value.text.seed", "value.text.seed:value"}


def test_hidden_values_a_class_receives_enter_its_key():
    facts = {"Reader": graph_key.ClassFacts(hidden=frozenset({"unique_id", "prompt", "extra_pnginfo"}))}
    p = t2v_prompt()
    p["6"] = {"class_type": "Reader", "inputs": {"text": "x"}}
    p["2"]["inputs"]["text"] = ["6", 0]

    def key(prompt, extra="wf"):
        return ReuseKey.build("slot", graph_key.walk_upstream(
            prompt, ["2", 0], facts=lambda ct: facts.get(ct, graph_key.NO_FACTS),
            hidden_values={"prompt": graph_key.prompt_digest(prompt), "extra_pnginfo": extra}).fields)

    base = key(p)
    renumbered = {("60" if k == "6" else k): v for k, v in p.items()}
    renumbered["2"] = {**p["2"], "inputs": {**p["2"]["inputs"], "text": ["60", 0]}}
    assert key(renumbered).digest != base.digest          # its unique_id changed
    p2 = t2v_prompt(seed=77)                               # only the downstream seed differs...
    p2["6"], p2["2"]["inputs"]["text"] = p["6"], ["6", 0]
    assert key(p2).digest != base.digest                   # ...but this class reads the whole prompt
    assert key(p, extra="other").digest != base.digest     # and the workflow metadata
    # a class that declares none of them: renumbering and downstream changes keep the key
    facts.clear()
    assert key(renumbered).digest == key(p).digest and key(p2).digest == key(p).digest


def test_resolver_adds_content_identity_and_changes_the_key():
    seen = {}

    def resolver(ct, name, value):
        seen[(ct, name)] = value
        return "model:abc" if value.endswith(".safetensors") else None

    f = fields_of(t2v_prompt(), resolver=resolver)
    assert f["value.clip:clip_name@content"] == "model:abc"
    f2 = fields_of(t2v_prompt(), resolver=lambda *a: "model:def" if a[2].endswith(".safetensors") else None)
    d = diff(ReuseKey.build("slot", f).to_dict(), ReuseKey.build("slot", f2))
    assert [x.field for x in d] == ["value.clip:clip_name@content"]


def test_digest_is_stable_across_processes():
    key = ReuseKey.build("slot", fields_of(t2v_prompt()))
    code = ("import json,sys; from reuse_backend.keys.key import ReuseKey; "
            "print(ReuseKey.build('slot', json.loads(sys.stdin.read())).digest)")
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(key.fields), capture_output=True,
                         text=True, check=True, env={"PYTHONHASHSEED": "123", "PYTHONPATH": "."})
    assert out.stdout.strip() == key.digest


def test_mismatch_lists_fields_in_fixed_order_and_says_what_to_do():
    cached = ReuseKey.build("slot", fields_of(t2v_prompt("a cat", "umt5.safetensors"))).to_dict()
    current = ReuseKey.build("slot", fields_of(t2v_prompt("a dog", "other.safetensors")))
    with pytest.raises(KeyMismatchError) as ei:
        ensure_match(cached, current, cache_name="c", what="slot 'positive'")
    fields = [f["field"] for f in ei.value.details["fields"]]
    assert fields == sorted(fields) == ["value.clip:clip_name", "value:text"]
    msg = str(ei.value)
    assert "value:text" in msg and "a dog" in msg and "fix:" in msg


def test_volatile_upstream_never_matches():
    p = t2v_prompt()
    p["2"]["is_changed"] = [float("nan")]
    a = ReuseKey.build("slot", fields_of(p))
    b = ReuseKey.build("slot", fields_of(p))
    assert a.digest != b.digest
    p["2"]["is_changed"] = ["sha-of-file"]
    assert ReuseKey.build("slot", fields_of(p)).digest == ReuseKey.build("slot", fields_of(p)).digest


def test_diamond_and_missing_node():
    p = t2v_prompt()
    p["6"] = {"class_type": "ConditioningCombine", "inputs": {"a": ["2", 0], "b": ["2", 0]}}
    f = graph_key.describe_upstream(p, ["6", 0])
    assert f["value.b"] == {"same_node_as": "value.a", "output": 0}
    with pytest.raises(graph_key.GraphError):
        graph_key.describe_upstream(p, ["99", 0])


class _Snap:
    def __init__(self, slots):
        self.manifest = {"slots": slots}

    def slot_entry(self, slot):
        return self.manifest["slots"].get(slot)


def test_decide_slot_modes():
    key = ReuseKey.build("slot", {"a": 1})
    other = ReuseKey.build("slot", {"a": 2})
    snap = _Snap({"positive": {"key": key.to_dict(), "meta": {"encode_seconds": 3.0}}})
    assert decide_slot(snap, cache_name="c", slot="positive", key=key, mode="off").action == "encode"
    d = decide_slot(snap, cache_name="c", slot="positive", key=key, mode="auto")
    assert d.action == "reuse" and d.cached_meta["encode_seconds"] == 3.0
    d = decide_slot(snap, cache_name="c", slot="positive", key=other, mode="auto")
    assert d.action == "encode" and d.mismatch[0]["field"] == "a"
    with pytest.raises(KeyMismatchError):
        decide_slot(snap, cache_name="c", slot="positive", key=other, mode="require")
    with pytest.raises(NoCommittedCacheError, match="no successful run in cache 'c' yet"):
        decide_slot(None, cache_name="c", slot="positive", key=key, mode="require")
    with pytest.raises(NoCommittedCacheError, match="no slot 'negative'"):
        decide_slot(snap, cache_name="c", slot="negative", key=key, mode="require")
    assert decide_slot(None, cache_name="c", slot="positive", key=key, mode="auto").action == "encode"
