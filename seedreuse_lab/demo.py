"""The main job on an embedded default: two real ComfyUI workers sharing one cache folder.

Tiny generated Wan 2.1 models and counting stand-in encoders (with a realistic CPU cost) are
used, so it runs anywhere in about a minute. Printed for each run: where it ran, which
encoders/loaders/samplers executed, what the cache said, and the wall time.

    python -m seedreuse_lab.demo [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from seedreuse_lab import graphs, tiny_models
from seedreuse_lab.graphs import I2V
from seedreuse_lab.reuse_graphs import SEG, i2v_reuse, segment_graph
from seedreuse_lab.worker import WorkerGroup

COSTS = {"text_work_ms": 1500, "loader_work_ms": 2000, "clip_vision_work_ms": 400}


def encoders_run(counts: dict) -> str:
    names = [f"{k}x{v}" for k, v in sorted(counts.items()) if v]
    return ", ".join(names) or "none"


def row(label, worker, res, counts, note=""):
    slots = {e["data"]["slot"]: e["data"]["action"] for e in res.events_of("seedreuse.slot")}
    samplers = sum(1 for e in res.events if e.get("type") == "executing"
                   and (e.get("data") or {}).get("display_node") in (I2V.SAMPLER, SEG.SAMPLER))
    reused = sum(1 for a in slots.values() if a == "reused")
    print(f"{label:<34} {worker:<3} {res.status:<8} {res.seconds:6.2f}s  samplers={samplers:<2} "
          f"slots reused {reused}/{len(slots)}  encoders/loaders run: {encoders_run(counts)} {note}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", help="keep the workers' folders and the cache here")
    args = ap.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="seedreuse-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"[demo] tiny models: {tiny_models.ensure_tiny_models().root}")
    models = tiny_models.ensure_tiny_models().link_models_dir(base / "models")
    group = WorkerGroup(base / "workers", 2, models_dir=models, cache_root=base / "cache")
    try:
        t0 = time.monotonic()
        a, b = group.start()
        print(f"[demo] two ComfyUI workers up in {time.monotonic() - t0:.1f}s: {a.url} {b.url}; "
              f"shared cache {group.cache_root}")
        for w in (a, b):
            graphs.write_test_image(Path(w.input_dir) / "reference.png", seed=3)
        print("\n== Encoder Reuse: Wan 2.1 I2V (text, CLIP vision, VAE-encoded reference) ==")
        a.reset_counts()
        res = a.run(i2v_reuse("reference.png", seed=1, reuse="off", **COSTS)).raise_for_status()
        row("seed 1, normal request", "A", res, a.counts(), "(creates the cache)")
        b.reset_counts()
        res = b.run(i2v_reuse("reference.png", seed=2, reuse="require", **COSTS)).raise_for_status()
        row("seed 2, reuse=require", "B", res, b.counts(), "(other process)")
        print("\n== Segment Reuse: 4 segments of 9 frames, 3 motion frames, with audio ==")
        a.reset_counts()
        res = a.run(segment_graph("reference.png", seed=1)).raise_for_status()
        row("seed 1, full video", "A", res, a.counts())
        b.reset_counts()
        res = b.run(segment_graph("reference.png", seed=2, prefix_segments=2)).raise_for_status()
        row("seed 2, keep 2 segments", "B", res, b.counts())
        manifest = json.loads((group.cache_root / "segments" / "manifest.json").read_text())
        seg = manifest["sections"]["segments"]
        print(f"{'':<34} merged {seg['frames']} frames; prefix {seg['prefix_frames']} frames "
              f"{seg['prefix_mode']} in {seg['merge_seconds'] * 1000:.0f} ms")
        out = res.output_files(SEG.MERGE)[0]
        print(f"\n[demo] result video: {Path(b.output_dir) / out.get('subfolder', '') / out['filename']}")
        print(f"[demo] inspect the cache: python -m reuse_backend --root {group.cache_root} list")
        return 0
    finally:
        group.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
