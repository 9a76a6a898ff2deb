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


def test_seed_and_reuse_controls_never_enter_the_key():
    a = ReuseKey.build("slot", fields_of(t2v_prompt(seed=1)))
    b = ReuseKey.build("slot", fields_of(t2v_prompt(seed=99)))
    assert a.digest == b.digest
    p = t2v_prompt()
    p["2"]["inputs"]["seed"] = 5  # an upstream node with a seed widget: still excluded
    assert ReuseKey.build("slot", fields_of(p)).digest == a.digest


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
