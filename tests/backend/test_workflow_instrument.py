"""The instrumenter (reuse_backend/workflow): where it wraps, subgraphs, ids, idempotence, the
report of what it could not wrap, hostile input, the UI -> API converter and the CLI.
Pure Python: no ComfyUI worker (tests/templates runs the official templates on real workers)."""
from __future__ import annotations

import copy
import json

import pytest

from reuse_backend import cli
from reuse_backend.errors import InvalidRequestError
from reuse_backend.workflow import instrument, limits
from reuse_backend.workflow.limits import WorkflowTooLargeError
from reuse_backend.workflow.ui_to_api import convert, widget_layout

TEMPLATES = ["text_to_video_wan", "image_to_video_wan", "video_wan2_2_14B_t2v", "video_wan2_2_14B_i2v",
             "video_wan2_2_5B_ti2v", "image_qwen_image", "image_qwen_image_edit", "video_wan2_1_infinitetalk"]


class G:
    """A tiny UI-graph builder: node(type, ins=[(name, type)], outs=[type], widgets=[...])."""

    def __init__(self, doc=None, dict_links=False):
        self.doc = doc if doc is not None else {"nodes": [], "links": [], "version": 0.4}
        self.dict_links = dict_links

    def node(self, nid, type_, ins=(), outs=(), widgets=None, **extra):
        n = {"id": nid, "type": type_, "pos": [nid * 10.0, 0.0], "size": [200.0, 80.0], "flags": {}, "mode": 0,
             "inputs": [{"name": a, "type": t, "link": None} for a, t in ins],
             "outputs": [{"name": t, "type": t, "links": []} for t in outs], "properties": {},
             "widgets_values": list(widgets or []), **extra}
        self.doc["nodes"].append(n)
        return self

    def link(self, lid, o, oslot, t, tslot):
        nodes = {n["id"]: n for n in self.doc["nodes"]}
        typ = nodes[o]["outputs"][oslot]["type"] if o != -10 else self.doc["inputs"][oslot]["type"]
        raw = {"id": lid, "origin_id": o, "origin_slot": oslot, "target_id": t, "target_slot": tslot, "type": typ} \
            if self.dict_links else [lid, o, oslot, t, tslot, typ]
        self.doc["links"].append(raw)
        if o == -10:
            self.doc["inputs"][oslot].setdefault("linkIds", []).append(lid)
        else:
            nodes[o]["outputs"][oslot]["links"].append(lid)
        if t == -20:
            self.doc["outputs"][tslot].setdefault("linkIds", []).append(lid)
        else:
            nodes[t]["inputs"][tslot]["link"] = lid
        return self


def t2v(last_node=50, last_link=90) -> dict:
    g = G()
    g.node(1, "CLIPLoader", outs=["CLIP"], widgets=["umt5.safetensors", "wan", "default"])
    g.node(2, "CLIPTextEncode", ins=[("clip", "CLIP")], outs=["CONDITIONING"], widgets=["a cat"])
    g.node(3, "CLIPTextEncode", ins=[("clip", "CLIP")], outs=["CONDITIONING"], widgets=["blurry"])
    g.node(4, "EmptyHunyuanLatentVideo", outs=["LATENT"], widgets=[64, 64, 5, 1])
    g.node(5, "UNETLoader", outs=["MODEL"], widgets=["m.safetensors", "default"])
    g.node(6, "KSampler", ins=[("model", "MODEL"), ("positive", "CONDITIONING"), ("negative", "CONDITIONING"),
                               ("latent_image", "LATENT")], outs=["LATENT"],
           widgets=[1, "randomize", 2, 1.0, "euler", "simple", 1.0])
    g.link(1, 1, 0, 2, 0).link(2, 1, 0, 3, 0).link(3, 5, 0, 6, 0).link(4, 2, 0, 6, 1).link(5, 3, 0, 6, 2)
    g.link(6, 4, 0, 6, 3)
    g.doc.update(last_node_id=last_node, last_link_id=last_link)
    return g.doc


