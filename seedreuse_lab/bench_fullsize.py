"""Benchmark section ``full-size`` (bench.py calls it; not in CI): the Wan 2.1 I2V + audio stack
with every encoder at its real size, through ComfyUI's own loaders and encoders.

    CLIPLoader (type wan) + CLIPTextEncode   umT5-XXL, 5.68 B parameters fp16 (fullsize_models.py)
    CLIPVisionLoader + CLIPVisionEncode      ViT-H/14 (encoder_models.py)
    VAELoader + WanImageToVideo              Wan 2.1 VAE encoding an 832x480 reference (length 1)
    AudioEncoderLoader + AudioEncoderEncode  wav2vec2 base (InfiniteTalk's), 5 s of audio

Seeded random weights (they cost the same time and memory as a checkpoint: same shapes read,
same multiplications); the DiT is the tiny one (tiny_models.py) so sampling stays short, on a
1-frame 832x480 latent. Each row is one run, each on a FRESH worker process (its first prompt),
one full-size worker alive at a time (this machine's RAM holds one umT5-XXL):

    plain  a worker WITHOUT the pack (only the stand-in pack, for the sink), the plain graph: the
           baseline cost and peak RSS of the stack;
    cold   a worker with the pack, the reuse graph on an empty cache (every loader and encoder
           runs, the slots are committed);
    hit    another fresh worker with the pack, a new seed, reuse=require: no loader or encoder of
           the reused values runs; the VAE loader still does (VAEDecode needs it).

Before plain and cold the encoder files' pages are dropped from the page cache
(posix_fadvise DONTNEED), so their loads read from disk as a first load does. Peak RSS is the
worker process's VmHWM (/proc/<pid>/status) after its run: it counts the model files' mapped
pages (RssFile) as well as the anonymous memory (RssAnon), both shown. As root, the same cold +
hit runs again with the cache on the GlusterFS strict volume (tests/shared_fs/fullsize_hit.py,
a subprocess: the lab never imports tests); otherwise that row says why it was skipped.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from . import encoder_models as em
from . import fullsize_models as fm
from . import graphs, host
from .graphs import AUDIO, I2V, link

AUDIO_S = 5.0
WIDTH, HEIGHT = 832, 480
STEPS = 2
TEXT = "a red fox running through fresh snow, golden hour"
LOADERS = {I2V.TEXT_LOADER: "umT5-XXL load", I2V.CLIP_VISION_LOADER: "ViT-H load",
           AUDIO.LOADER: "wav2vec2 base load"}
ENCODERS = {I2V.POS: "umT5-XXL encode (512 tokens)", I2V.CLIP_VISION_ENCODE: "ViT-H encode (224 px)",
            I2V.WAN_I2V: f"Wan 2.1 VAE encode ({WIDTH}x{HEIGHT} reference, WanImageToVideo)",
            AUDIO.ENCODE: f"wav2vec2 base encode ({AUDIO_S:g} s)"}
GLUSTER_MARKER = "SEEDREUSE_FULLSIZE_GLUSTER"
PACK_NODES = ("100", "101", "102", "103", "104", "105", "106")


def graph(seed: int, text: str, *, cache_name: str | None, reuse: str = "auto") -> dict:
    """The full-size I2V + audio graph: plain (cache_name None) or with the pack's slots."""
    from .reuse_graphs import i2v_reuse

    kw = dict(width=WIDTH, height=HEIGHT, length=1, steps=STEPS, encoders="stock", vae=fm.VAE)
    if cache_name is None:
        p = graphs.wan_i2v_graph("ref.png", seed, text, **kw)
        audio = link(AUDIO.ENCODE)
    else:
        p = i2v_reuse("ref.png", seed, text, cache_name=cache_name, reuse=reuse, **kw)
        audio = link("106")
    p[I2V.TEXT_LOADER] = {"class_type": "CLIPLoader",
                          "inputs": {"clip_name": fm.UMT5, "type": "wan", "device": "default"}}
    p[I2V.POS] = {"class_type": "CLIPTextEncode", "inputs": {"clip": link(I2V.TEXT_LOADER), "text": text}}
    graphs.add_audio_encoder(p, encoders="stock", audio_file="speech.wav")
    if cache_name is not None:
        p["106"] = {"class_type": "SeedReuseEncodeAudioFeatures",
                    "inputs": {"session": link("100"), "slot": "audio_features", "value": link(AUDIO.ENCODE)}}
    graphs.add_node(p, "SeedReuseTestSink", {"value": audio}, node_id="91")
    return p


