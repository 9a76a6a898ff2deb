"""Insert the pack's nodes into the harness graphs (API format)."""
from __future__ import annotations

from types import SimpleNamespace

from . import graphs
from .graphs import I2V, T2V, insert_between, link

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


__all__ = ["add_session", "set_session", "reuse_edge", "t2v_reuse", "i2v_reuse", "segment_graph", "SEG", "SESSION"]


SEG = SimpleNamespace(START="200", WAN_I2V="210", SAMPLER="211", DECODE="212", BOUNDARY="213",
                      END="214", MERGE="215", SINE="216")


def segment_graph(image_name: str, seed: int, *, prefix_segments: int = 0, reuse: str = "auto",
                  cache_name: str = "segments", F: int = 9, M: int = 3, total_frames: int = 27,
                  fps: float = 16.0, audio: bool = True, prompt_text: str = "a talking test head",
                  steps: int = 2, encoders: str = "standin", audio_file: str | None = None) -> dict:
    """A multi-segment Wan 2.1 I2V continuation: each segment starts from the previous segment's
    last M frames (segment 0 from the reference image). Text and CLIP vision (``encoders``: the
    stock ViT-H or the stand-in, see graphs.py) are reused outside the loop; the loop body is
    WanImageToVideo -> KSampler -> VAEDecode -> Boundary Save. The audio track is a sine
    (SeedReuseTestSineAudio) or, with ``audio_file``, stock LoadAudio of that input file."""
    p = graphs.wan_i2v_graph(image_name, seed=0, prompt_text=prompt_text, steps=steps, fps=fps, encoders=encoders)
    for nid in (I2V.WAN_I2V, I2V.SAMPLER, I2V.DECODE, I2V.VIDEO, I2V.SAVE):
        p.pop(nid)
    add_session(p, cache_name, reuse, prefix_segments)
    p["101"] = {"class_type": "SeedReuseEncodeConditioning",
                "inputs": {"session": link(SESSION), "slot": "positive", "value": link(I2V.POS)}}
    p[I2V.NEG]["inputs"]["conditioning"] = link("101")
    p["105"] = {"class_type": "SeedReuseEncodeClipVision",
                "inputs": {"session": link(SESSION), "slot": "clip_vision", "value": link(I2V.CLIP_VISION_ENCODE)}}
    start = {"session": link(SESSION), "segment_frames": F, "motion_frames": M, "total_frames": total_frames,
             "fps": fps, "seed": seed, "initial_frames": link(I2V.IMAGE, 0)}
    if audio:
        start["audio"] = graphs.audio_source(p, SEG.SINE, seconds=total_frames / fps, sample_rate=16000,
                                             frequency=330.0, audio_file=audio_file)
    p[SEG.START] = {"class_type": "SeedReuseSegmentLoopStart", "inputs": start}
    p[SEG.WAN_I2V] = {"class_type": "WanImageToVideo", "inputs": {
        "positive": link("101"), "negative": link(I2V.NEG), "vae": link(I2V.VAE), "width": 64, "height": 64,
        "length": link(SEG.START, 3), "batch_size": 1, "clip_vision_output": link("105"),
        "start_image": link(SEG.START, 4)}}
    p[SEG.SAMPLER] = {"class_type": "KSampler", "inputs": {
        "model": link(I2V.UNET), "seed": link(SEG.START, 6), "steps": steps, "cfg": 1.0, "sampler_name": "euler",
        "scheduler": "simple", "positive": link(SEG.WAN_I2V, 0), "negative": link(SEG.WAN_I2V, 1),
        "latent_image": link(SEG.WAN_I2V, 2), "denoise": 1.0}}
    p[SEG.DECODE] = {"class_type": "VAEDecode", "inputs": {"samples": link(SEG.SAMPLER), "vae": link(I2V.VAE)}}
    p[SEG.BOUNDARY] = {"class_type": "SeedReuseBoundarySave",
                       "inputs": {"loop": link(SEG.START), "images": link(SEG.DECODE)}}
    p[SEG.END] = {"class_type": "SeedReuseSegmentLoopEnd",
                  "inputs": {"loop": link(SEG.START), "segment": link(SEG.BOUNDARY)}}
    p[SEG.MERGE] = {"class_type": "SeedReusePrefixMerge",
                    "inputs": {"segments": link(SEG.END), "filename_prefix": "seedreuse_test/segments"}}
    return p
