"""SeedReuse benchmarks: prints ONE table; every row is measured in this run (medians over repeats).

    scripts/bench.sh [--repeats 5] [--only encoder,auto,batch,realenc,cachenone,umt5,segments,takes,merge,cacheio,memory,gpu,full-size,full-size-llm,object-store,bucket-scale]
                     [--real-repeats 3] [--json FILE]

Sections (each measured side by side, interleaved, medians):
  encoder   I2V graph (i2v_reuse) on real ComfyUI workers with the stand-in encoders at realistic CPU
            costs (text 1500 ms, CLIP vision 400 ms, loaders 2000 ms): cold run; ComfyUI's own
            same-process re-queue with a new seed; our cross-worker re-queue with a hit.
  auto      automatic mode (seedreuse_lab/bench_auto.py): the unchanged API form of the official
            text_to_video_wan template, cold on worker A vs the hit on worker B with a new seed, and
            the cost of instrumenting on arrival in ms per prompt.
  batch     a batch of new seeds on 3 workers sharing one cache (seedreuse_lab/bench_batch.py): 8
            queued at once vs the same 8 one after another, cold and warm: wall time, text-encoder
            executions, failed requests, and the ratios side by side.
  realenc, cachenone, umt5   the real ViT-H / wav2vec2 encoders and the full-size umT5-XXL probe
            (seedreuse_lab/bench_real.py; medians over --real-repeats, default 3: a cold run encodes
            the real ViT-H, seconds on 2 cores).
  segments  resume at N of S vs (S-N)/S of a full run, same worker, warm.
  takes     take history (seedreuse_lab/bench_takes.py): extending a finished S-segment take to S+2
            vs generating 2 segments from scratch; the cache's disk with K=3 vs K=1 kept takes.
  merge     stream-copy prefix merge vs an anchor-style full re-encode (bench_merge), prefix PSNR
            after 5 chained reuses.
  cacheio   plain backend: Cache.snapshot().load_slot/load_boundary throughput vs a raw sequential
            read of the same bytes (warm page cache; cold too when drop_caches is writable), and the
            begin + commit overhead of one request.
  memory    peak RSS of loading a cache's artifacts vs their size (fresh subprocess), and a prefix
            merge's peak RSS at 8 and 32 segments.
  gpu       full-size random-weight encoders and a Wan 2.1 1.3B-size DiT on CUDA (skipped without).
  full-size only with --only full-size (not in CI): umT5-XXL, ViT-H, the Wan 2.1 VAE at 832x480 and
            wav2vec2 at real size (seedreuse_lab/bench_fullsize.py): without the pack, cold, and a
            hit on another worker, one fresh worker each; load vs encode, artifact sizes, peak RSS.
  full-size-llm only with --only full-size-llm (not in CI; ComfyUI 0.33): Z-Image Turbo's Qwen3 4B
            text encoder at real size (seedreuse_lab/bench_fullsize_llm.py), the same three runs.
  object-store only with --only object-store (root; seedreuse_lab/bench_object_store.py): two
            simulated hosts, a hit through Ceph RGW (local tier cold) vs through GlusterFS strict
            vs from the local tier vs cold, bytes fetched per hit, commit time vs version size.
  bucket-scale only with --only bucket-scale (root; seedreuse_lab/bench_bucket_scale.py): S3
            requests and time per hit, commit and cache-browser list on Ceph RGW at 1, 100 and
            10,000 caches in a namespace and 1, 1,000 and 10,000 records in one cache.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from seedreuse_lab import host, raw_read

ROWS: list[dict] = []
SECTIONS = ("encoder", "auto", "batch", "realenc", "cachenone", "umt5", "segments", "takes", "merge", "cacheio",
            "memory", "gpu", "full-size", "full-size-llm", "object-store", "bucket-scale")
# only when asked for: full-size (~12 GB of models, minutes per run), full-size-llm (~8 GB), object-store
# (root, network namespaces, a Ceph cluster and a GlusterFS volume), bucket-scale (root, a Ceph cluster)
DEFAULT_SECTIONS = tuple(s for s in SECTIONS if s not in ("full-size", "full-size-llm", "object-store", "bucket-scale"))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def row(area, what, value, target="", ok=None, note=""):
    ROWS.append({"area": area, "measurement": what, "value": value, "target": target,
                 "verdict": "" if ok is None else ("PASS" if ok else "MISS"), "note": note})


def fmt_s(xs):
    return f"{med(xs):.3f} s" + (f" (n={len(xs)}, {min(xs):.3f}-{max(xs):.3f})" if len(xs) > 1 else "")


# ---------------------------------------------------------------------------- encoder reuse

def _timed(w, prompt, timeout=600):
    """Run a prompt following its events; returns (RunResult, {node id: seconds after queueing
    when it started executing})."""
    h = w.start_run(prompt)
    starts = {}
    deadline = time.monotonic() + timeout
    while h.terminal is None:
        ev = h._recv(deadline)
        if ev and ev.get("type") == "executing":
            node = (ev.get("data") or {}).get("node")
            if node is not None:
                starts.setdefault(str(node), time.monotonic() - h.t0)
    return h.wait(timeout).raise_for_status(), starts


def bench_encoder(tmp: Path, R: int, steps_list=(2, 20)) -> None:
    """Per repeat, interleaved: one cold run, then for each sampler step count: ComfyUI's own
    same-process re-queue (plain graph), the same worker re-queuing the reuse graph, and the
    cross-worker re-queue with a hit. steps=2 is the tiny test graph (sampling ~0.1 s, so the
    fixed per-request cost dominates); steps=20 gives sampling a share closer to a real run."""
    from seedreuse_lab import graphs
    from seedreuse_lab import tiny_models as tm
    from seedreuse_lab.reuse_graphs import i2v_reuse
    from seedreuse_lab.worker import WorkerGroup

    costs = dict(text_work_ms=1500, clip_vision_work_ms=400, loader_work_ms=2000)
    models = tm.ensure_tiny_models().link_models_dir(tmp / "models-enc")
    seed = iter(range(1000, 100000))
    cold = []
    res = {st: {"same": [], "same_nodes": [], "cross": [], "pre_same": [], "pre_cross": []} for st in steps_list}
    with WorkerGroup(tmp / "enc", 2, models_dir=models, cache_root=tmp / "enc-cache", name_prefix="bench") as g:
        A, B = g
        for w in g:
            graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=3)
        for w in g:   # first-run warm-up of each process (torch / model loading), not measured
            w.run(graphs.wan_i2v_graph("ref.png", seed=next(seed), prompt_text="warm up")).raise_for_status()
        for k in range(R):
            log(f"  encoder repeat {k + 1}/{R}")
            # cold: nothing in memory (models unloaded, ComfyUI cache cleared), nothing on disk
            A.free()
            A.reset_counts()
            r = A.run(i2v_reuse("ref.png", next(seed), f"cold prompt {k}", cache_name=f"cold{k}",
                                steps=steps_list[0], **costs), timeout=600).raise_for_status()
            c = A.counts()
            assert c["text_encode"] == 1 and c["clip_vision_encode"] == 1 and c["text_loader"] == 1, c
            cold.append(r.seconds)
            for st_n in steps_list:
                m = res[st_n]
                kw = dict(costs, steps=st_n)
                # ComfyUI's own same-process re-queue with a new seed (plain graph, no SeedReuse nodes)
                t = f"same prompt {k} {st_n}"
                B.run(graphs.wan_i2v_graph("ref.png", seed=next(seed), prompt_text=t, **kw)).raise_for_status()
                B.reset_counts()
                r, st = _timed(B, graphs.wan_i2v_graph("ref.png", seed=next(seed), prompt_text=t, **kw))
                assert not any(B.counts()[x] for x in ("text_encode", "clip_vision_encode")), B.counts()
                m["same"].append(r.seconds)
                m["pre_same"].append(st["7"])
                # the same worker re-queuing the reuse graph (our nodes restore from disk)
                t = f"same-nodes prompt {k} {st_n}"
                B.run(i2v_reuse("ref.png", next(seed), t, cache_name=f"s{k}x{st_n}", **kw)).raise_for_status()
                r = B.run(i2v_reuse("ref.png", next(seed), t, cache_name=f"s{k}x{st_n}", reuse="require",
                                    **kw)).raise_for_status()
                m["same_nodes"].append(r.seconds)
                # cross-worker: B warm with ANOTHER text (models loaded), A writes the cache, B re-queues
                c_name, t = f"x{k}x{st_n}", f"cross prompt {k} {st_n}"
                B.run(i2v_reuse("ref.png", next(seed), f"other prompt {k} {st_n}", cache_name=c_name,
                                **kw)).raise_for_status()
                A.run(i2v_reuse("ref.png", next(seed), t, cache_name=c_name, **kw)).raise_for_status()
                B.reset_counts()
                r, st = _timed(B, i2v_reuse("ref.png", next(seed), t, cache_name=c_name, reuse="require", **kw))
                m["pre_cross"].append(st["7"])
                cnt = B.counts()
                assert not any(cnt[x] for x in ("text_encode", "text_loader", "clip_vision_encode",
                                                "clip_vision_loader")), cnt
                acts = {e["data"]["slot"]: e["data"]["action"] for e in r.events_of("seedreuse.slot")}
                assert acts and all(a == "reused" for a in acts.values()), acts
                m["cross"].append(r.seconds)
    area = "encoder reuse (I2V, 64x64, 9 frames)"
    row(area, f"cold run, {steps_list[0]} steps (encoders + loaders, empty cache, models unloaded)", fmt_s(cold))
    for i, st_n in enumerate(steps_list):
        m = res[st_n]
        ratio = med(m["cross"]) / med(m["same"])
        row(area, f"{st_n} steps: ComfyUI same-process re-queue, new seed (B warm)", fmt_s(m["same"]))
        row(area, f"{st_n} steps: same worker re-queue, reuse graph (hit from disk)", fmt_s(m["same_nodes"]))
        row(area, f"{st_n} steps: cross-worker re-queue, new seed, reuse=require (hit)", fmt_s(m["cross"]))
        row(area, f"{st_n} steps: ratio cross-worker / same-process", f"{ratio:.3f}", "<= 1.05", ratio <= 1.05,
            f"difference {1000 * (med(m['cross']) - med(m['same'])):.0f} ms per request; "
            f"saved vs the cold run {med(cold) - med(res[steps_list[0]]['cross']):.1f} s" if i == 0 else
            f"difference {1000 * (med(m['cross']) - med(m['same'])):.0f} ms per request")
        row(area, f"{st_n} steps: queue -> KSampler start, same-process / cross-worker",
            f"{1000 * med(m['pre_same']):.0f} ms / {1000 * med(m['pre_cross']):.0f} ms", "", None,
            "the hit's own cost: Session + 3 Encode-or-Reuse nodes restoring WanImageToVideo's outputs "
            "(the nested text / CLIP vision slots are never evaluated), lock, snapshot" if i == 0 else "")


# ---------------------------------------------------------------------------- segment reuse

def bench_segments(tmp: Path, R: int, N: int, steps: int, size: int) -> None:
    from seedreuse_lab import graphs
    from seedreuse_lab import tiny_models as tm
    from seedreuse_lab.reuse_graphs import SEG, segment_graph
    from seedreuse_lab.worker import WorkerGroup
    from reuse_backend.media import segments as seg

    F, M, total = 9, 3, 27
    S = seg.segment_count(total, F, M)
    models = tm.ensure_tiny_models().link_models_dir(tmp / "models-seg")

    def graph(s, n):
        p = segment_graph("ref.png", s, prefix_segments=n, cache_name="segbench", F=F, M=M,
                          total_frames=total, steps=steps)
        p[SEG.WAN_I2V]["inputs"].update(width=size, height=size)
        return p

    def sampled(r):
        return sum(1 for e in r.events if e.get("type") == "executing"
                   and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)

    full, resume = [], []
    with WorkerGroup(tmp / "seg", 1, models_dir=models, cache_root=tmp / "seg-cache", name_prefix="bseg") as g:
        w = g[0]
        graphs.write_test_image(Path(w.input_dir) / "ref.png", size, size, seed=7)
        for s in (1, 2):     # warm-up: process, models, first merge
            w.run(graph(s, 0)).raise_for_status()
        for k in range(R):
            log(f"  segments repeat {k + 1}/{R}")
            r = w.run(graph(100 + 2 * k, 0)).raise_for_status()
            assert sampled(r) == S
            full.append(r.seconds)
            r = w.run(graph(101 + 2 * k, N)).raise_for_status()
            assert sampled(r) == S - N
            resume.append(r.seconds)
    ideal = (S - N) / S * med(full)
    ratio = med(resume) / ideal
    area = f"segment reuse ({size}x{size}, F={F} M={M} S={S}, {steps} steps)"
    row(area, "full run (N=0)", fmt_s(full))
    row(area, f"resume at N={N} (S-N={S - N} segments sampled)", fmt_s(resume))
    row(area, f"ratio resume / ((S-N)/S x full) = {med(resume):.3f} / {ideal:.3f}", f"{ratio:.3f}", "<= 1.05",
        ratio <= 1.05, "fixed per-request costs (graph, encoder slots, merge, commit) do not shrink with N")


# ---------------------------------------------------------------------------- merge

def bench_merge_row(tmp: Path, spec: str) -> None:
    from seedreuse_lab.bench_merge import bench_merge

    kv = dict(x.split("=") for x in spec.split(",") if "=" in x)
    w, h = (int(v) for v in spec.split(",")[0].split("x"))
    S, F, M = int(kv.get("S", 4)), int(kv.get("F", 81)), int(kv.get("M", 9))
    t0 = time.perf_counter()
    r = bench_merge(tmp / "merge", S, F, M, w, h, fps=25, chain=5)
    took = time.perf_counter() - t0
    area = f"merge ({w}x{h}, F={F} M={M} S={S}, N={r['N']}, {r['frames']} frames)"
    row(area, "stream-copy merge (mean of 5 chained)", f"{r['copy_merge_s']:.3f} s")
    row(area, "anchor-style full re-encode (mean of 5 chained)", f"{r['reencode_merge_s']:.3f} s")
    row(area, "speed ratio re-encode / stream-copy", f"{r['speedup']:.1f}x", "> 1", r["speedup"] > 1)

    def p(x):
        return "inf (bit-exact)" if x == math.inf else f"{x:.2f} dB"
    row(area, "prefix PSNR after 5 chained reuses: stream-copy", p(r["copy_prefix_psnr"]), "inf",
        r["copy_prefix_psnr"] == math.inf, f"prefix modes {sorted(set(r['prefix_modes']))}")
    row(area, "prefix PSNR after 5 chained reuses: re-encode", p(r["reencode_prefix_psnr"]), "", None,
        f"bench took {took:.0f} s")
    shutil.rmtree(tmp / "merge", ignore_errors=True)


# ---------------------------------------------------------------------------- cache I/O

def artifacts():
    """Realistic encoder outputs / boundaries: (kind, name, value)."""
    import torch
    g = torch.Generator().manual_seed(0)

    def rnd(*shape, dtype=torch.float32):
        return torch.randn(shape, generator=g).to(dtype)

    layers = tuple(rnd(1, 1000, 1024) for _ in range(25))
    items = [
        ("slot", "text_positive", [[rnd(1, 512, 4096, dtype=torch.bfloat16), {"pooled_output": None}]]),
        ("slot", "text_negative", [[rnd(1, 512, 4096, dtype=torch.bfloat16), {"pooled_output": None}]]),
        ("slot", "audio_features", {"encoded_audio": layers[-1], "encoded_audio_all_layers": layers,
                                    "audio_samples": 320000}),
        ("slot", "reference_latent", {"samples": rnd(1, 16, 21, 60, 104)}),
    ]
    for i in range(8):
        items.append(("boundary", i, {"motion_frames": torch.rand((9, 480, 832, 3), generator=g)}))
    return items


def build_cache(root: Path, name: str = "io") -> tuple[int, float]:
    from reuse_backend.store import Cache
    t0 = time.perf_counter()
    with Cache(root, name).begin() as tx:
        for kind, key, value in artifacts():
            if kind == "slot":
                tx.stage_slot(key, value, key={"slot": key})
            else:
                tx.stage_boundary(key, value)
        tx.commit()
    with Cache(root, name).snapshot() as s:
        total = sum(e["bytes"] for e in s.manifest["files"].values())
    return total, time.perf_counter() - t0


def _load_all(root: Path, name: str, verify=None):
    from reuse_backend.store import Cache
    out = []
    with Cache(root, name).snapshot() as s:
        for slot in sorted(s.manifest["slots"]):
            out.append(s.load_slot(slot, verify=verify))
        for b in s.boundary_indices():
            out.append(s.load_boundary(b, verify=verify))
    return out


_RAW_BUF: list = []


def raw_read_fresh(root: Path, name: str) -> int:
    """Sequential read of every artifact file into new buffers that stay alive together, as a
    load's values do (seedreuse_lab/raw_read.py says why; no parsing)."""
    return raw_read.read_files(raw_read.artifact_files(root / name))


