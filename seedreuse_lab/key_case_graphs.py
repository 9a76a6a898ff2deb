"""The graphs of the key's hard cases (tests/test_key_cases.py), built on the tiny Wan 2.1 T2V:

- ``wildcard_t2v``: the positive text comes from a wildcard-style node that picks it by its own
  ``seed`` (seedreuse_lab/stand_in_nodes/prompt_nodes.py), the encoding wrapped by hand;
- ``two_pass_t2v``: a first KSampler's output decoded and VAE-encoded again, that latent wrapped,
  and a second KSampler refining it (the hires-fix shape);
- ``enhancer_t2v``: the STOCK ``TextGenerate`` prompt enhancer (0.33) writes the positive text, on a
  stand-in language model, sampling on (its own ``sampling_mode.seed``) or off.
"""
from __future__ import annotations

from . import graphs
from . import tiny_models as tm
from .graphs import T2V, link
from .reuse_graphs import add_session, reuse_edge

WILDCARD, LLM, ENHANCER = "30", "31", "32"
ENCODE2, SAMPLER2, DECODE2 = "33", "34", "35"
WILDCARD_TEXT = "a {green frog|blue whale|red fox|grey owl|white cat|black dog|pink crab|gold fish}"


def wildcard_t2v(pick_seed: int, seed: int, *, cache_name: str, reuse: str = "auto") -> dict:
    p = graphs.wan_t2v_graph(seed=seed)
    p[WILDCARD] = {"class_type": "SeedReuseTestWildcard", "inputs": {"wildcard_text": WILDCARD_TEXT, "seed": pick_seed},
                   "_meta": {"title": "Wildcard"}}
    p[T2V.POS]["inputs"]["text"] = link(WILDCARD)
    add_session(p, cache_name, reuse)
    reuse_edge(p, T2V.POS, 0, T2V.SAMPLER, "positive", "positive", node_id="101")
    return p


def two_pass_t2v(first_seed: int, second_seed: int, *, cache_name: str, reuse: str = "auto") -> dict:
    p = graphs.wan_t2v_graph(seed=first_seed)
    add_session(p, cache_name, reuse)
    reuse_edge(p, T2V.POS, 0, T2V.SAMPLER, "positive", "positive", node_id="101")
    p[ENCODE2] = {"class_type": "VAEEncode", "inputs": {"pixels": link(T2V.DECODE), "vae": link(T2V.VAE)}}
    p[SAMPLER2] = {"class_type": "KSampler", "inputs": {
        "model": link(T2V.UNET), "seed": int(second_seed), "steps": 2, "cfg": 1.0, "sampler_name": "euler",
        "scheduler": "simple", "positive": link("101"), "negative": link(T2V.NEG),
        "latent_image": link(ENCODE2), "denoise": 0.5}, "_meta": {"title": "Second pass"}}
    p[DECODE2] = {"class_type": "VAEDecode", "inputs": {"samples": link(SAMPLER2), "vae": link(T2V.VAE)}}
    p[T2V.VIDEO]["inputs"]["images"] = link(DECODE2)
    reuse_edge(p, ENCODE2, 0, SAMPLER2, "latent_image", "first_pass_latent", "Latent", node_id="102")
    return p


def enhancer_t2v(sampling: str, enhancer_seed: int, seed: int, *, cache_name: str, reuse: str = "auto") -> dict:
    p = graphs.wan_t2v_graph(seed=seed)
    p[LLM] = {"class_type": "SeedReuseTestLanguageModelLoader", "inputs": {"clip_name": tm.TEXT_ENCODER, "work_ms": 0}}
    inputs = {"clip": link(LLM), "prompt": "a frog on a leaf", "max_length": 256, "sampling_mode": sampling}
    if sampling == "on":
        inputs.update({"sampling_mode.temperature": 0.7, "sampling_mode.top_k": 64, "sampling_mode.top_p": 0.95,
                       "sampling_mode.min_p": 0.05, "sampling_mode.repetition_penalty": 1.05,
                       "sampling_mode.seed": int(enhancer_seed)})
    p[ENHANCER] = {"class_type": "TextGenerate", "inputs": inputs, "_meta": {"title": "Prompt enhancer"}}
    p[T2V.POS]["inputs"]["text"] = link(ENHANCER)
    add_session(p, cache_name, reuse)
    reuse_edge(p, T2V.POS, 0, T2V.SAMPLER, "positive", "positive", node_id="101")
    return p


def reader_t2v(seed: int, *, cache_name: str) -> dict:
    """The positive text from a node that reads the hidden prompt, its id and the workflow."""
    p = graphs.wan_t2v_graph(seed=seed)
    p[WILDCARD] = {"class_type": "SeedReuseTestPromptReader", "inputs": {"text": "a frog"}}
    p[T2V.POS]["inputs"]["text"] = link(WILDCARD)
    add_session(p, cache_name)
    reuse_edge(p, T2V.POS, 0, T2V.SAMPLER, "positive", "positive", node_id="101")
    return p


def _ui_node(nid: int, type_: str, ins=(), outs=(), widgets=(), widget_inputs=()) -> dict:
    inputs = [{"name": n, "type": t, "link": None} for n, t in ins]
    for name, t in widget_inputs:     # a widget input that takes a link (the frontend converts it)
        inputs.append({"name": name, "type": t, "widget": {"name": name}, "link": None})
    return {"id": nid, "type": type_, "pos": [nid * 40.0, 0.0], "size": [220.0, 90.0], "flags": {}, "order": nid,
            "mode": 0, "inputs": inputs, "outputs": [{"name": t, "type": t, "links": []} for t in outs],
            "properties": {}, "widgets_values": list(widgets)}