def with_subgraph(sampler_inside=True, instances=1) -> dict:
    """Root: instance(s) of subgraph 'sg-1' (text encoders inside); the sampler inside or outside."""
    sub = {"id": "sg-1", "name": "Encode", "nodes": [], "links": [], "state": {"lastNodeId": 40, "lastLinkId": 70},
           "inputs": [{"id": "in-text", "name": "text", "type": "STRING", "linkIds": []}],
           "outputs": [{"id": "out-c", "name": "CONDITIONING", "type": "CONDITIONING", "linkIds": []}],
           "inputNode": {"id": -10, "bounding": [0, 0, 120, 60]}, "outputNode": {"id": -20, "bounding": [900, 0, 120, 60]}}
    s = G(sub, dict_links=True)
    s.node(11, "CLIPLoader", outs=["CLIP"], widgets=["umt5.safetensors", "wan", "default"])
    s.node(12, "CLIPTextEncode", ins=[("clip", "CLIP"), ("text", "STRING")], outs=["CONDITIONING"], widgets=["x"])
    s.doc["nodes"][-1]["inputs"][1]["widget"] = {"name": "text"}
    s.link(21, 11, 0, 12, 0).link(22, -10, 0, 12, 1)
    if sampler_inside:
        s.node(13, "EmptyLatentImage", outs=["LATENT"], widgets=[64, 64, 1])
        s.node(14, "UNETLoader", outs=["MODEL"], widgets=["m.safetensors", "default"])
        s.node(15, "KSampler", ins=[("model", "MODEL"), ("positive", "CONDITIONING"), ("negative", "CONDITIONING"),
                                    ("latent_image", "LATENT")], outs=["LATENT"],
               widgets=[1, "randomize", 2, 1.0, "euler", "simple", 1.0])
        s.link(23, 14, 0, 15, 0).link(24, 12, 0, 15, 1).link(25, 12, 0, 15, 2).link(26, 13, 0, 15, 3)
        s.link(27, 15, 0, -20, 0)
        sub["outputs"][0].update(name="LATENT", type="LATENT")
    else:
        s.link(23, 12, 0, -20, 0)
    root = G({"nodes": [], "links": [], "definitions": {"subgraphs": [sub]}, "last_node_id": 40,
              "last_link_id": 70, "version": 0.4})
    out_t = "LATENT" if sampler_inside else "CONDITIONING"
    for i in range(instances):
        root.node(1 + i, "sg-1", ins=[("text", "STRING")], outs=[out_t])
    if not sampler_inside:
        root.node(5, "EmptyLatentImage", outs=["LATENT"], widgets=[64, 64, 1])
        root.node(6, "UNETLoader", outs=["MODEL"], widgets=["m.safetensors", "default"])
        root.node(7, "KSampler", ins=[("model", "MODEL"), ("positive", "CONDITIONING"), ("negative", "CONDITIONING"),
                                      ("latent_image", "LATENT")], outs=["LATENT"],
                  widgets=[1, "randomize", 2, 1.0, "euler", "simple", 1.0])
        root.link(1, 6, 0, 7, 0).link(2, 1, 0, 7, 1).link(3, 1, 0, 7, 2).link(4, 5, 0, 7, 3)
    return root.doc


def _nodes(doc):
    return {n["id"]: n for n in doc["nodes"]}


def test_flat_t2v_wraps_both_prompts_with_ids_after_the_counters():
    doc = t2v()
    before = copy.deepcopy(doc)
    new, rep = instrument(doc, name_hint="my flow.json")
    assert doc == before, "the input is never modified"
    assert rep["changed"] and rep["cache_name"] == "my-flow"
    assert [(w["slot"], w["type"], w["producer"]["node"]) for w in rep["wrapped"]] == \
        [("positive", "CONDITIONING", "2"), ("negative", "CONDITIONING", "3")]
    nodes = _nodes(new)
    assert sorted(set(nodes) - set(_nodes(doc))) == [51, 52, 53], "new ids continue after last_node_id"
    assert nodes[51]["type"] == "SeedReuseSession" and nodes[51]["widgets_values"] == ["my-flow", "auto", 0]
    assert {nodes[52]["type"], nodes[53]["type"]} == {"SeedReuseEncodeConditioning"}
    new_links = [lk for lk in new["links"] if lk[0] > 6]
    assert [lk[0] for lk in new_links] == [91, 92, 93, 94] and new["last_link_id"] == 94
    assert new["last_node_id"] == 53
    # the sampler now reads the wrappers; the encoders feed only the wrappers
    links = {lk[0]: lk for lk in new["links"]}
    sampler = nodes[6]
    assert links[sampler["inputs"][1]["link"]][1] == 52 and links[sampler["inputs"][2]["link"]][1] == 53
    assert [links[i][3] for i in nodes[2]["outputs"][0]["links"]] == [52]
    assert not any(w["producer"]["class_type"] == "EmptyHunyuanLatentVideo" for w in rep["wrapped"])
    for n in new["nodes"]:       # every link is listed on both ends
        for s in n["inputs"]:
            assert s["link"] is None or links[s["link"]][3] == n["id"]
        for i, s in enumerate(n["outputs"]):
            assert all(links[lid][1] == n["id"] and links[lid][2] == i for lid in s["links"] or [])


