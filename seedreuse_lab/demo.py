"""The main job on an embedded default: two real ComfyUI workers sharing one cache folder.

Tiny generated Wan 2.1 models and counting stand-in encoders (with a realistic CPU cost) are
used, so it runs anywhere in about a minute. Printed for each run: where it ran, which
encoders/loaders/samplers executed, what the cache said, and the wall time.

    python -m seedreuse_lab.demo [--out DIR] [--clean]

Everything it makes (workers' folders with the result videos, the shared cache) stays in
./demo-output/ (or --out DIR; emptied at the start of each demo), so the paths and commands it
prints at the end still work after it exits; --clean removes the folder at the end instead.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from seedreuse_lab import encoder_models, graphs, tiny_models
from seedreuse_lab.graphs import I2V
from seedreuse_lab.reuse_graphs import SEG, i2v_reuse, segment_graph
from seedreuse_lab.worker import WorkerGroup

COSTS = {"text_work_ms": 1500, "loader_work_ms": 2000, "encoders": "stock"}   # stand-in umT5; real ViT-H


# node types that are encoders or their loaders (stock and the lab's stand-ins); the pack's own
# SeedReuseEncode* nodes are not encoders
ENCODER_MARKS = ("TextEncode", "TextEncoderLoader", "CLIPLoader", "CLIPVision", "ClipVision", "AudioEncode",
                 "AudioEncoder", "VAEEncode")
MARKER = ".seedreuse-demo"   # in a folder the demo made (and may empty again)
_cold = {}                   # the last cold run (nothing reused): its wall time, the baseline of the rows after it


def is_encoder(class_type: str) -> bool:
    return not class_type.startswith("SeedReuseEncode") and any(m in class_type for m in ENCODER_MARKS)


def encoders_run(res, counts: dict | None = None) -> str:
    """The encoders and loaders the run executed, as 'CLIPVisionEncode ×1' (from the prompt the
    worker ran and its executed nodes; the stand-ins' counters where the prompt is not known)."""
    prompt = (res.history.get("prompt") or [None, None, {}])[2] if res.history else {}
    ran: dict = {}
    if prompt:
        for nid in res.executed:
            ct = (prompt.get(str(nid)) or {}).get("class_type", "")
            if is_encoder(ct):
                ran[ct] = ran.get(ct, 0) + 1
    else:
        ran = {k: v for k, v in (counts or {}).items() if v and ("encode" in k or "loader" in k)}
    return ", ".join(f"{k} ×{v}" for k, v in sorted(ran.items())) or "none"


def row(label, worker, res, counts, note=""):
    slots = {e["data"]["slot"]: e["data"]["action"] for e in res.events_of("seedreuse.slot")}
    samplers = sum(1 for e in res.events if e.get("type") == "executing"
                   and (e.get("data") or {}).get("display_node") in (I2V.SAMPLER, SEG.SAMPLER))
    reused = sum(1 for a in slots.values() if a == "reused")
    kept = sum(int((e.get("data") or {}).get("kept") or 0) for e in res.events_of("seedreuse.segments"))
    if not reused and not kept:
        _cold["seconds"] = res.seconds
        saved = "cold run"
    elif "seconds" in _cold:
        saved = f"saved {_cold['seconds'] - res.seconds:.1f} s vs the cold run"
    else:
        saved = ""
    what = f"slots reused {reused}/{len(slots)}" + (f", segments kept {kept}" if kept else "")
    print(f"{label:<28} {worker:<2} {res.status:<8} {res.seconds:6.2f} s ({saved})  samplers: {samplers}  {what}"
          f"{('  ' + note) if note else ''}")
    print(f"{'':<31} encoders/loaders run: {encoders_run(res, counts)}")


def prepare_out(base: Path) -> Path:
    """The demo's folder, emptied of a previous demo's workers and cache (only a folder the demo
    made itself: it holds the marker file)."""
    base = base.resolve()
    if base.exists() and any(base.iterdir()) and not (base / MARKER).is_file():
        raise SystemExit(f"[demo] {base} exists and was not made by the demo; pick another --out")
    for sub in ("workers", "cache", "models"):
        p = base / sub
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.is_dir():
            shutil.rmtree(p)
    base.mkdir(parents=True, exist_ok=True)
    (base / MARKER).write_text("made by python -m seedreuse_lab.demo\n")
    return base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", "--keep", dest="out", default=str(REPO / "demo-output"),
                    help="the folder for the workers, the result videos and the cache (default ./demo-output)")
    ap.add_argument("--clean", action="store_true", help="remove that folder when the demo ends")
    args = ap.parse_args()
    base = prepare_out(Path(args.out))
    print(f"[demo] output folder: {base}")
    print(f"[demo] tiny models: {tiny_models.ensure_tiny_models().root}")
    models = encoder_models.models_dir_with_encoders(tiny_models.ensure_tiny_models(),
                                                     encoder_models.ensure_encoder_models(), base / "models")
    group = WorkerGroup(base / "workers", 2, models_dir=models, cache_root=base / "cache")
    try:
        t0 = time.monotonic()
        a, b = group.start()
        print(f"[demo] two ComfyUI workers up in {time.monotonic() - t0:.1f}s: {a.url} {b.url}; "
              f"shared cache {group.cache_root}")
        for w in (a, b):
            graphs.write_test_image(Path(w.input_dir) / "reference.png", seed=3)
            graphs.write_test_wav(Path(w.input_dir) / "speech.wav", seconds=27 / 16.0, frequency=330.0)
        print("\n== Encoder Reuse: Wan 2.1 I2V (text, CLIP vision, VAE-encoded reference) ==")
        a.reset_counts()
        res = a.run(i2v_reuse("reference.png", seed=1, reuse="off", **COSTS), timeout=900).raise_for_status()
        row("seed 1, normal request", "A", res, a.counts(), "(creates the cache)")
        b.reset_counts()
        res = b.run(i2v_reuse("reference.png", seed=2, reuse="require", **COSTS), timeout=900).raise_for_status()
        row("seed 2, reuse=require", "B", res, b.counts(), "(other process)")
        print("\n== Segment Reuse: 4 segments of 9 frames, 3 motion frames, with audio ==")
        a.reset_counts()
        res = a.run(segment_graph("reference.png", seed=1, encoders="stock", audio_file="speech.wav"),
                    timeout=900).raise_for_status()
        row("seed 1, full video", "A", res, a.counts())
        b.reset_counts()
        res = b.run(segment_graph("reference.png", seed=2, prefix_segments=2, encoders="stock",
                                  audio_file="speech.wav"), timeout=900).raise_for_status()
        row("seed 2, keep 2 segments", "B", res, b.counts())
        manifest = json.loads((group.cache_root / "segments" / "manifest.json").read_text())
        seg = manifest["sections"]["segments"]
        print(f"{'':<31} merged {seg['frames']} frames; prefix {seg['prefix_frames']} frames "
              f"{seg['prefix_mode']} in {seg['merge_seconds'] * 1000:.0f} ms")
        out = res.output_files(SEG.MERGE)[0]
        video = Path(b.output_dir) / out.get("subfolder", "") / out["filename"]
        if args.clean:
            print(f"\n[demo] done; {base} is removed (--clean): run without --clean to keep the video and the cache")
        else:
            print(f"\n[demo] result video: {video}")
            print(f"[demo] inspect the cache: cd {shlex.quote(str(REPO))} && "
                  f"{shlex.quote(sys.executable)} -m reuse_backend --root {shlex.quote(str(group.cache_root))} list")
        return 0
    finally:
        group.stop()
        if args.clean:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
