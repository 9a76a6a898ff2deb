"""Benchmark section ``full-size-llm`` (bench.py calls it; not in CI): Z-Image Turbo's Qwen3 4B text
encoder at its real size, through ComfyUI's own loader and encode node.

    CLIPLoader (type lumina2) + CLIPTextEncode   Qwen3 4B, 4.02 B parameters bf16 (fullsize_models.py:
                                                 generated from the host's Qwen3_4B class, seeded weights;
                                                 the tokenizer from the host tree)

The rest is the Z-Image Turbo graph (family_graphs.zimage_turbo, as the official template runs it)
with the generated Z-Image DiT (the host's full width, one block) at 256x256 and 2 steps, so
sampling stays short. Seeded random weights cost what a checkpoint costs (same shapes read, same
multiplications). Each row is one run on a FRESH worker process (its first prompt), one worker
alive at a time:

    plain  a worker WITHOUT the pack, the graph without the pack's nodes: the baseline;
    cold   a worker with the pack, empty cache: the loader and the encoder run, the slot is committed;
    hit    another fresh worker with the pack, a new seed, reuse=require: neither runs.

Before plain and cold the encoder file's pages are dropped from the page cache, so its load reads
from disk as a first load does. Load and encode are timed apart from the executing events
(CLIPLoader reads the weights; CLIPTextEncode moves them to the device and encodes). Peak RSS is
the worker's VmHWM after its run, anonymous and file-mapped shown apart. With
SEEDREUSE_WORKER_DEVICE=gpu (scripts/gpu_fullsize.sh) the workers run on CUDA and the rows add
each worker's peak GPU memory.
"""
from __future__ import annotations

from pathlib import Path

from . import bench_fullsize as bf
from . import family_graphs as fg
from . import fullsize_models as fm

WIDTH = HEIGHT = 256
STEPS = 2
TEXT = ("A lighthouse on a rocky coast at golden hour, waves breaking on the rocks, warm cinematic light, "
        "a flock of gulls over the water")
PACK_NODES = (fg.SESSION, fg.ZIMG.R_POS)
LOAD, ENCODE = fg.ZIMG.TEXT_LOADER, fg.ZIMG.POS


def graph(seed: int, *, cache_name: str | None, reuse: str = "auto") -> dict:
    """The Z-Image Turbo graph with the stock CLIPLoader on the real-size file: with the pack's
    nodes, or plain (``cache_name`` None: the prompt's encoding straight into the sampler)."""
    p = fg.zimage_turbo(seed, TEXT, cache_name=cache_name or "unused", reuse=reuse, width=WIDTH, height=HEIGHT,
                        steps=STEPS, filename_prefix="bench/zimage")
    p[LOAD] = {"class_type": "CLIPLoader", "inputs": {"clip_name": fm.QWEN3_4B, "type": "lumina2", "device": "default"}}
    if cache_name is None:
        for nid in PACK_NODES:
            p.pop(nid)
        p[fg.ZIMG.NEG]["inputs"]["conditioning"] = fg.link(fg.ZIMG.POS)
        p[fg.ZIMG.SAMPLER]["inputs"]["positive"] = fg.link(fg.ZIMG.POS)
    return p