def test_idempotent_and_an_existing_session_is_reused():
    new, rep = instrument(t2v(), name_hint="a")
    again, rep2 = instrument(new, name_hint="b")
    assert again == new and not rep2["changed"] and rep2["cache_name"] == "a"
    assert rep2["already_wrapped"] == ["negative", "positive"]
    # a user's own Session is used, not a second one
    doc = t2v()
    G(doc).node(9, "SeedReuseSession", outs=["SEEDREUSE_SESSION"], widgets=["mine", "require", 0])
    new, rep = instrument(doc)
    assert rep["session"] == {"node": 9, "created": False, "threaded_into": []} and rep["cache_name"] == "mine"
    assert sum(n["type"] == "SeedReuseSession" for n in new["nodes"]) == 1


def test_subgraph_wraps_inside_and_brings_the_session_in():
    doc = with_subgraph(sampler_inside=True)
    new, rep = instrument(doc, name_hint="sg")
    assert [(w["slot"], w["producer"]["node"], w["producer"].get("subgraph")) for w in rep["wrapped"]] == \
        [("positive", "1:12", "sg-1")]
    assert rep["session"]["threaded_into"] == ["Encode (subgraph sg-1)"]
    sub = new["definitions"]["subgraphs"][0]
    assert sub["inputs"][-1]["name"] == "seedreuse_session" and sub["inputs"][-1]["type"] == "SEEDREUSE_SESSION"
    wrapper = next(n for n in sub["nodes"] if n["type"] == "SeedReuseEncodeConditioning")
    assert wrapper["id"] == 42 and rep["session"]["node"] == 41, "one id space over root and subgraph states"
    assert sub["state"]["lastNodeId"] == new["last_node_id"] == 42
    assert all(isinstance(lk, dict) for lk in sub["links"]) and all(isinstance(lk, list) for lk in new["links"])
    inst = _nodes(new)[1]
    assert inst["inputs"][-1]["name"] == "seedreuse_session" and inst["inputs"][-1]["link"] is not None
    again, rep2 = instrument(new)
    assert again == new and not rep2["changed"]
    # the converter sees the wrapper inside, linked to the root session through the instance
    info = {"KSampler": {"input": {"required": {"seed": ["INT", {}], "steps": ["INT", {}], "cfg": ["FLOAT", {}],
                                                "sampler_name": [["euler"]], "scheduler": [["simple"]],
                                                "denoise": ["FLOAT", {}]}}},
            "CLIPTextEncode": {"input": {"required": {"clip": ["CLIP"], "text": ["STRING", {"multiline": True}]}}}}
    api, problems = convert(new, info)
    assert any("1:11 (CLIPLoader): not a class of this host" in p for p in problems)
    assert api["1:42"]["inputs"]["session"] == ["41", 0] and api["1:42"]["inputs"]["value"] == ["1:12", 0]
    assert api["1:15"]["inputs"]["positive"] == ["1:42", 0] and api["1:15"]["inputs"]["seed"] == 1
    assert api["1:12"]["inputs"]["text"] == "x", "an unlinked promoted widget keeps the inner value"


def test_value_leaving_a_subgraph_is_wrapped_at_its_producer():
    new, rep = instrument(with_subgraph(sampler_inside=False))
    assert [w["producer"]["node"] for w in rep["wrapped"]] == ["1:12"]
    api, _ = convert(new, {})
    wid = next(k for k, n in api.items() if n["class_type"] == "SeedReuseEncodeConditioning")
    assert api["7"]["inputs"]["positive"] == [wid, 0] == api["7"]["inputs"]["negative"]


def test_subgraph_used_twice_is_reported_not_wrapped():
    new, rep = instrument(with_subgraph(sampler_inside=True, instances=2))
    assert not rep["changed"] and new == with_subgraph(sampler_inside=True, instances=2)
    reasons = {n["node"]: n["reason"] for n in rep["not_wrapped"]}
    assert set(reasons) == {"1:12", "2:12"} and "2 nodes instantiate" in reasons["1:12"]


