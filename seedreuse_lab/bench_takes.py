"""Benchmark section ``takes``: Segment Reuse take history (bench.py calls it; rows go into
bench.ROWS through the helpers it passes in).

  takes  on real ComfyUI workers (tiny Wan 2.1 I2V segment_graph, F=9 M=3, the segments
         section's --seg-steps and --seg-size, the stand-in encoders: their slots have the real
         umT5-XXL / ViT-H output sizes):
         (a) extend: a request that resumes a finished S-segment take at N = S with S + 2
             segments vs a request that generates 2 segments from scratch (same F, M, steps,
             size; same warm worker and cache, so the same slot hits and take carrying),
             interleaved (the order alternating per repeat), medians of --repeats; the target is
             the extension costing <= 1.05x;
         (b) disk: the bytes of the cache root after the same three full takes (new seeds) with
             K = 3 (SEEDREUSE_KEEP_TAKES) vs K = 1, each inode counted once (hard-linked files
             are one copy on disk); the target is <= 1.2x, the encoder slots being stored once.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

F, M, S = 9, 3, 4
DISK_TAKES = 3


def disk_bytes(root: Path, name: str) -> tuple[int, dict]:
    """(bytes of every distinct inode of cache ``name`` under root, its version folder and any
    ``<name>.*`` sibling (lock, staging, .old), per kind: slots / boundaries / results / other)."""
    seen, total, kinds = set(), 0, {"slots": 0, "boundaries": 0, "results": 0, "other": 0}
    tops = [root / e for e in os.listdir(root) if e == name or e.startswith(name + ".")]
    walks = [w for t in tops for w in (os.walk(t) if t.is_dir() else [(str(t.parent), [], [t.name])])]
    for dirpath, _dirs, files in walks:
        for f in files:
            st = os.lstat(os.path.join(dirpath, f))
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
            kind = ("boundaries" if "boundary" in f else "results" if f.endswith(".mp4")
                    else "slots" if f.startswith("slot_") else "other")
            kinds[kind] += st.st_size
    return total, kinds


def bench_takes(tmp: Path, R: int, steps: int, size: int, h) -> None:
    from . import graphs
    from . import tiny_models as tm
    from .reuse_graphs import SEG, segment_graph
    from .worker import WorkerGroup
    from reuse_backend.media import segments as seg

    models = tm.ensure_tiny_models().link_models_dir(tmp / "models-takes")

    def graph(s, n, segs, cache):
        p = segment_graph("ref.png", s, prefix_segments=n, cache_name=cache, F=F, M=M,
                          total_frames=seg.total_frames(segs, F, M), steps=steps)
        p[SEG.WAN_I2V]["inputs"].update(width=size, height=size)
        return p

    def sampled(r):
        return sum(1 for e in r.events if e.get("type") == "executing"
                   and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)

    def section(root, cache):
        return json.loads((root / cache / "manifest.json").read_text())["sections"]["segments"]

    area = f"take history ({size}x{size}, F={F} M={M}, {steps} steps)"
    ext, scratch, modes = [], [], set()
    pre = {"ext": [], "scratch": []}      # queue -> first KSampler start (the checks before sampling)
    merge = {"ext": [], "scratch": []}    # Prefix Merge's own time (merge_seconds of the segment section)

    def measured(kind, prompt):
        r, starts = h.timed(w, prompt)
        assert sampled(r) == 2, sampled(r)
        pre[kind].append(starts[SEG.SAMPLER])
        merge[kind].append(section(root, "ext")["merge_seconds"])
        return r
    disk = {}
    for keep in (3, 1):
        root = tmp / f"takes-cache-k{keep}"
        with WorkerGroup(tmp / f"takes-k{keep}", 1, models_dir=models, cache_root=root, name_prefix=f"btk{keep}",
                         env={"SEEDREUSE_KEEP_TAKES": str(keep)}) as g:
            w = g[0]
            graphs.write_test_image(Path(w.input_dir) / "ref.png", size, size, seed=7)
            if keep == 3:
                for s in (1, 2):     # warm-up: process, models, slots, first merge and resume
                    w.run(graph(s, 0, S, "ext")).raise_for_status()
                w.run(graph(3, 2, S, "ext")).raise_for_status()
                for k in range(R):
                    h.log(f"  takes repeat {k + 1}/{R}")

                    def from_scratch():
                        scratch.append(measured("scratch", graph(102 + 3 * k, 0, 2, "ext")).seconds)
                    if k % 2:          # alternate the order, so a drifting machine load favours neither
                        from_scratch()
                    w.run(graph(100 + 3 * k, 0, S, "ext")).raise_for_status()        # the finished take
                    ext.append(measured("ext", graph(101 + 3 * k, S, S + 2, "ext")).seconds)
                    modes.add(section(root, "ext")["prefix_mode"])
                    if not k % 2:
                        from_scratch()
            for k in range(DISK_TAKES):    # the same full takes in both caches
                r = w.run(graph(500 + k, 0, S, "disk")).raise_for_status()
                assert sampled(r) == S
            takes = json.loads((root / "disk" / "manifest.json").read_text())["sections"]["takes"]["takes"]
            assert len(takes) == min(keep, DISK_TAKES), [t["take"] for t in takes]
            disk[keep] = disk_bytes(root, "disk")
    ratio = h.med(ext) / h.med(scratch)

    def ms(xs):
        return f"{h.med(xs) * 1000:.0f} ms"
    h.row(area, f"extend a finished take S={S} -> S+2={S + 2} (resume at N={S})", h.fmt_s(ext), "", None,
          f"prefix modes {sorted(modes)}; queue -> first KSampler {ms(pre['ext'])}, Prefix Merge {ms(merge['ext'])}")
    h.row(area, "generate 2 segments from scratch (N=0, S=2)", h.fmt_s(scratch), "", None,
          f"queue -> first KSampler {ms(pre['scratch'])}, Prefix Merge {ms(merge['scratch'])}")
    h.row(area, f"ratio extend S->S+2 / 2 segments from scratch = {h.med(ext):.3f} / {h.med(scratch):.3f}",
          f"{ratio:.3f}", "<= 1.05", ratio <= 1.05,
          f"same sampling; the extension's Prefix Merge also stream-copies P({S}) frames and encodes the whole "
          f"new track (P({S + 2}) vs P(2) frames of audio, AAC)")
    (b3, k3), (b1, k1) = disk[3], disk[1]
    d = b3 / b1

    def mb(x):
        return f"{x / 1e6:.2f} MB"

    h.row(area, f"cache disk after {DISK_TAKES} takes, K=1 (distinct inodes)", mb(b1), "", None,
          ", ".join(f"{k} {mb(v)}" for k, v in k1.items()))
    h.row(area, f"cache disk after {DISK_TAKES} takes, K=3 (distinct inodes)", mb(b3), "", None,
          ", ".join(f"{k} {mb(v)}" for k, v in k3.items()))
    per_take = (k1["boundaries"] + k1["results"])
    h.row(area, f"disk ratio K=3 / K=1 = {mb(b3)} / {mb(b1)}", f"{d:.3f}", "<= 1.2", d <= 1.2,
          f"slots stored once ({mb(k3['slots'])}); one take's result + boundaries {mb(per_take)} "
          f"at {size}x{size} (boundaries are M float frames: they grow with the frame size)")