def bench_fullsize_llm(tmp: Path, b) -> None:
    """``b``: bench.py's helpers (row, log, timed), passed in: no import back."""
    row, log, timed = b.row, b.log, b.timed
    models = fm.models_dir_fullsize_llm(tmp / "models-llm")
    te = models / "text_encoders" / fm.QWEN3_4B
    root = tmp / "llm-cache"
    root.mkdir(parents=True, exist_ok=True)
    runs = {}
    for key, prompt, pack, drop in (
            ("plain", graph(21, cache_name=None), False, [te]),
            ("cold", graph(22, cache_name="zimage"), True, [te]),
            ("hit", graph(23, cache_name="zimage", reuse="require"), True, [])):
        log(f"  full-size-llm: {key}")
        runs[key] = bf.one_run(tmp, f"llm-{key}", models, root, prompt, timed, with_pack=pack, drop=drop)
    plain, cold, hit = runs["plain"], runs["cold"], runs["hit"]
    for k in ("plain", "cold"):
        assert {LOAD, ENCODE} <= runs[k]["executed"], (k, "the loader and the encoder must run")
    assert not {LOAD, ENCODE} & hit["executed"], "the hit ran the text encoder or its loader"
    reused = [e["data"]["slot"] for e in hit["result"].events_of("seedreuse.slot") if e["data"]["action"] == "reused"]
    assert reused == ["positive"], reused

    area = (f"Z-Image Turbo's Qwen3 4B text encoder at real size (4.02 B parameters bf16, random weights; "
            f"Z-Image DiT one block, {WIDTH}x{HEIGHT}, {STEPS} steps)")
    fresh = "one run, a fresh worker process (its first prompt)"
    row(area, "without the pack: plain graph (loader and encoder run)", f"{plain['seconds']:.1f} s", "", None,
        fresh + "; the encoder file dropped from the page cache first")
    row(area, "cold with the pack: empty cache (loader and encoder run, the slot committed)",
        f"{cold['seconds']:.1f} s", "", None, f"{fresh}; the file dropped from the page cache first; "
        f"vs without the pack {cold['seconds'] / plain['seconds']:.2f}x")
    for label, nid in (("Qwen3 4B load (CLIPLoader)", LOAD), ("Qwen3 4B encode (CLIPTextEncode)", ENCODE)):
        row(area, f"  cold: {label}", f"{cold['durations'][nid]:.2f} s", "", None,
            f"without the pack {plain['durations'][nid]:.2f} s (from the executing events)")
    pack_s = sum(hit["durations"].get(n, 0.0) for n in PACK_NODES if n in hit["executed"])
    saved = cold["seconds"] - hit["seconds"]
    row(area, "hit on another worker: new seed, reuse=require (no text-encoder load, no encode)",
        f"{hit['seconds']:.1f} s", "", None,
        f"{fresh}; saved {saved:.1f} s vs cold ({cold['seconds'] / hit['seconds']:.1f}x): load "
        f"{cold['durations'][LOAD]:.1f} s + encode {cold['durations'][ENCODE]:.1f} s skipped; the pack's "
        f"nodes took {pack_s:.2f} s")
    slot = root / "zimage" / "slot_positive.safetensors"
    shapes = "; ".join(f"{k} {v}" for k, v in sorted(bf.slot_shapes(slot).items()))
    row(area, "artifact positive (the conditioning with its attention mask)", f"{slot.stat().st_size / 1e6:.2f} MB",
        "", None, f"{shapes}; vs {te.stat().st_size / 1e9:.2f} GB of encoder weights not read")
    for k, what in (("plain", "without the pack"), ("cold", "cold with the pack"), ("hit", "hit with the pack")):
        m = runs[k]["mem"]
        row(area, f"peak RSS of the worker, {what} (VmHWM)", bf._gib(m["VmHWM"]), "", None,
            f"after the run: RSS {bf._gib(m['VmRSS'])} = anonymous {bf._gib(m['RssAnon'])} + file-mapped "
            f"{bf._gib(m['RssFile'])}; idle before the prompt {bf._gib(runs[k]['idle_rss'])}")
    for k in ("plain", "cold", "hit"):
        if runs[k].get("gpu"):    # workers on CUDA (SEEDREUSE_WORKER_DEVICE=gpu, scripts/gpu_fullsize.sh)
            row(area, f"peak GPU memory of the worker, {k} (torch.cuda.max_memory_allocated)",
                bf._gib(runs[k]["gpu"]), "", None, "read over the stand-in pack's /seedreuse_test/gpu route after the run")
    log(f"  full-size-llm: plain {plain['seconds']:.1f} s, cold {cold['seconds']:.1f} s, hit {hit['seconds']:.1f} s")