def test_seeded_prompt_node_is_wrapped_a_sampled_value_is_not_guider_and_model_patcher():
    # a wildcard-style node picks the text by its own seed: the encoding is wrapped (its key
    # covers that seed: reused while it is unchanged); it is not a sampler (no MODEL, no NOISE)
    g = G(t2v())
    g.node(7, "RandomPromptFromSeed", ins=[("seed", "INT")], outs=["STRING"])
    g.doc["nodes"][-1]["inputs"][0]["widget"] = {"name": "seed"}
    g.doc["nodes"][1]["inputs"].append({"name": "text", "type": "STRING", "widget": {"name": "text"}, "link": None})
    g.link(7, 7, 0, 2, 1)
    _, rep = instrument(g.doc)
    assert [w["slot"] for w in rep["wrapped"]] == ["negative", "positive"]
    assert rep["not_wrapped"] == []
    # a second pass (hires fix): the first sampler's output decoded and VAE-encoded again feeds a
    # second sampler: that encode changes with every seed and is reported, not wrapped
    g = G(t2v())
    g.node(8, "VAELoader", outs=["VAE"]).node(9, "VAEDecode", ins=[("samples", "LATENT"), ("vae", "VAE")], outs=["IMAGE"])
    g.node(10, "VAEEncode", ins=[("pixels", "IMAGE"), ("vae", "VAE")], outs=["LATENT"])
    g.node(11, "KSampler", ins=[("model", "MODEL"), ("positive", "CONDITIONING"), ("negative", "CONDITIONING"),
                                ("latent_image", "LATENT")], outs=["LATENT"], widgets=[2, "fixed", 2, 1.0, "euler", "simple", 0.5])
    g.link(7, 6, 0, 9, 0).link(8, 8, 0, 9, 1).link(9, 9, 0, 10, 0).link(10, 8, 0, 10, 1).link(11, 5, 0, 11, 0)
    g.link(12, 2, 0, 11, 1).link(13, 3, 0, 11, 2).link(14, 10, 0, 11, 3)
    _, rep = instrument(g.doc)
    assert sorted(w["slot"] for w in rep["wrapped"]) == ["negative", "positive"]
    reasons = {n["node"]: n["reason"] for n in rep["not_wrapped"]}
    assert set(reasons) == {"10"} and "KSampler (node 6) sampled" in reasons["10"]
    # a GUIDER is walked back to its inputs; a model-patching node is a boundary and is reported
    g = G()
    g.node(1, "CLIPLoader", outs=["CLIP"]).node(2, "CLIPTextEncode", ins=[("clip", "CLIP")], outs=["CONDITIONING"])
    g.node(3, "VAELoader", outs=["VAE"]).node(4, "UNETLoader", outs=["MODEL"])
    g.node(5, "WanInfiniteTalkToVideo", ins=[("model", "MODEL"), ("positive", "CONDITIONING"), ("vae", "VAE")],
           outs=["MODEL", "CONDITIONING", "LATENT"])
    g.node(6, "CFGGuider", ins=[("model", "MODEL"), ("positive", "CONDITIONING")], outs=["GUIDER"])
    g.node(7, "CLIPTextEncode", ins=[("clip", "CLIP")], outs=["CONDITIONING"])
    g.node(8, "CFGGuider", ins=[("model", "MODEL"), ("positive", "CONDITIONING")], outs=["GUIDER"])
    g.node(9, "SamplerCustomAdvanced", ins=[("guider", "GUIDER"), ("noise", "NOISE")], outs=["LATENT", "LATENT"])
    g.link(1, 1, 0, 2, 0).link(2, 4, 0, 5, 0).link(3, 2, 0, 5, 1).link(4, 3, 0, 5, 2).link(5, 5, 0, 6, 0)
    g.link(6, 5, 1, 6, 1).link(7, 1, 0, 7, 0).link(8, 4, 0, 8, 0).link(9, 7, 0, 8, 1).link(10, 8, 0, 9, 0)
    g.doc.update(last_node_id=9, last_link_id=10)
    _, rep = instrument(g.doc)
    assert sorted(w["producer"]["node"] for w in rep["wrapped"]) == ["2", "7"]
    assert any(n["node"] == "5" and "patches the model" in n["reason"] for n in rep["not_wrapped"])


