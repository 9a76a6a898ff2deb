"""Insert the pack's nodes into the harness graphs (API format)."""
from __future__ import annotations

from . import graphs
from .graphs import I2V, T2V, add_node, insert_between, link

SESSION = "100"


def add_session(p: dict, cache_name: str = "default", reuse: str = "auto", prefix_segments: int = 0) -> str:
    p[SESSION] = {"class_type": "SeedReuseSession",
                  "inputs": {"cache_name": cache_name, "reuse": reuse, "reuse_prefix_segments": prefix_segments}}
    return SESSION


def set_session(p: dict, **inputs) -> dict:
    p[SESSION]["inputs"].update(inputs)
    return p


def reuse_edge(p: dict, src: str, src_index: int, dst: str, dst_input: str, slot: str,
               variant: str = "Conditioning", node_id: str | None = None) -> str:
    """Put an Encode-or-Reuse node of ``variant`` on the edge src[src_index] -> dst.dst_input."""
    nid = insert_between(p, src, src_index, dst, dst_input, f"SeedReuseEncode{variant}",
                         {"session": link(SESSION), "slot": slot}, input_name="value", node_id=node_id)
    # every other consumer of the same output reads the restored value too
    for other_id, node in p.items():
        if other_id in (nid,):
            continue
        for k, v in node["inputs"].items():
            if v == link(src, src_index) and not (other_id == dst and k == dst_input):
                node["inputs"][k] = link(nid, 0)
    return nid


def t2v_reuse(seed: int, prompt_text: str = "a tiny test video", *, cache_name="default", reuse="auto",
              **kw) -> dict:
    """Wan T2V with the positive conditioning (and the zero-out negative built from it) reused."""
    p = graphs.wan_t2v_graph(seed=seed, prompt_text=prompt_text, **kw)
    add_session(p, cache_name, reuse)
    reuse_edge(p, T2V.POS, 0, T2V.SAMPLER, "positive", "positive", node_id="101")
    if p[T2V.NEG]["class_type"] != "ConditioningZeroOut":
        reuse_edge(p, T2V.NEG, 0, T2V.SAMPLER, "negative", "negative", node_id="102")
    return p


def i2v_reuse(image_name: str, seed: int, prompt_text: str = "a tiny test video", *, cache_name="default",
              reuse="auto", **kw) -> dict:
    """Wan I2V: WanImageToVideo's outputs (text + CLIP vision + VAE-encoded reference) are reused,
    and inside it the text and CLIP vision outputs too (nested reuse)."""
    p = graphs.wan_i2v_graph(image_name, seed=seed, prompt_text=prompt_text, **kw)
    add_session(p, cache_name, reuse)
    reuse_edge(p, I2V.WAN_I2V, 0, I2V.SAMPLER, "positive", "i2v_positive", node_id="101")
    reuse_edge(p, I2V.WAN_I2V, 1, I2V.SAMPLER, "negative", "i2v_negative", node_id="102")
    reuse_edge(p, I2V.WAN_I2V, 2, I2V.SAMPLER, "latent_image", "i2v_latent", "Latent", node_id="103")
    reuse_edge(p, I2V.POS, 0, I2V.WAN_I2V, "positive", "text_positive", node_id="104")
    reuse_edge(p, I2V.CLIP_VISION_ENCODE, 0, I2V.WAN_I2V, "clip_vision_output", "clip_vision",
               "ClipVision", node_id="105")
    return p


__all__ = ["add_session", "set_session", "reuse_edge", "t2v_reuse", "i2v_reuse", "add_node", "SESSION"]
