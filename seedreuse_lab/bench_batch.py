"""Benchmark section ``batch`` (issue 27): a batch of new seeds on several workers sharing a cache
(bench.py calls it; rows go into bench.ROWS through the helpers it passes in).

Three real ComfyUI workers on one cache root, the Wan T2V reuse graph (tiny models) with the
stand-in text encoder at a realistic CPU cost (encode 1500 ms, loader 2000 ms, as the ``encoder``
section). Per repeat, for each of "cold" (a new text: an empty cache; models unloaded, ComfyUI's
cache cleared) and "warm" (the same text again: the cache the cold batch committed), 8 requests
with new seeds are sent either all at once (round robin over the workers, then every one waited
for) or one after another (each waited for before the next, round robin). Measured: the batch's
wall time, the text encoder's executions (the stand-in's counters, summed over the workers) and
the failed requests. Ratios side by side; nothing is asserted on time.

The workers run with OMP_NUM_THREADS = CPUs // 3 (at least 1): three ComfyUI processes that each
start one torch thread per CPU oversubscribe the machine when they sample at the same time (on 2
cores, 8 warm requests at once took 12.9 s against 1.9 s one after another with the default, and
1.1 s against 2.0 s with one thread each; docs/BENCHMARKS.md 3d). A service sizes its workers'
threads the same way.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

COSTS = dict(text_work_ms=1500, loader_work_ms=2000)
N, WORKERS = 8, 3


def _batch(ws, prompts, at_once: bool) -> tuple[float, int]:
    t0 = time.monotonic()
    if at_once:
        handles = [ws[i % len(ws)].start_run(p) for i, p in enumerate(prompts)]
        res = [h.wait(timeout=1200) for h in handles]
    else:
        res = [ws[i % len(ws)].run(p, timeout=1200) for i, p in enumerate(prompts)]
    return time.monotonic() - t0, sum(r.status != "success" for r in res)


def bench_batch(tmp: Path, R: int, h) -> None:
    from . import tiny_models as tm
    from .reuse_graphs import t2v_reuse
    from .worker import WorkerGroup

    models = tm.ensure_tiny_models().link_models_dir(tmp / "models-batch")
    seeds = iter(range(20000, 1000000))
    res = {(mode, temp): {"wall": [], "encodes": [], "failures": []}
           for mode in ("at once", "one after another") for temp in ("cold", "warm")}
    threads = str(max(1, (os.cpu_count() or 1) // WORKERS))
    with WorkerGroup(tmp / "batch", WORKERS, models_dir=models, cache_root=tmp / "batch-cache",
                     name_prefix="batch", env={"OMP_NUM_THREADS": threads}) as g:
        ws = list(g)
        for w in ws:     # first-run warm-up of each process, not measured
            w.run(t2v_reuse(next(seeds), "warm up", cache_name="warmup", **COSTS), timeout=600).raise_for_status()
        for k in range(R):
            for mode in ("at once", "one after another"):
                h.log(f"  batch repeat {k + 1}/{R}: {mode}")
                text, cache = f"batch {k} {mode}", f"batch{k}{'a' if mode == 'at once' else 's'}"
                for temp in ("cold", "warm"):
                    if temp == "cold":
                        for w in ws:
                            w.free()
                    for w in ws:
                        w.reset_counts()
                    prompts = [t2v_reuse(next(seeds), text, cache_name=cache, **COSTS) for _ in range(N)]
                    wall, failed = _batch(ws, prompts, mode == "at once")
                    m = res[(mode, temp)]
                    m["wall"].append(wall)
                    m["encodes"].append(sum(w.counts().get("text_encode", 0) for w in ws))
                    m["failures"].append(failed)
    area = (f"a batch of {N} new seeds on {WORKERS} workers sharing one cache (T2V, 32x32, encoder 1.5 s + "
            f"loader 2 s, OMP_NUM_THREADS={threads} per worker)")
    for temp in ("cold", "warm"):
        a, s = res[("at once", temp)], res[("one after another", temp)]
        for mode, m in (("at once", a), ("one after another", s)):
            h.row(area, f"{temp}: {N} queued {mode}: wall time", h.fmt_s(m["wall"]), "", None,
                  f"text encoder ran {m['encodes']} time(s), failed requests {m['failures']} (per repeat)")
        h.row(area, f"{temp}: ratio at once / one after another (wall time)",
              f"{h.med(a['wall']) / h.med(s['wall']):.2f}", "", None,
              f"encoder runs {sum(a['encodes'])} vs {sum(s['encodes'])}, failures {sum(a['failures'])} vs "
              f"{sum(s['failures'])} (all repeats)")