def _ui_links(nodes: dict, links: list, rows: list, as_dicts: bool) -> None:
    """rows: (link id, origin id, origin slot, target id, target input name)."""
    for lid, o, oslot, t, tname in rows:
        typ = None
        if o in nodes:
            nodes[o]["outputs"][oslot]["links"].append(lid)
            typ = nodes[o]["outputs"][oslot]["type"]
        tslot = None
        if t in nodes:
            tslot = next(i for i, inp in enumerate(nodes[t]["inputs"]) if inp["name"] == tname)
            nodes[t]["inputs"][tslot]["link"] = lid
            typ = typ or nodes[t]["inputs"][tslot]["type"]
        else:
            tslot = tname if isinstance(tname, int) else 0
        if as_dicts:
            links.append({"id": lid, "origin_id": o, "origin_slot": oslot, "target_id": t, "target_slot": tslot,
                          "type": typ})
        else:
            links.append([lid, o, oslot, t, tslot, typ])


def nested_subgraph_ui() -> dict:
    """A UI workflow whose prompt text is made two subgraphs deep: the root holds an instance of
    'outer' (text encoder inside), which holds an instance of 'inner' (a wildcard picking the text
    by its seed, and a primitive string node joined to it)."""
    inner_nodes = {31: _ui_node(31, "SeedReuseTestWildcard", outs=["STRING"],
                                widgets=["a {green frog|blue whale|red fox}", 5, "fixed"]),
                   32: _ui_node(32, "PrimitiveStringMultiline", outs=["STRING"], widgets=["at dawn"]),
                   33: _ui_node(33, "StringConcatenate", outs=["STRING"], widgets=["", "", " "],
                                widget_inputs=[("string_a", "STRING"), ("string_b", "STRING")])}
    inner_links: list = []
    _ui_links(inner_nodes, inner_links, [(41, 31, 0, 33, "string_a"), (42, 32, 0, 33, "string_b"),
                                         (43, 33, 0, -20, 0)], True)
    inner = {"id": "inner-sg", "name": "Pick a prompt", "nodes": list(inner_nodes.values()), "links": inner_links,
             "state": {"lastNodeId": 40, "lastLinkId": 50}, "inputs": [],
             "outputs": [{"id": "inner-out", "name": "STRING", "type": "STRING", "linkIds": [43]}],
             "inputNode": {"id": -10, "bounding": [0, 0, 120, 60]}, "outputNode": {"id": -20, "bounding": [900, 0, 120, 60]}}
    outer_nodes = {21: _ui_node(21, "inner-sg", outs=["STRING"]),
                   22: _ui_node(22, "SeedReuseTestTextEncoderLoader", outs=["CLIP"], widgets=[tm.TEXT_ENCODER, 0]),
                   23: _ui_node(23, "SeedReuseTestTextEncode", ins=[("clip", "CLIP")], outs=["CONDITIONING"],
                                widgets=["", 0], widget_inputs=[("text", "STRING")])}
    outer_links: list = []
    _ui_links(outer_nodes, outer_links, [(51, 21, 0, 23, "text"), (52, 22, 0, 23, "clip"), (53, 23, 0, -20, 0)], True)
    outer = {"id": "outer-sg", "name": "Encode the prompt", "nodes": list(outer_nodes.values()), "links": outer_links,
             "state": {"lastNodeId": 60, "lastLinkId": 60}, "inputs": [],
             "outputs": [{"id": "outer-out", "name": "CONDITIONING", "type": "CONDITIONING", "linkIds": [53]}],
             "inputNode": {"id": -10, "bounding": [0, 0, 120, 60]}, "outputNode": {"id": -20, "bounding": [900, 0, 120, 60]}}
    root = {1: _ui_node(1, "outer-sg", outs=["CONDITIONING"]),
            2: _ui_node(2, "ConditioningZeroOut", ins=[("conditioning", "CONDITIONING")], outs=["CONDITIONING"]),
            3: _ui_node(3, "UNETLoader", outs=["MODEL"], widgets=[tm.T2V, "default"]),
            4: _ui_node(4, "EmptyHunyuanLatentVideo", outs=["LATENT"], widgets=[64, 64, 9, 1]),
            5: _ui_node(5, "KSampler", ins=[("model", "MODEL"), ("positive", "CONDITIONING"),
                                            ("negative", "CONDITIONING"), ("latent_image", "LATENT")],
                        outs=["LATENT"], widgets=[7, "randomize", 2, 1.0, "euler", "simple", 1.0]),
            6: _ui_node(6, "VAELoader", outs=["VAE"], widgets=[tm.VAE]),
            7: _ui_node(7, "VAEDecode", ins=[("samples", "LATENT"), ("vae", "VAE")], outs=["IMAGE"]),
            8: _ui_node(8, "SaveImage", ins=[("images", "IMAGE")], widgets=["seedreuse_test/nested"])}
    links: list = []
    _ui_links(root, links, [(1, 1, 0, 2, "conditioning"), (2, 1, 0, 5, "positive"), (3, 2, 0, 5, "negative"),
                            (4, 3, 0, 5, "model"), (5, 4, 0, 5, "latent_image"), (6, 5, 0, 7, "samples"),
                            (7, 6, 0, 7, "vae"), (8, 7, 0, 8, "images")], False)
    return {"last_node_id": 70, "last_link_id": 70, "nodes": list(root.values()), "links": links,
            "definitions": {"subgraphs": [outer, inner]}, "version": 0.4, "extra": {}}