def memory_of(pid: int) -> dict:
    """VmHWM / VmRSS / RssAnon / RssFile of a process, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) * 1024
    return out


def drop_file_pages(paths) -> None:
    """Evict the files' clean pages from the page cache (no privilege needed)."""
    for p in paths:
        fd = os.open(os.path.realpath(p), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def durations(starts: dict, total: float) -> dict:
    """node id -> seconds until the next node started (the last one: until the run ended)."""
    order = sorted(starts.items(), key=lambda kv: kv[1])
    return {nid: (order[i + 1][1] if i + 1 < len(order) else total) - t for i, (nid, t) in enumerate(order)}


def slot_shapes(path: Path) -> dict:
    """tensor name -> shape from a slot file's safetensors header (no data read)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__"}


def _worker(tmp: Path, name: str, models: Path, cache_root: Path, *, with_pack: bool):
    from .worker import ComfyWorker, default_custom_nodes

    nodes = default_custom_nodes() if with_pack else [c for c in default_custom_nodes() if c[0] != "ComfyUI-SeedReuse"]
    w = ComfyWorker(name, tmp / name, models_dir=models, custom_nodes=nodes,
                    env={"SEEDREUSE_CACHE_ROOT": str(cache_root)}, startup_timeout=600)
    w.start()
    graphs.write_test_image(Path(w.input_dir) / "ref.png", width=WIDTH, height=HEIGHT, seed=3)
    graphs.write_test_wav(Path(w.input_dir) / "speech.wav", seconds=AUDIO_S, sample_rate=16000, frequency=200.0)
    return w


def one_run(tmp, name, models, root, prompt, timed, *, with_pack: bool, drop=()) -> dict:
    """A fresh worker, one prompt, its memory, stopped. Returns seconds, node durations, memory."""
    w = _worker(tmp, name, models, root, with_pack=with_pack)
    try:
        drop_file_pages(drop)
        before = memory_of(w.proc.pid)
        r, st = timed(w, prompt, timeout=3600)
        mem = memory_of(w.proc.pid)
        gpu = w.get_json("/seedreuse_test/gpu") if os.environ.get("SEEDREUSE_WORKER_DEVICE") == "gpu" else {}
        return {"seconds": r.seconds, "durations": durations(st, r.seconds), "executed": set(r.executed),
                "mem": mem, "idle_rss": before["VmRSS"], "result": r, "gpu": gpu.get("max_allocated")}
    finally:
        w.stop()


def encoder_files(models: Path) -> list[Path]:
    """The encoder files of the full-size models dir (umT5-XXL first), and the VAE."""
    return [models / "text_encoders" / fm.UMT5, models / "clip_vision" / em.CLIP_VISION_H,
            models / "audio_encoders" / em.WAV2VEC2_BASE, models / "vae" / fm.VAE]


def _gib(n: float) -> str:
    return f"{n / 2 ** 30:.2f} GiB"


def bench_fullsize(tmp: Path, b) -> None:
    """``b``: bench.py's helpers (row, log, timed), passed in: no import back."""
    row, log, timed = b.row, b.log, b.timed
    models = fm.models_dir_fullsize(tmp / "models-fullsize")
    files = encoder_files(models)
    root = tmp / "fullsize-cache"
    root.mkdir(parents=True, exist_ok=True)
    text = TEXT
    log("  full-size: plain graph, worker without the pack")
    plain = one_run(tmp, "fs-plain", models, root, graph(11, text, cache_name=None), timed, with_pack=False,
                     drop=files)
    log("  full-size: cold, worker A with the pack, empty cache")
    cold = one_run(tmp, "fs-cold", models, root, graph(12, text, cache_name="fullsize"), timed, with_pack=True,
                    drop=files)
    log("  full-size: hit, worker B with the pack, new seed, reuse=require")
    hit = one_run(tmp, "fs-hit", models, root, graph(13, text, cache_name="fullsize", reuse="require"), timed,
                   with_pack=True)
    for k, r in (("plain", plain), ("cold", cold)):
        missing = [n for n in (*LOADERS, *ENCODERS) if n not in r["executed"]]
        assert not missing, (k, missing)
    ran = [n for n in (*LOADERS, *ENCODERS) if n in hit["executed"]]
    assert not ran, ("the hit ran", ran)
    reused = sorted(e["data"]["slot"] for e in hit["result"].events_of("seedreuse.slot")
                    if e["data"]["action"] == "reused")

    area = (f"full-size encoders (Wan 2.1 I2V {WIDTH}x{HEIGHT} 1 frame, tiny DiT {STEPS} steps; umT5-XXL, ViT-H/14, "
            "Wan 2.1 VAE, wav2vec2 base; random weights)")
    note_fresh = "one run, a fresh worker process (its first prompt); encoder files dropped from the page cache first"
    row(area, "without the pack: plain graph (every loader and encoder)", f"{plain['seconds']:.1f} s", "", None,
        note_fresh)
    row(area, "cold with the pack: empty cache (every loader and encoder, slots committed)",
        f"{cold['seconds']:.1f} s", "", None, note_fresh + f"; vs without the pack {cold['seconds'] / plain['seconds']:.2f}x")
    load_s = sum(cold["durations"][n] for n in LOADERS)
    enc_s = sum(cold["durations"][n] for n in ENCODERS)
    for n, label in {**LOADERS, **ENCODERS}.items():
        row(area, f"  cold: {label}", f"{cold['durations'][n]:.2f} s", "", None,
            f"without the pack {plain['durations'][n]:.2f} s (from the executing events)")
    pack_nodes = sorted(n for n in hit["executed"] if n in PACK_NODES)
    pack_s = sum(hit["durations"][n] for n in pack_nodes)
    saved = cold["seconds"] - hit["seconds"]
    row(area, "hit on another worker: new seed, reuse=require (0 encoder loads, 0 encodes)",
        f"{hit['seconds']:.1f} s", "", None,
        f"a fresh worker's first prompt; reused {', '.join(reused)}; saved {saved:.1f} s vs cold "
        f"({cold['seconds'] / hit['seconds']:.1f}x): loaders {load_s:.1f} s + encoders {enc_s:.1f} s skipped, "
        f"the pack's nodes took {pack_s:.2f} s ({', '.join(pack_nodes)})")
    row(area, "cost model: T_encoder (the skipped encodes) / encoder model loads (the skipped loaders, from disk) / "
        "T_load (the hit restoring its artifacts: the pack's nodes)", f"{enc_s:.1f} s / {load_s:.1f} s / {pack_s:.2f} s",
        "", None, "CPU, 2 cores; ComfyUI loads an encoder per worker on first use (and again after unloading it)")
    total = 0
    for s in reused:
        p = root / "fullsize" / f"slot_{s}.safetensors"
        size = p.stat().st_size
        total += size
        shapes = "; ".join(f"{k} {v}" for k, v in sorted(slot_shapes(p).items()))[:300]
        row(area, f"  artifact {s}", f"{size / 1e6:.2f} MB", "", None, shapes)
    row(area, "artifacts restored by the hit, total", f"{total / 1e6:.1f} MB", "", None,
        f"vs {sum(os.path.getsize(os.path.realpath(f)) for f in files[:3]) / 1e9:.1f} GB of encoder files not read")
    for k, r, what in (("plain", plain, "without the pack"), ("cold", cold, "cold with the pack"),
                       ("hit", hit, "hit with the pack")):
        m = r["mem"]
        row(area, f"peak RSS of the worker, {what} (VmHWM)", _gib(m["VmHWM"]), "", None,
            f"after the run: RSS {_gib(m['VmRSS'])} = anonymous {_gib(m['RssAnon'])} + file-mapped "
            f"{_gib(m['RssFile'])}; idle before the prompt {_gib(r['idle_rss'])}")
    row(area, "hit's peak RSS above the idle worker", _gib(hit["mem"]["VmHWM"] - hit["idle_rss"]), "", None,
        f"the VAE load + its {WIDTH}x{HEIGHT} decode, the tiny DiT and sampling, and the restored artifacts "
        f"({total / 2 ** 30:.2f} GiB); no encoder weights (umT5-XXL alone is {_gib(files[0].stat().st_size)} on disk)")
    for k, r in (("plain", plain), ("cold", cold), ("hit", hit)):
        if r.get("gpu"):          # workers on CUDA (SEEDREUSE_WORKER_DEVICE=gpu, scripts/gpu_fullsize.sh)
            row(area, f"peak GPU memory of the worker, {k} (torch.cuda.max_memory_allocated)", _gib(r["gpu"]),
                "", None, "read over the stand-in pack's /seedreuse_test/gpu route after the run")
    log(f"  full-size: plain {plain['seconds']:.1f} s, cold {cold['seconds']:.1f} s, hit {hit['seconds']:.1f} s")
    _gluster_rows(tmp, models, area, hit, row, log)


def _gluster_rows(tmp: Path, models: Path, area: str, local_hit: dict, row, log) -> None:
    """The same cold + hit with the cache on the GlusterFS strict volume (written through hostA's
    client, read through hostB's): tests/shared_fs/fullsize_hit.py in a subprocess, as root."""
    what = "the same hit through the GlusterFS strict volume (cold through hostA's client, hit through hostB's)"
    if os.geteuid() != 0:
        row(area, what, "skipped", "", None, "needs root (network namespaces, FUSE mounts): run the bench as root")
        return
    log("  full-size: the GlusterFS strict volume (tests/shared_fs/fullsize_hit.py)")
    p = subprocess.run([sys.executable, "-m", "tests.shared_fs.fullsize_hit", str(models), str(tmp / "gluster")],
                       cwd=str(host.REPO_ROOT), env=host.module_env(), stdout=subprocess.PIPE, stderr=sys.stderr,
                       text=True, timeout=3600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(GLUSTER_MARKER + " ")]
    res = json.loads(lines[-1].split(" ", 1)[1]) if lines else {"error": f"exit {p.returncode}, no result line"}
    if "skipped" in res or "error" in res:
        row(area, what, "skipped" if "skipped" in res else "FAILED", "", None if "skipped" in res else False,
            res.get("skipped") or res.get("error"))
        return
    cold, hit = res["cold"], res["hit"]
    row(area, "GlusterFS strict: cold with the cache root on hostA's mount", f"{cold['seconds']:.1f} s", "", None,
        f"{res['version']}; {res['options']}; environment up in {res['setup_s']:.0f} s (not counted)")
    row(area, "GlusterFS strict: hit on another worker, cache root on hostB's mount, new seed, reuse=require",
        f"{hit['seconds']:.1f} s", "", None,
        f"reused {', '.join(res['reused'])}; the pack's nodes took {res['hit_pack_s']:.2f} s "
        f"({', '.join(res['hit_pack_nodes'])}) vs {sum(local_hit['durations'][n] for n in local_hit['executed'] if n in PACK_NODES):.2f} s "
        f"from the local disk; the whole hit {hit['seconds'] / local_hit['seconds']:.2f}x the local one")
    row(area, "GlusterFS strict: peak RSS of the hit worker (VmHWM)", _gib(hit["mem"]["VmHWM"]), "", None,
        f"cold worker {_gib(cold['mem']['VmHWM'])}")

