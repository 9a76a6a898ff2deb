"""Benchmark section ``auto``: automatic mode (SEEDREUSE_AUTO=1) on an unchanged official template
(bench.py calls it; rows go into bench.ROWS through the helpers it passes in).

Two real ComfyUI workers with the setting on share one cache root. The API form of ComfyUI's
``text_to_video_wan`` template, as a client sends it (no SeedReuse node), on the tiny Wan 2.1
models, with the stand-in text encoder at a realistic CPU cost (encode 1500 ms, loader 2000 ms,
as the ``encoder`` section). Per repeat: worker A runs it cold (a new prompt text: a new
automatic cache; models unloaded, ComfyUI's cache cleared), then worker B runs the same prompt
with a new seed (the automatic cache's hit; B warm with another text first, so its models are
loaded). The cost of instrumenting on arrival is the server's own measure of it in each
prompt's report (``instrument_ms``: the instrumenter plus the cache name from the slot keys).
"""
from __future__ import annotations

from pathlib import Path

TEMPLATE = "text_to_video_wan"
COSTS = {"TextEncoderLoader": 2000, "TextEncode": 1500}


def _costed(p: dict) -> dict:
    for n in p.values():
        if "work_ms" in n["inputs"]:
            n["inputs"]["work_ms"] = next((ms for suffix, ms in COSTS.items() if n["class_type"].endswith(suffix)), 0)
    return p


def bench_auto(tmp: Path, R: int, h) -> None:
    from . import tiny_models as tm
    from .official_templates import NEWER_LAYOUTS, TEMPLATES, for_test_host, load_template
    from .worker import WorkerGroup
    from reuse_backend.workflow.ui_to_api import convert

    models = tm.ensure_tiny_models().link_models_dir(tmp / "models-auto")
    seeds = iter(range(5000, 100000))
    cold, hit, inst = [], [], []
    with WorkerGroup(tmp / "auto", 2, models_dir=models, cache_root=tmp / "auto-cache", name_prefix="auto",
                     env={"SEEDREUSE_AUTO": "1"}) as g:
        A, B = g
        api, _ = convert(load_template(TEMPLATE), A.object_info(), overrides=NEWER_LAYOUTS)

        def prompt(text: str) -> dict:
            p = _costed(for_test_host(api, TEMPLATES[TEMPLATE], seed=next(seeds), prefix="bench_auto"))
            sampler = next(n for n in p.values() if n["class_type"] in ("KSampler", "KSamplerAdvanced"))
            p[sampler["inputs"]["positive"][0]]["inputs"]["text"] += f" ({text})"     # the positive prompt
            return p

        for w in g:     # first-run warm-up of each process, not measured
            w.run(prompt("warm up"), timeout=600).raise_for_status()
        for k in range(R):
            h.log(f"  auto repeat {k + 1}/{R}")
            A.free()
            r = A.run(prompt(f"cold {k}"), timeout=600).raise_for_status()
            rep = r.history["prompt"][3]["seedreuse_auto_report"]
            assert rep["applied"], rep
            cold.append(r.seconds)
            inst.append(rep["instrument_ms"])
            B.run(prompt(f"other {k}"), timeout=600).raise_for_status()
            B.reset_counts()
            r = B.run(prompt(f"cold {k}"), timeout=600).raise_for_status()
            rep_b = r.history["prompt"][3]["seedreuse_auto_report"]
            assert rep_b["cache"] == rep["cache"], (rep_b, rep)
            c = B.counts()
            assert not c.get("text_encode") and not c.get("text_loader"), c
            hit.append(r.seconds)
            inst.append(rep_b["instrument_ms"])
    area = f"automatic mode ({TEMPLATE} template, unchanged API form, 32x32, 5 frames)"
    h.row(area, "cold run on worker A (text encoder + loader, new automatic cache)", h.fmt_s(cold))
    h.row(area, "same prompt, new seed, on worker B (automatic cache hit)", h.fmt_s(hit), "", None,
          f"saved {h.med(cold) - h.med(hit):.1f} s per request")
    ms = h.med(inst)
    h.row(area, "instrumenting on arrival (instrumenter + cache name from the slot keys), per prompt",
          f"{ms:.1f} ms (n={len(inst)}, {min(inst):.1f}-{max(inst):.1f})", "<= 2% of the hit",
          ms / 1000 <= 0.02 * h.med(hit), f"{100 * ms / 1000 / h.med(hit):.2f}% of the hit's wall time")