def _raw_read(root: Path, name: str) -> int:
    """Sequential read of every artifact file into one reused, pre-faulted buffer: the I/O
    upper bound (no allocation, no page faults, no parsing)."""
    d = root / name
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    biggest = max(os.path.getsize(d / f) for f in files)
    if not _RAW_BUF or len(_RAW_BUF[0]) < biggest:
        _RAW_BUF[:] = [bytearray(biggest)]
    view, n = memoryview(_RAW_BUF[0]), 0
    for f in files:
        with open(d / f, "rb", buffering=0) as fh:
            size = os.fstat(fh.fileno()).st_size
            got = 0
            while got < size:
                k = fh.readinto(view[got:size])
                if not k:
                    break
                got += k
            n += got
    return n


def _drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def bench_cacheio(tmp: Path, R: int) -> None:
    import torch  # (import cost not measured)
    from reuse_backend.store import Cache, RunInfo

    root = tmp / "io-root"
    total, build_s = build_cache(root)
    mb = total / 1e6
    area = f"cache I/O ({mb:.0f} MB: 2 text embeds bf16, wav2vec2 20 s + all 25 layers, 480p ref latent, 8 boundaries)"
    _load_all(root, "io")
    _raw_read(root, "io")
    load_w, load_v, raw_w, fresh_w = [], [], [], []
    for _ in range(R):
        t0 = time.perf_counter()
        raw_read_fresh(root, "io")
        fresh_w.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        vals = _load_all(root, "io")
        load_w.append(time.perf_counter() - t0)
        del vals
        t0 = time.perf_counter()
        vals = _load_all(root, "io", verify=True)
        load_v.append(time.perf_counter() - t0)
        del vals
        t0 = time.perf_counter()
        _raw_read(root, "io")
        raw_w.append(time.perf_counter() - t0)
    tp = lambda xs: mb / med(xs)  # noqa: E731
    ratio = tp(load_w) / tp(fresh_w)
    row(area, "raw sequential read into fresh buffers, warm page cache", f"{tp(fresh_w):.0f} MB/s")
    row(area, "raw sequential read into one reused buffer, warm (memcpy bound)", f"{tp(raw_w):.0f} MB/s")
    row(area, "load_slot/load_boundary (default: no sha256 pass), warm", f"{tp(load_w):.0f} MB/s",
        ">= 0.5 x raw (fresh buffers)", ratio >= 0.5,
        f"ratio {ratio:.2f}; vs the reused-buffer bound {tp(load_w) / tp(raw_w):.2f}")
    row(area, "load with verify=True (sha256 pass), warm", f"{tp(load_v):.0f} MB/s", "", None,
        f"ratio {tp(load_v) / tp(fresh_w):.2f}")
    if _drop_caches():
        load_c, raw_c = [], []
        for _ in range(max(2, R // 2)):
            _drop_caches()
            t0 = time.perf_counter()
            vals = _load_all(root, "io")
            load_c.append(time.perf_counter() - t0)
            del vals
            _drop_caches()
            t0 = time.perf_counter()
            raw_read_fresh(root, "io")
            raw_c.append(time.perf_counter() - t0)
        ratio_c = tp(load_c) / tp(raw_c)
        row(area, "raw sequential read into fresh buffers, cold (drop_caches)", f"{tp(raw_c):.0f} MB/s")
        row(area, "load_slot/load_boundary, cold (drop_caches)", f"{tp(load_c):.0f} MB/s",
            ">= 0.5 x raw (fresh buffers)", ratio_c >= 0.5, f"ratio {ratio_c:.2f}")
    else:
        row(area, "cold page cache", "not measured", "", None, "/proc/sys/vm/drop_caches not writable here")
    row(area, "write: stage all + commit (one transaction)", f"{mb / build_s:.0f} MB/s", "", None,
        f"{build_s:.2f} s incl. fsync")

    # commit overhead of one request: a resume-like transaction on this cache (carry 4 slots and
    # 4 boundaries, stage one new 43 MB boundary and a 1 MB result) -> begin and commit only
    cache = Cache(root, "io")
    begin_ms, commit_ms, carry_ms = [], [], []
    frames = torch.rand((9, 480, 832, 3))
    for k in range(R + 1):
        t0 = time.perf_counter()
        tx = cache.begin(RunInfo())
        t1 = time.perf_counter()
        for slot in sorted(tx.base.manifest["slots"]):
            tx.carry_slot(slot)
        for b in range(4):
            tx.carry_boundary(b)
        t2 = time.perf_counter()
        for b in range(4, 8):
            tx.stage_boundary(b, {"motion_frames": frames})
        path = tx.stage_path("result.mp4")
        with open(path, "wb") as f:
            f.write(os.urandom(1 << 20))
        tx.add_file("result.mp4")
        t3 = time.perf_counter()
        tx.commit()
        t4 = time.perf_counter()
        if k:     # the first one publishes result.mp4 for the first time: not counted
            begin_ms.append(1000 * (t1 - t0))
            carry_ms.append(1000 * (t2 - t1))
            commit_ms.append(1000 * (t4 - t3))
    row("commit overhead (plain backend, same cache)", "begin (lock, recovery, snapshot, staging)",
        f"{med(begin_ms):.1f} ms")
    row("commit overhead (plain backend, same cache)", "carry 4 slots + 4 boundaries (hard links)",
        f"{med(carry_ms):.1f} ms")
    row("commit overhead (plain backend, same cache)", "commit (fsyncs, manifest, renames, old removed)",
        f"{med(commit_ms):.1f} ms", "", None,
        f"begin + carry + commit = {med(begin_ms) + med(carry_ms) + med(commit_ms):.0f} ms per request")
    shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------- memory

_RSS = r"""
def _status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
"""

_LOAD_SCRIPT = _RSS + r"""
import json, sys
import torch
from reuse_backend.store import Cache
import reuse_backend.storage.serialize
with Cache({root!r}, "io").snapshot() as s:   # open once (fds, manifest) before the baseline
    pass
before = _status("VmRSS")
out = []
with Cache({root!r}, "io").snapshot() as s:
    for slot in sorted(s.manifest["slots"]):
        out.append(s.load_slot(slot))
    for b in s.boundary_indices():
        out.append(s.load_boundary(b))
print(json.dumps({{"before": before, "hwm": _status("VmHWM"), "rss": _status("VmRSS")}}))
"""

_MERGE_SCRIPT = _RSS + r"""
import json, sys
import av, numpy
from reuse_backend.media import video
before = _status("VmRSS")
rep = video.merge({out!r}, chunks=[{last!r}], prefix_source={prev!r}, prefix_frames={P}, audio=("copy", {prev!r}),
                  fps=25)
print(json.dumps({{"before": before, "hwm": _status("VmHWM"), "mode": rep.prefix_mode, "frames": rep.frames}}))
"""


def _sub(code: str) -> dict:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env=host.module_env())   # the repository importable via PYTHONPATH
    if p.returncode:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def bench_memory(tmp: Path) -> None:
    import numpy as np

    from reuse_backend.media import segments as seg
    from reuse_backend.media import video
    from seedreuse_lab.media_samples import synthetic_frames

    root = tmp / "mem-root"
    total, _ = build_cache(root)
    r = _sub(_LOAD_SCRIPT.format(repo=str(REPO), root=str(root)))
    peak = r["hwm"] - r["before"]
    ratio = peak / total
    row("memory", f"peak RSS loading all artifacts of a cache ({total / 1e6:.0f} MB)",
        f"{peak / 1e6:.0f} MB = {ratio:.2f}x", "<= 1.2x", ratio <= 1.2,
        f"resident after load {(r['rss'] - r['before']) / 1e6:.0f} MB")
    shutil.rmtree(root, ignore_errors=True)

    F, M, W, H, fps = 17, 5, 416, 240, 25
    res = {}
    for S in (8, 32):
        d = tmp / f"mem-merge-{S}"
        d.mkdir(parents=True, exist_ok=True)
        chunks = []
        for i in range(S):
            a, b = seg.new_frames_range(i, F, M)
            path = d / f"c{i:03d}.mp4"
            video.write_chunk(path, synthetic_frames(a, b, W, H), fps, preset="veryfast")
            chunks.append(str(path))
        n = seg.total_frames(S, F, M)
        t = np.arange(int(n * 16000 / fps)) / 16000
        wave = (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None]
        prev = d / "prev.mp4"
        video.merge(prev, chunks=chunks, audio=("encode", wave, 16000), fps=fps)
        last = d / "new_last.mp4"
        a, b = seg.new_frames_range(S - 1, F, M)
        video.write_chunk(last, synthetic_frames(a, b, W, H, 1), fps, preset="veryfast")
        P = seg.prefix_frames(S - 1, F, M)
        r = _sub(_MERGE_SCRIPT.format(repo=str(REPO), out=str(d / "out.mp4"), last=str(last), prev=str(prev), P=P))
        res[S] = (r["hwm"] - r["before"], os.path.getsize(prev), r["mode"], r["frames"])
        shutil.rmtree(d, ignore_errors=True)
    growth = res[32][0] - res[8][0]
    for S in (8, 32):
        row("memory", f"prefix merge peak RSS, {S} segments ({res[S][3]} frames, {W}x{H}, prefix {res[S][2]})",
            f"{res[S][0] / 1e6:.1f} MB", "", None, f"previous result {res[S][1] / 1e6:.1f} MB")
    row("memory", "prefix merge peak growth 8 -> 32 segments", f"{growth / 1e6:+.1f} MB",
        "no growth with length", growth < 0.25 * max(res[8][0], 1) and growth < 16e6,
        f"file size grew {(res[32][1] - res[8][1]) / 1e6:+.1f} MB")


# ---------------------------------------------------------------------------- GPU profile

def bench_gpu(R: int, steps: int, smoke_cpu: bool = False) -> None:
    import torch
    if not torch.cuda.is_available() and not smoke_cpu:
        row("GPU profile", "skipped: no CUDA GPU", "-")
        return
    import torch.nn.functional as Fn
    dev, dt = ("cuda", torch.bfloat16) if not smoke_cpu else ("cpu", torch.float32)
    k = 1 if not smoke_cpu else 16     # the CPU smoke test shrinks every width and length

    class Block(torch.nn.Module):
        def __init__(self, d, heads, ffn, ctx=None):
            super().__init__()
            self.h = heads
            self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.n1, self.n2, self.n3 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.cq = torch.nn.Linear(d, d) if ctx else None
            self.ckv = torch.nn.Linear(ctx, 2 * d) if ctx else None
            self.co = torch.nn.Linear(d, d) if ctx else None
            self.f1, self.f2 = torch.nn.Linear(d, ffn), torch.nn.Linear(ffn, d)

        def attn(self, q, k_, v):
            b, n, d = q.shape
            sp = lambda x: x.view(b, -1, self.h, d // self.h).transpose(1, 2)  # noqa: E731
            return Fn.scaled_dot_product_attention(sp(q), sp(k_), sp(v)).transpose(1, 2).reshape(b, n, d)

        def forward(self, x, c=None):
            q, k_, v = self.qkv(self.n1(x)).chunk(3, -1)
            x = x + self.o(self.attn(q, k_, v))
            if self.cq is not None:
                ck, cv = self.ckv(c).chunk(2, -1)
                x = x + self.co(self.attn(self.cq(self.n2(x)), ck, cv))
            return x + self.f2(Fn.gelu(self.f1(self.n3(x))))

    def stack(layers, d, heads, ffn, ctx=None):
        m = torch.nn.ModuleList(Block(d // k, max(1, heads // k), ffn // k, ctx and ctx // k)
                                for _ in range(max(1, layers // k)))
        return m.to(dev, dt).eval()

    def timed(fn):
        fn()
        ts = []
        for _ in range(R):
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if dev == "cuda":
                torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        return ts

    # (name, layers, width, heads, ffn, tokens): umT5-XXL encoder, CLIP ViT-H/14, wav2vec2-large
    encs = [("umT5-XXL text encoder, 512 tokens (5.7B-class)", 24, 4096, 64, 10240, 512),
            ("CLIP vision ViT-H/14, 257 tokens", 32, 1280, 16, 5120, 257),
            ("wav2vec2-large, 20 s audio (1000 frames)", 24, 1024, 16, 4096, 1000)]
    with torch.inference_mode():
        for name, L, d, h, ffn, n in encs:
            m = stack(L, d, h, ffn)
            x = torch.randn(1, max(8, n // k), d // k, device=dev, dtype=dt)

            def run(m=m, x=x):
                y = x
                for b in m:
                    y = b(y)
                return y
            row("GPU profile" + (" (CPU smoke, shrunk)" if smoke_cpu else ""), name, fmt_s(timed(run)))
            del m
        # Wan 2.1 1.3B-size DiT: 30 layers, dim 1536, ffn 8960, 12 heads, cross-attention to 512
        # text tokens of width 4096; one 480p segment of 81 frames = latent 21x60x104, patch 1x2x2
        tokens = 21 * 30 * 52
        dit = stack(30, 1536, 12, 8960, ctx=4096)
        x = torch.randn(1, max(8, tokens // (k * k)), 1536 // k, device=dev, dtype=dt)
        c = torch.randn(1, 512 // k, 4096 // k, device=dev, dtype=dt)

        def forward():
            y = x
            for b in dit:
                y = b(y, c)
            return y
        fw = timed(forward)
        seg_s = [2 * steps * t for t in fw]   # CFG: 2 forwards per step
        area = "GPU profile" + (" (CPU smoke, shrunk)" if smoke_cpu else "")
        row(area, f"Wan 2.1 1.3B-size DiT forward, 480p 81 frames ({tokens} tokens)", fmt_s(fw))
        t0 = time.perf_counter()
        for _ in range(2 * steps):
            forward()
        if dev == "cuda":
            torch.cuda.synchronize()
        row(area, f"one segment: {steps} steps x 2 (CFG) forwards, measured", f"{time.perf_counter() - t0:.3f} s",
            "", None, f"= {med(seg_s):.3f} s from the median forward")


# ---------------------------------------------------------------------------- main

def machine() -> dict:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    import torch
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "nproc": os.cpu_count(), "cpu": cpu, "ram": mem,
            "gpu": gpu, "load_avg_start": os.getloadavg(), "python": platform.python_version(),
            "torch": torch.__version__, "comfyui": f"{host.comfyui_version()} at {host.comfyui_dir()}",
            "command": " ".join(["scripts/bench.sh"] + sys.argv[1:])}


def print_table(info: dict) -> None:
    print(f"# SeedReuse benchmark ({info['date']})")
    print(f"machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, GPU {info['gpu']}; "
          f"python {info['python']}, torch {info['torch']}; ComfyUI {info['comfyui']}")
    print(f"load average at start {tuple(round(x, 2) for x in info['load_avg_start'])}, at end "
          f"{tuple(round(x, 2) for x in info['load_avg_end'])}; total {info['seconds']:.0f} s")
    print(f"command: {info['command']}\n")
    print("| area | measurement | value | target | verdict | note |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in ROWS:
        print(f"| {r['area']} | {r['measurement']} | {r['value']} | {r['target']} | {r['verdict']} | {r['note']} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--real-repeats", type=int, default=3, help="repeats of realenc and cachenone")
    ap.add_argument("--only", default=",".join(DEFAULT_SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    ap.add_argument("--merge", default="832x480,F=81,M=9,S=4", help="WxH,F=..,M=..,S=.. for bench_merge")
    ap.add_argument("--seg-steps", type=int, default=4)
    ap.add_argument("--seg-size", type=int, default=64)
    ap.add_argument("--seg-n", type=int, default=2)
    ap.add_argument("--gpu-steps", type=int, default=4)
    ap.add_argument("--gpu-smoke-cpu", action="store_true", help="run the GPU profile code shrunk on the CPU")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--tmp", type=Path, default=None)
    a = ap.parse_args(argv)
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        ap.error(f"unknown sections {bad}")
    info = machine()
    t_start = time.monotonic()
    tmp = a.tmp or Path(tempfile.mkdtemp(prefix="seedreuse-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    failures = []
    from types import SimpleNamespace
    from seedreuse_lab import (bench_auto, bench_batch, bench_bucket_scale, bench_fullsize, bench_fullsize_llm,
                               bench_object_store, bench_real, bench_takes)
    helpers = SimpleNamespace(row=row, fmt_s=fmt_s, med=med, log=log, timed=_timed)
    steps = {"encoder": lambda: bench_encoder(tmp, a.repeats),
             "auto": lambda: bench_auto.bench_auto(tmp, a.repeats, helpers),
             "batch": lambda: bench_batch.bench_batch(tmp, a.repeats, helpers),
             "realenc": lambda: bench_real.bench_real_encoders(tmp, a.real_repeats, helpers),
             "cachenone": lambda: bench_real.bench_cache_none(tmp, a.real_repeats, helpers),
             "umt5": lambda: bench_real.bench_umt5(tmp, helpers),
             "segments": lambda: bench_segments(tmp, a.repeats, a.seg_n, a.seg_steps, a.seg_size),
             "takes": lambda: bench_takes.bench_takes(tmp, a.repeats, a.seg_steps, a.seg_size, helpers),
             "merge": lambda: bench_merge_row(tmp, a.merge),
             "cacheio": lambda: bench_cacheio(tmp, a.repeats),
             "memory": lambda: bench_memory(tmp),
             "gpu": lambda: bench_gpu(a.repeats, a.gpu_steps, a.gpu_smoke_cpu),
             "full-size": lambda: bench_fullsize.bench_fullsize(tmp, helpers),
             "full-size-llm": lambda: bench_fullsize_llm.bench_fullsize_llm(tmp, helpers),
             "object-store": lambda: bench_object_store.bench_object_store(tmp, a.repeats, helpers),
             "bucket-scale": lambda: bench_bucket_scale.bench_bucket_scale(tmp, a.repeats, helpers)}
    try:
        for s in SECTIONS:
            if s not in only:
                continue
            t0 = time.monotonic()
            log(f"[bench] {s} ...")
            try:
                steps[s]()
            except Exception as e:  # noqa: BLE001 - one broken section must not hide the others
                failures.append(s)
                row(s, "FAILED", f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}", "", False)
                import traceback
                traceback.print_exc()
            log(f"[bench] {s} done in {time.monotonic() - t0:.0f} s")
    finally:
        if a.tmp is None:
            shutil.rmtree(tmp, ignore_errors=True)
    info["load_avg_end"] = os.getloadavg()
    info["seconds"] = time.monotonic() - t_start
    print_table(info)
    if a.json:
        a.json.write_text(json.dumps({"machine": info, "rows": ROWS}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