def test_api_format():
    api = {"1": {"class_type": "CLIPLoader", "inputs": {"clip_name": "t.safetensors", "type": "wan"}},
           "2": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["1", 0], "text": "a"}},
           "3": {"class_type": "UNETLoader", "inputs": {"unet_name": "m", "weight_dtype": "default"}},
           "4": {"class_type": "EmptyLatentImage", "inputs": {"width": 8, "height": 8, "batch_size": 1}},
           "5": {"class_type": "MysteryEncoder", "inputs": {"clip": ["1", 0]}},
           "6": {"class_type": "KSampler", "inputs": {"model": ["3", 0], "positive": ["2", 0], "negative": ["5", 0],
                                                      "latent_image": ["4", 0], "seed": 3}}}
    new, rep = instrument(api, name_hint="api")
    assert rep["format"] == "api" and [w["slot"] for w in rep["wrapped"]] == ["positive"]
    assert new["8"] == {"class_type": "SeedReuseEncodeConditioning",
                        "inputs": {"session": ["7", 0], "slot": "positive", "value": ["2", 0]},
                        "_meta": {"title": "Encode or Reuse: positive"}}
    assert new["6"]["inputs"]["positive"] == ["8", 0] and new["7"]["class_type"] == "SeedReuseSession"
    assert any(n["node"] == "5" and "unknown node class" in n["reason"] for n in rep["not_wrapped"])
    info = {"MysteryEncoder": {"output": ["CONDITIONING"], "output_name": ["CONDITIONING"]}}
    _, rep = instrument(new, object_info=info)
    assert [w["slot"] for w in rep["wrapped"]] == ["negative"], "object_info tells the type"
    again, rep = instrument(new)
    assert again == new and not rep["changed"]


def test_api_format_new_ids_never_prefix_a_subgraphs_inner_ids():
    # the InfiniteTalk template converted to API format: subgraph instance 324's inner nodes are
    # "324:307".."324:323" (no node "324" itself): the last parts alone would give the Session "324"
    api = {"324:308": {"class_type": "CLIPLoader", "inputs": {"clip_name": "t.safetensors", "type": "wan"}},
           "324:312": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["324:308", 0], "text": "a"}},
           "324:307": {"class_type": "UNETLoader", "inputs": {"unet_name": "m", "weight_dtype": "default"}},
           "24": {"class_type": "EmptyLatentImage", "inputs": {"width": 8, "height": 8, "batch_size": 1}},
           "324:322": {"class_type": "KSampler", "inputs": {"model": ["324:307", 0], "positive": ["324:312", 0],
                                                            "negative": ["324:312", 0], "latent_image": ["24", 0],
                                                            "seed": 3}}}
    new, rep = instrument(api, name_hint="api")
    added = sorted(set(new) - set(api), key=int)
    assert added == ["325", "326"], added
    assert new["325"]["class_type"] == "SeedReuseSession" and new["326"]["inputs"]["session"] == ["325", 0]
    assert new["324:322"]["inputs"]["positive"] == ["326", 0]
    again, rep = instrument(new)
    assert again == new and not rep["changed"]


def _template(name: str) -> dict:
    import importlib.resources

    import comfyui_workflow_templates_json as pkg       # requirements-test.txt
    return json.loads((importlib.resources.files(pkg) / "templates" / f"{name}.json").read_text(encoding="utf-8"))


def test_a_vae_node_with_nothing_to_encode_is_not_an_encoder():
    """Wan22ImageToVideoLatent without a start image only makes an empty latent: not wrapped
    (the 5B template ships its LoadImage bypassed); with the image linked, it is."""
    def prompt(with_image: bool) -> dict:
        p = {"1": {"class_type": "VAELoader", "inputs": {"vae_name": "v.safetensors"}},
             "2": {"class_type": "Wan22ImageToVideoLatent",
                   "inputs": {"vae": ["1", 0], "width": 64, "height": 64, "length": 5, "batch_size": 1}},
             "3": {"class_type": "KSampler", "inputs": {"latent_image": ["2", 0], "seed": 1}}}
        if with_image:
            p["4"] = {"class_type": "LoadImage", "inputs": {"image": "a.png"}}
            p["2"]["inputs"]["start_image"] = ["4", 0]
        return p
    new, rep = instrument(prompt(False))
    assert not rep["changed"] and new == prompt(False) and rep["wrapped"] == []
    _, rep = instrument(prompt(True))
    assert [(w["slot"], w["producer"]["class_type"]) for w in rep["wrapped"]] == [("latent_image", "Wan22ImageToVideoLatent")]
    # the official template: LoadImage bypassed (mode 4), so only its two prompts are encoder outputs
    doc = _template("video_wan2_2_5B_ti2v")
    assert any(n["type"] == "LoadImage" and n.get("mode") == 4 for n in doc["nodes"])
    _, rep = instrument(doc)
    assert sorted(w["producer"]["class_type"] for w in rep["wrapped"]) == ["CLIPTextEncode", "CLIPTextEncode"], rep
    # the same file with the image switched on wraps the latent too
    for n in doc["nodes"]:
        if n["type"] == "LoadImage":
            n["mode"] = 0
    _, rep = instrument(doc)
    assert "Wan22ImageToVideoLatent" in {w["producer"]["class_type"] for w in rep["wrapped"]}, rep


