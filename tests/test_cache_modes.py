"""Every host cache mode of ComfyUI 0.3.75: the default, --cache-classic, --cache-lru 4,
--cache-none and --cache-ram. The pack's nodes must give the same results under each: a
cross-worker Encoder Reuse hit (no encoder or loader runs on the second worker, sampling does,
the outputs differ), a cross-worker segment resume, and with --cache-none a same-worker
re-queue that reuses the encoders from the cache (ComfyUI itself keeps nothing there).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from seedreuse_lab import graphs
from seedreuse_lab.graphs import I2V, T2V
from seedreuse_lab.reuse_graphs import SEG, i2v_reuse, segment_graph, t2v_reuse

pytestmark = pytest.mark.comfy
MODES = {"default": (), "classic": ("--cache-classic",), "lru": ("--cache-lru", "4"),
         "none": ("--cache-none",), "ram": ("--cache-ram",)}
ENCODERS = ("text_encode", "text_loader", "clip_vision_encode", "clip_vision_loader")


def _ran(worker) -> dict:
    c = worker.counts()
    return {k: c.get(k, 0) for k in ENCODERS}


def _sampled(res, node) -> int:
    return sum(1 for e in res.events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == node)


@pytest.mark.parametrize("mode", list(MODES))
def test_reuse_under_host_cache_mode(comfy_workers, mode):
    a, b = comfy_workers(2, extra_args=MODES[mode])
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
    # Encoder Reuse across workers
    ra = a.run(i2v_reuse("ref.png", seed=1)).raise_for_status()
    assert all(v >= 1 for k, v in _ran(a).items()), _ran(a)
    rb = b.run(i2v_reuse("ref.png", seed=2, reuse="require")).raise_for_status()
    assert _ran(b) == dict.fromkeys(ENCODERS, 0), _ran(b)
    assert I2V.SAMPLER in rb.executed
    assert ra.output_files(I2V.SAVE) and rb.output_files(I2V.SAVE)
    # the same worker again with a new seed: from ComfyUI's memory or from the pack's cache,
    # never the encoders again (with --cache-none ComfyUI keeps nothing: the pack alone saves it)
    before = _ran(b)
    rb2 = b.run(i2v_reuse("ref.png", seed=3, reuse="require")).raise_for_status()
    assert _ran(b) == before and I2V.SAMPLER in rb2.executed
    # Segment Reuse across workers: full run on a, resume at N=2 with a new seed on b
    full = a.run(segment_graph("ref.png", seed=1)).raise_for_status()
    assert _sampled(full, SEG.SAMPLER) == 4
    res = b.run(segment_graph("ref.png", seed=5, prefix_segments=2)).raise_for_status()
    assert _sampled(res, SEG.SAMPLER) == 2
    kept = [e["data"] for e in res.events_of("seedreuse.segments")][0]
    assert kept["kept"] == 2
    merge = [e["data"] for e in res.events_of("seedreuse.merge")][0]
    assert merge["prefix_mode"] == "stream-copy" and merge["frames"] == 27
    # a volatile node upstream (change token NaN) is encoded again on every run, in every mode:
    # with --cache-none the host computes no change token, so the pack computes it itself
    p = t2v_reuse(seed=6, cache_name="volatile")
    p["30"] = {"class_type": "SeedReuseTestVolatileText", "inputs": {"text": "a frog"}}
    p[T2V.POS]["inputs"]["text"] = ["30", 0]
    for run in range(2):
        b.reset_counts()
        rv = b.run(p).raise_for_status()
        ev = [e["data"] for e in rv.events_of("seedreuse.slot")]
        assert [e["action"] for e in ev] == ["encoded"] and b.counts()["text_encode"] == 1, (run, ev)