def test_api_ids_never_collide_with_a_subgraph_prefix():
    """A flattened subgraph's inner ids "324:307".. : a new id is above every part (not "324")."""
    api = {"324:301": {"class_type": "CLIPLoader", "inputs": {"clip_name": "t.safetensors", "type": "wan"}},
           "324:307": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["324:301", 0], "text": "a"}},
           "12": {"class_type": "KSampler", "inputs": {"positive": ["324:307", 0], "seed": 1}}}
    new, rep = instrument(api)
    added = sorted(set(new) - set(api), key=int)
    assert added == ["325", "326"] and rep["session"]["node"] == "325", added
    prefixes = {k.split(":")[0] for k in new if ":" in k}
    assert not prefixes & set(added)
    # the InfiniteTalk template, converted as the frontend does: no new id is a subgraph prefix
    ui = _template("video_wan2_1_infinitetalk")
    flat, _ = convert(ui, {})
    flat = {k: n for k, n in flat.items() if isinstance(n.get("class_type"), str)}
    new, rep = instrument(flat)
    added = set(new) - set(flat)
    assert added and not added & {k.split(":")[0] for k in flat if ":" in k}, sorted(added)


def test_threaded_subgraphs_are_named_unambiguously():
    """Two definitions with one display name are told apart by their definition ids."""
    doc = _template("video_wan2_1_infinitetalk")
    _, rep = instrument(doc)
    threaded = rep["session"]["threaded_into"]
    ids = {s["id"] for s in doc["definitions"]["subgraphs"]}
    assert len(threaded) == len(set(threaded)) == 2, threaded
    for label in threaded:
        assert label.startswith("InfiniteTalk (Base Generation) (subgraph ") and label[:-1].rsplit(" ", 1)[-1] in ids


@pytest.mark.parametrize("name", TEMPLATES)
def test_official_templates_are_idempotent_and_wrap_the_widest_point(name):
    import importlib.resources

    import comfyui_workflow_templates_json as pkg       # requirements-test.txt
    doc = json.loads((importlib.resources.files(pkg) / "templates" / f"{name}.json").read_text(encoding="utf-8"))
    new, rep = instrument(doc, name_hint=name)
    assert rep["changed"] and rep["cache_name"] == name
    again, rep2 = instrument(new, name_hint=name)
    assert again == new and not rep2["changed"]
    producers = {w["producer"]["class_type"] for w in rep["wrapped"]}
    if name in ("video_wan2_2_14B_i2v", "image_to_video_wan"):
        assert producers == {"WanImageToVideo"}, "its outputs cover the start-image encodes"
    if name == "image_qwen_image_edit":
        assert "TextEncodeQwenImageEdit" in producers
    slots = [w["slot"] for w in rep["wrapped"]]
    assert len(slots) == len(set(slots))


def _boxes(doc: dict) -> dict:
    """id -> (x, y, w, h) of each node with its 30 px title bar, and ('group', i) -> each group's
    title bar, of one graph (the root or a subgraph definition)."""
    out = {n["id"]: (n["pos"][0], n["pos"][1] - 30, n["size"][0], n["size"][1] + 30) for n in doc["nodes"]}
    for i, g in enumerate(doc.get("groups") or []):
        x, y, w, _ = g["bounding"]
        out[("group", i)] = (x, y, w, 34)
    return out


def _overlaps(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


@pytest.mark.parametrize("name", TEMPLATES)
def test_added_nodes_land_on_free_canvas(name):
    """The Session and the wrappers overlap no node of the template (a wrapper dropped on the
    sampler hid its widgets), no other added node and no group's title bar."""
    import importlib.resources

    import comfyui_workflow_templates_json as pkg       # requirements-test.txt
    doc = json.loads((importlib.resources.files(pkg) / "templates" / f"{name}.json").read_text(encoding="utf-8"))
    new, rep = instrument(doc, name_hint=name)
    assert rep["changed"]
    graphs = [(doc, new)] + list(zip((doc.get("definitions") or {}).get("subgraphs") or [],
                                     (new.get("definitions") or {}).get("subgraphs") or []))
    added_somewhere = 0
    for old_g, new_g in graphs:
        old_ids = {n["id"] for n in old_g["nodes"]}
        boxes = _boxes(new_g)
        added = [i for i in boxes if not isinstance(i, tuple) and i not in old_ids]
        added_somewhere += len(added)
        for a in added:
            hit = [o for o in boxes if o != a and _overlaps(boxes[a], boxes[o])]
            assert not hit, (name, a, boxes[a], [(o, boxes[o]) for o in hit])
    assert added_somewhere == len(rep["wrapped"]) + (1 if rep["session"]["created"] else 0)


@pytest.mark.parametrize("doc, kind", [
    ("not a workflow", InvalidRequestError),
    ({"nodes": "x"}, InvalidRequestError),
    ({"nodes": [{"id": 1}]}, InvalidRequestError),
    ({"nodes": [], "links": [["a", 1]]}, InvalidRequestError),
    ({"nodes": [{"id": i, "type": "X"} for i in range(limits.MAX_NODES + 1)], "links": []}, WorkflowTooLargeError),
    ({"1": {"class_type": "A", "inputs": {"x": ["2", 0]}}, "2": {"class_type": "B", "inputs": {"y": ["1", 0]}}},
     InvalidRequestError),
])
def test_hostile_input_is_refused_with_a_typed_error(doc, kind):
    with pytest.raises(kind) as ei:
        instrument(doc)
    assert ei.value.expected is not None and ei.value.fix


def test_hostile_nesting_and_recursive_subgraphs():
    deep = v = {}
    for _ in range(limits.MAX_DEPTH + 5):
        v["x"] = {}
        v = v["x"]
    with pytest.raises(WorkflowTooLargeError):
        instrument({"nodes": [], "links": [], "extra": deep})
    with pytest.raises(WorkflowTooLargeError):
        limits.parse_json(b"[" * 100000 + b"]" * 100000)
    with pytest.raises(WorkflowTooLargeError):
        limits.parse_json(b" " * (limits.MAX_BODY_BYTES + 1))
    selfref = {"id": "loop", "nodes": [{"id": 1, "type": "loop"}], "links": []}
    with pytest.raises(WorkflowTooLargeError) as ei:
        instrument({"nodes": [{"id": 1, "type": "loop"}], "links": [], "definitions": {"subgraphs": [selfref]}})
    assert "subgraph" in str(ei.value)


def test_cli_instrument(tmp_path, capsys):
    src = tmp_path / "flow.json"
    src.write_text(json.dumps(t2v()))
    out = tmp_path / "out.json"
    assert cli.main(["instrument", str(src), "-o", str(out), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)["report"]
    assert rep["changed"] and rep["cache_name"] == "flow"
    assert cli.main(["instrument", str(out)]) == 0
    assert "nothing to change" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert cli.main(["instrument", str(bad), "--json"]) == 2
    err = json.loads(capsys.readouterr().out)["error"]
    assert err["fix"] and err["expected"]


def test_the_packs_own_examples_are_already_reusable():
    """Hand-made workflows (example_workflows/, UI and API twins) change nothing."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "example_workflows"
    files = sorted(root.glob("*.json")) + sorted((root / "api").glob("*.json"))
    assert files
    for f in files:
        doc = json.loads(f.read_text())
        new, rep = instrument(doc)
        assert not rep["changed"] and new == doc, (f.name, rep["wrapped"])


def test_schema_1_root_with_object_links_and_state():
    doc = t2v()
    del doc["last_node_id"], doc["last_link_id"]
    doc["state"] = {"lastNodeId": 60, "lastLinkId": 80, "lastGroupId": 0, "lastRerouteId": 0}
    doc["links"] = [{"id": lk[0], "origin_id": lk[1], "origin_slot": lk[2], "target_id": lk[3], "target_slot": lk[4],
                     "type": lk[5]} for lk in doc["links"]]
    new, rep = instrument(doc)
    assert rep["changed"] and "last_node_id" not in new
    assert new["state"]["lastNodeId"] == 63 and new["state"]["lastLinkId"] == 84
    assert all(isinstance(lk, dict) for lk in new["links"])
    assert sorted(n["id"] for n in new["nodes"])[-3:] == [61, 62, 63]


# ComfyUI 0.33's SaveVideo (its /object_info entry, trimmed): `format` is a dynamic combo whose
# selected option brings a `codec` dynamic combo, which may bring `encoding`, then `crf` ...;
# the top-level `codec` is hidden: frontend 1.49.6 still gives it a widget, after format's.
_DYN_SAVE_VIDEO = {
    "input": {
        "required": {
            "video": ["VIDEO", {}], "filename_prefix": ["STRING", {"default": "video/ComfyUI"}],
            "format": ["COMFY_DYNAMICCOMBO_V3", {"options": [
                {"key": "auto", "inputs": {"required": {"codec": ["COMFY_DYNAMICCOMBO_V3", {"options": [
                    {"key": "auto", "inputs": {"required": {}}}]}]}}},
                {"key": "mp4", "inputs": {"required": {"codec": ["COMFY_DYNAMICCOMBO_V3", {"options": [
                    {"key": "auto", "inputs": {"required": {}}},
                    {"key": "h264", "inputs": {"required": {}, "optional": {"encoding": [
                        "COMFY_DYNAMICCOMBO_V3", {"options": [
                            {"key": "auto", "inputs": {"required": {}}},
                            {"key": "re-encode", "inputs": {"required": {
                                "crf": ["FLOAT", {"default": 23.0}],
                                "color_space": [["auto", "sRGB"], {}]}}}]}]}}}]}]}}}]}]},
        "optional": {"codec": ["COMFY_DYNAMICCOMBO_V3", {"hidden": True, "options": [
            {"key": "auto", "inputs": {"required": {}}}, {"key": "h264", "inputs": {"required": {}}}]}]}},
    "input_order": {"required": ["video", "filename_prefix", "format"], "optional": ["codec"]},
}


@pytest.mark.parametrize("values, names", [
    (["video/ComfyUI", "auto", "auto", "auto"], ["filename_prefix", "format", "format.codec", "codec"]),
    (["v", "mp4", "h264", "re-encode", 20.0, "auto", "auto"],
     ["filename_prefix", "format", "format.codec", "format.codec.encoding", "format.codec.encoding.crf",
      "format.codec.encoding.color_space", "codec"]),
    (["v", "mkv"], ["filename_prefix", "format", "codec"]),  # a value that selects no option
    (None, ["filename_prefix", "format", "codec"]),          # no values: the options are not known
])
def test_widget_layout_follows_the_selected_dynamic_combo_options(values, names):
    assert widget_layout(_DYN_SAVE_VIDEO, values) == names


def test_convert_maps_dynamic_combo_widgets_to_dotted_keys():
    ui = {"nodes": [{"id": 5, "type": "SaveVideo", "mode": 0, "inputs": [], "outputs": [],
                     "widgets_values": ["video/x", "mp4", "h264", "re-encode", 18.0, "sRGB"]}],
          "links": []}
    api, problems = convert(ui, {"SaveVideo": _DYN_SAVE_VIDEO})
    assert problems == []
    # the file predates the hidden codec's widget: it gets its default, as the canvas gives it
    assert api["5"]["inputs"] == {"filename_prefix": "video/x", "format": "mp4", "format.codec": "h264",
                                  "format.codec.encoding": "re-encode", "format.codec.encoding.crf": 18.0,
                                  "format.codec.encoding.color_space": "sRGB", "codec": "auto"}


_SCALE_033 = {"input": {"required": {
    "image": ["IMAGE", {}], "upscale_method": [["nearest-exact", "area"], {}],
    "megapixels": ["FLOAT", {"default": 1.0}], "resolution_steps": ["INT", {"default": 1, "min": 1}]}},
    "input_order": {"required": ["image", "upscale_method", "megapixels", "resolution_steps"]}}


@pytest.mark.parametrize("values, problem", [
    (["area", 0.5], False),            # saved before 0.33 added resolution_steps: its default
    (["area", 0.5, 8], False),
    (["area", 0.5, 8, 3], True),       # more values than the host has widgets
])
def test_convert_fills_widgets_the_file_predates_with_defaults(values, problem):
    ui = {"nodes": [{"id": 7, "type": "ImageScaleToTotalPixels", "mode": 0, "inputs": [], "outputs": [],
                     "widgets_values": values}], "links": []}
    api, problems = convert(ui, {"ImageScaleToTotalPixels": _SCALE_033})
    assert bool(problems) is problem, problems
    assert api["7"]["inputs"] == {"upscale_method": "area", "megapixels": 0.5,
                                  "resolution_steps": values[2] if len(values) > 2 else 1}
